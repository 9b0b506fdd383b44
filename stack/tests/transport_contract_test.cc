// The contract every net::Transport keeps (transport.h), run against each
// one: kernel TCP over 127.0.0.1 (with the default buffers, and with the
// smallest receive buffer and transmit backlog, which keep hitting "full",
// compaction and refusal), and lwIP over an in-process pipe link. Setup and
// addresses, byte-exact streams with random gather lists and many sizes,
// tx_space/-EAGAIN back-pressure, close/abort/peer-closed events, the
// callback rules around release(), refused and failed connects, poll
// timeouts and wake(). What only one transport does is tested in its own
// files (kernel_tcp_test.cc, stack/net/lwip/tests/).
#include <errno.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "stack/iwarp/fpdu_size.h"
#include "stack/net/lwip/tests/lwip_harness.h"
#include "stack/tests/kernel_tcp_harness.h"
#include "stack/tests/transport_fixture.h"

namespace softrdma::net::testing {
namespace {

using std::chrono::milliseconds;

struct KernelTcp : KernelTcpHarness<> {
  static constexpr const char* kLabel = "KernelTcp";
};
struct KernelTcpSmallBuffers : KernelTcpHarness<kKernelTcpMinRxBuffer, kKernelTcpMinTxBacklog> {
  static constexpr const char* kLabel = "KernelTcpSmallBuffers";
};
struct LwipPipe : LwipPipeHarness {
  static constexpr const char* kLabel = "LwipPipe";
};

struct HarnessName {
  template <typename H>
  static std::string GetName(int) {
    return H::kLabel;
  }
};

template <typename H>
class TransportContract : public TransportFixture<H> {};

using Harnesses = ::testing::Types<KernelTcp, KernelTcpSmallBuffers, LwipPipe>;
TYPED_TEST_SUITE(TransportContract, Harnesses, HarnessName);

TYPED_TEST(TransportContract, ListenConnectAccept) {
  this->connect_pair();
  EXPECT_STREQ(this->a_->name(), TypeParam::kName);
  StreamConn* client = this->client_;
  StreamConn* server = this->server_;
  const sockaddr_in server_ip = TypeParam::server_addr(0);
  const in_addr client_ip = TypeParam::client_ip();

  sockaddr_in la = this->listener_->addr();
  EXPECT_NE(la.sin_port, 0) << "port 0 must be replaced by an ephemeral port";
  EXPECT_EQ(la.sin_addr.s_addr, server_ip.sin_addr.s_addr);
  EXPECT_EQ(this->rb_.listener_of[server], this->listener_);
  EXPECT_EQ(client->peer_addr().sin_port, la.sin_port);
  EXPECT_EQ(client->peer_addr().sin_addr.s_addr, server_ip.sin_addr.s_addr);
  EXPECT_EQ(client->local_addr().sin_addr.s_addr, client_ip.s_addr);
  EXPECT_NE(client->local_addr().sin_port, 0);
  EXPECT_EQ(server->peer_addr().sin_port, client->local_addr().sin_port);
  EXPECT_EQ(server->peer_addr().sin_addr.s_addr, client_ip.s_addr);
  EXPECT_EQ(server->local_addr().sin_port, la.sin_port);

  for (StreamConn* c : {client, server}) {
    size_t m = iwarp::fpdu_size(c->max_segment());
    EXPECT_GE(m, 1024u);
    EXPECT_LE(m, 65536u - 8);
    EXPECT_EQ(m % 4, 0u);
    EXPECT_EQ(c->tx_space(), TypeParam::max_tx_space());
  }
  RxView v;
  EXPECT_EQ(server->rx_peek(&v, 1), 0u);

  this->release_pair();
  this->b_->close_listener(this->listener_);
}

TYPED_TEST(TransportContract, RandomSplitsBothWaysArriveIntact) {
  this->connect_pair();
  this->stream_both_ways(8 << 20);
  this->release_pair();
}

// One send of each size, from 1 byte past segment, FPDU and window-sized
// boundaries up to the whole tx_space(), checked byte for byte.
TYPED_TEST(TransportContract, ManySizesArriveIntact) {
  this->connect_pair();
  const size_t space = TypeParam::max_tx_space();
  std::vector<size_t> sizes;
  for (size_t s : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{7}, size_t{8},
                   size_t{63}, size_t{64}, size_t{1023}, size_t{1459}, size_t{1460},
                   size_t{1461}, size_t{2920}, size_t{4097}, size_t{65528}, size_t{65536},
                   size_t{131071}, space - 1, space}) {
    if (s <= space) sizes.push_back(s);
  }
  size_t total = 0;
  for (size_t s : sizes) total += s;
  const std::vector<uint8_t> data = random_bytes(total, 17);
  Sink sink{&data};
  this->rb_.read_hook = [&](StreamConn* c) {
    if (c == this->server_) sink.drain(c);
  };
  size_t sent = 0;
  for (size_t s : sizes) {
    SCOPED_TRACE(s);
    ASSERT_TRUE(this->poll_until([&] {
      sink.drain(this->server_);
      return this->client_->tx_space() >= s;
    }));
    iovec iov{const_cast<uint8_t*>(data.data() + sent), s};
    ASSERT_EQ(this->client_->tx_send(&iov, 1, s), 0);
    this->client_->tx_flush();
    sent += s;
  }
  EXPECT_TRUE(this->poll_until([&] {
    sink.drain(this->server_);
    return sink.received == total;
  }));
  EXPECT_EQ(sink.received, total);
  this->rb_.read_hook = nullptr;
  this->release_pair();
}

// A consumer that takes only whole records, spanning several segments or
// ending past a small buffer's end, must not stall; views of unconsumed
// bytes stay valid across rx_consume.
TYPED_TEST(TransportContract, WholeRecordConsumerNeverStalls) {
  this->connect_pair();
  constexpr size_t kRecord = 65536 - 8;
  const std::vector<uint8_t> data = random_bytes(kRecord * 64, 3);
  size_t received = 0;
  this->rb_.read_hook = [&](StreamConn* c) {
    if (c != this->server_) return;
    for (;;) {  // the 64 views may cover only part of what is buffered
      RxView v[64];
      size_t n = c->rx_peek(v, 64);
      size_t have = 0;
      for (size_t i = 0; i < n; ++i) have += v[i].len;
      if (have < kRecord) return;
      // Views stay valid while records before them are consumed.
      size_t vi = 0, voff = 0;
      while (have >= kRecord) {
        size_t need = kRecord;
        size_t at = received;
        while (need > 0) {
          size_t take = std::min(need, v[vi].len - voff);
          ASSERT_EQ(std::memcmp(v[vi].data + voff, data.data() + at, take), 0);
          at += take;
          need -= take;
          voff += take;
          if (voff == v[vi].len) {
            ++vi;
            voff = 0;
          }
        }
        c->rx_consume(kRecord);
        received += kRecord;
        have -= kRecord;
      }
    }
  };
  size_t sent = 0;
  auto end = Clock::now() + TypeParam::kDeadline;
  while (received < data.size() && Clock::now() < end) {
    while (sent < data.size()) {
      iovec iov{const_cast<uint8_t*>(data.data() + sent), kRecord};
      if (this->client_->tx_send(&iov, 1, kRecord) != 0) break;
      sent += kRecord;
    }
    this->client_->tx_flush();
    this->poll_both(TypeParam::kBusyUs);
  }
  EXPECT_EQ(received, data.size());
  this->rb_.read_hook = nullptr;
  this->release_pair();
}

// The peer does not read: its buffers fill, then the sender's, then tx_send
// refuses. Once the peer reads, on_writable fires, every byte arrives in
// order and the whole tx_space() comes back.
TYPED_TEST(TransportContract, SendBufferFillsThenDrains) {
  this->connect_pair();
  StreamConn* client = this->client_;
  StreamConn* server = this->server_;
  const std::vector<uint8_t> data = random_bytes(32 << 20, 9);
  const size_t chunk = std::min<size_t>(64 << 10, TypeParam::max_tx_space());
  size_t sent = 0;
  bool refused = false;
  auto end = Clock::now() + TypeParam::kDeadline;
  while (!refused && sent + chunk <= data.size() && Clock::now() < end) {
    iovec iov[2] = {{const_cast<uint8_t*>(data.data() + sent), 1000},
                    {const_cast<uint8_t*>(data.data() + sent + 1000), chunk - 1000}};
    int r = client->tx_send(iov, 2, chunk);
    if (r == -EAGAIN) {
      refused = true;
    } else {
      ASSERT_EQ(r, 0);
      sent += chunk;
    }
    client->tx_flush();
    this->poll_both(0);  // the server reads into its buffer until it is full
  }
  ASSERT_TRUE(refused) << "sent " << sent << " bytes without filling the send buffer";
  EXPECT_LT(client->tx_space(), chunk);
  // Under load the server may have read enough during the loop to drain an
  // earlier backlog; the one refused now must produce a later on_writable.
  const int writable_before = this->ra_.writable[client];
  this->poll_for(milliseconds(50));
  TypeParam::expect_peer_full(sent, server);

  Sink sink{&data};
  sink.partial = false;
  this->rb_.read_hook = [&](StreamConn* c) {
    if (c == server) sink.drain(c);
  };
  sink.drain(server);  // nothing re-arms reading but a consume
  ASSERT_TRUE(this->poll_until([&] {
    sink.drain(server);
    return sink.received == sent && this->ra_.writable[client] > writable_before;
  }));
  ASSERT_TRUE(this->poll_until([&] { return client->tx_space() == TypeParam::max_tx_space(); }))
      << "everything acknowledged frees the whole send buffer";
  this->rb_.read_hook = nullptr;
  this->release_pair();
}

TYPED_TEST(TransportContract, SendLargerThanSpaceIsRefusedWhole) {
  this->connect_pair();
  std::vector<uint8_t> big(TypeParam::max_tx_space() + 1, 1);
  iovec iov{big.data(), big.size()};
  EXPECT_EQ(this->client_->tx_send(&iov, 1, big.size()), -EAGAIN);
  EXPECT_EQ(this->client_->tx_send(&iov, 1, big.size() - 1), -EINVAL)
      << "total must match the iov";
  this->poll_for(milliseconds(50));
  RxView v;
  EXPECT_EQ(this->server_->rx_peek(&v, 1), 0u) << "a refused send must send nothing";
  this->release_pair();
}

TYPED_TEST(TransportContract, SendWhileConnectingIsQueued) {
  ASSERT_EQ(this->b_->listen(TypeParam::server_addr(0), 16, &this->listener_), 0);
  ASSERT_EQ(this->a_->connect(this->listener_->addr(), &this->client_), 0);
  char msg[] = "queued before the handshake";
  iovec iov{msg, sizeof(msg)};
  ASSERT_EQ(this->client_->tx_send(&iov, 1, sizeof(msg)), 0);
  this->client_->tx_flush();
  std::string got;
  this->rb_.read_hook = append_to(&got);
  ASSERT_TRUE(this->poll_until([&] { return got.size() == sizeof(msg); }));
  EXPECT_EQ(std::memcmp(got.data(), msg, sizeof(msg)), 0);
  EXPECT_EQ(this->ra_.connected[this->client_], 0);
  this->a_->release(this->client_);
  this->b_->release(this->rb_.accepted.at(0));
}

TYPED_TEST(TransportContract, ConnectWithoutListenerIsRefused) {
  // Borrow an ephemeral port, then free it so nobody listens there.
  Listener* l = nullptr;
  ASSERT_EQ(this->b_->listen(TypeParam::server_addr(0), 1, &l), 0);
  sockaddr_in dead = l->addr();
  this->b_->close_listener(l);

  StreamConn* c = nullptr;
  ASSERT_EQ(this->a_->connect(dead, &c), 0);
  ASSERT_TRUE(this->poll_until([&] { return this->ra_.connected.contains(c); }));
  EXPECT_EQ(this->ra_.connected[c], -ECONNREFUSED);
  char b = 0;
  iovec iov{&b, 1};
  EXPECT_LT(c->tx_send(&iov, 1, 1), 0);
  this->poll_for(milliseconds(20));
  EXPECT_FALSE(this->ra_.closed.contains(c)) << "a failed connect ends with on_connected";
  this->a_->release(c);
}

// Errors found by connect() itself are reported from poll() like any other.
TYPED_TEST(TransportContract, ConnectErrorIsReportedFromPoll) {
  StreamConn* c = nullptr;
  ASSERT_EQ(this->a_->connect(TypeParam::unreachable(), &c), 0);
  EXPECT_FALSE(this->ra_.connected.contains(c)) << "no callbacks outside poll()";
  ASSERT_TRUE(this->poll_until([&] { return this->ra_.connected.contains(c); }));
  EXPECT_EQ(this->ra_.connected[c], -ENETUNREACH);
  this->a_->release(c);
}

// Orderly close both ways: data before the FIN arrives first, the FIN is
// on_closed(0), the stream refuses sends after close(), and the side that
// got the FIN may still send (half-close).
TYPED_TEST(TransportContract, PeerCloseReportsEof) {
  this->connect_pair();
  StreamConn* client = this->client_;
  StreamConn* server = this->server_;
  std::string got, back;
  auto hook = [&, to_server = append_to(&got), to_client = append_to(&back)](StreamConn* c) {
    (c == server ? to_server : to_client)(c);
  };
  this->ra_.read_hook = hook;
  this->rb_.read_hook = hook;
  char msg[] = "last words";
  iovec iov{msg, sizeof(msg) - 1};
  ASSERT_EQ(client->tx_send(&iov, 1, iov.iov_len), 0);
  client->close();
  EXPECT_LT(client->tx_send(&iov, 1, iov.iov_len), 0);

  ASSERT_TRUE(this->poll_until([&] { return this->rb_.closed.contains(server); }));
  EXPECT_EQ(this->rb_.closed[server], 0);
  EXPECT_EQ(got, "last words");
  EXPECT_FALSE(this->ra_.closed.contains(client));

  char reply[] = "still here";
  iovec riov{reply, sizeof(reply) - 1};
  ASSERT_EQ(server->tx_send(&riov, 1, riov.iov_len), 0);
  server->tx_flush();
  server->close();
  ASSERT_TRUE(this->poll_until([&] { return this->ra_.closed.contains(client); }));
  EXPECT_EQ(this->ra_.closed[client], 0);
  EXPECT_EQ(back, "still here");
  this->release_pair();
  this->b_->close_listener(this->listener_);
}

// close() then release() at once must still deliver everything queued, and
// what arrived stays readable after the FIN.
TYPED_TEST(TransportContract, ReleaseAfterCloseStillDeliversEverything) {
  this->connect_pair();
  StreamConn* server = this->server_;
  const std::vector<uint8_t> data = random_bytes(16 << 20, 11);
  const size_t chunk = std::min<size_t>(64 << 10, TypeParam::max_tx_space());
  size_t sent = 0;
  while (sent + chunk <= data.size()) {
    iovec iov{const_cast<uint8_t*>(data.data() + sent), chunk};
    if (this->client_->tx_send(&iov, 1, chunk) != 0) break;
    sent += chunk;
  }
  ASSERT_LT(this->client_->tx_space(), TypeParam::max_tx_space()) << "expected queued bytes";
  this->client_->close();
  this->a_->release(this->client_);
  this->ra_.forbidden.insert(this->client_);

  Sink sink{&data};
  this->rb_.read_hook = [&](StreamConn* c) { sink.drain(c); };
  ASSERT_TRUE(this->poll_until([&] {
    sink.drain(server);
    return this->rb_.closed.contains(server);
  }));
  EXPECT_EQ(this->rb_.closed[server], 0);
  sink.partial = false;
  RxView v;
  while (server->rx_peek(&v, 1) > 0) sink.drain(server);
  EXPECT_EQ(sink.received, sent);
  this->rb_.read_hook = nullptr;
  this->b_->release(server);
}

TYPED_TEST(TransportContract, AbortResetsPeer) {
  this->connect_pair();
  char b = 'x';
  iovec iov{&b, 1};
  ASSERT_EQ(this->server_->tx_send(&iov, 1, 1), 0);  // unread data: RST even without linger
  this->server_->tx_flush();
  this->poll_for(milliseconds(20));
  this->client_->abort();
  this->ra_.forbidden.insert(this->client_);
  EXPECT_LT(this->client_->tx_send(&iov, 1, 1), 0);

  ASSERT_TRUE(this->poll_until([&] { return this->rb_.closed.contains(this->server_); }));
  int err = this->rb_.closed[this->server_];
  if (TypeParam::kExactReset) {
    EXPECT_EQ(err, -ECONNRESET);
  } else {
    EXPECT_TRUE(err == 0 || err == -ECONNRESET) << "err " << err;
  }
  this->poll_for(milliseconds(20));
  EXPECT_LT(this->server_->tx_send(&iov, 1, 1), 0);
  this->release_pair();
}

// An abort of an idle connection resets the peer; once a poll has seen the
// reset, sends fail with the sticky error, and on_closed came once.
TYPED_TEST(TransportContract, SendAfterPeerResetFails) {
  this->connect_pair();
  this->client_->abort();
  this->ra_.forbidden.insert(this->client_);
  ASSERT_TRUE(this->poll_until([&] { return this->rb_.closed.contains(this->server_); }));
  EXPECT_EQ(this->rb_.closed[this->server_], -ECONNRESET);
  std::vector<uint8_t> buf(4096, 7);
  iovec iov{buf.data(), buf.size()};
  int r = this->server_->tx_send(&iov, 1, buf.size());
  if (TypeParam::kExactReset) {
    EXPECT_EQ(r, -ECONNRESET);
  } else {
    EXPECT_TRUE(r == -ECONNRESET || r == -EPIPE) << "r " << r;
  }
  EXPECT_EQ(this->server_->tx_send(&iov, 1, buf.size()), r) << "the error sticks";
  this->poll_for(milliseconds(20));
  this->release_pair();
}

// Releasing a connection from inside its own callback suppresses the events
// still pending for it (here: the FIN right behind the data); the peer sees
// the stream end.
TYPED_TEST(TransportContract, ReleaseInsideCallbackSilencesConn) {
  this->connect_pair();
  StreamConn* client = this->client_;
  StreamConn* server = this->server_;
  this->rb_.read_hook = [&](StreamConn* c) {
    if (c != server) return;
    this->b_->release(c);
    this->rb_.forbidden.insert(c);
  };
  char msg[] = "bye";
  iovec iov{msg, 3};
  ASSERT_EQ(client->tx_send(&iov, 1, 3), 0);
  client->close();
  ASSERT_TRUE(this->poll_until([&] { return this->rb_.forbidden.contains(server); }));
  this->poll_for(milliseconds(50));
  EXPECT_FALSE(this->rb_.closed.contains(server));
  ASSERT_TRUE(this->poll_until([&] { return this->ra_.closed.contains(client); }));
  if (TypeParam::kGracefulRelease) {
    EXPECT_EQ(this->ra_.closed[client], 0) << "the released side closed gracefully";
  }
  this->rb_.read_hook = nullptr;
  this->a_->release(client);
}

// Closing a listener inside on_accept must not break the rest of the batch.
// lwIP resets the connection it had not reported yet; the kernel's may wait
// in its accept queue.
TYPED_TEST(TransportContract, CloseListenerInsideAccept) {
  ASSERT_EQ(this->b_->listen(TypeParam::server_addr(0), 16, &this->listener_), 0);
  StreamConn* x = nullptr;
  StreamConn* y = nullptr;
  ASSERT_EQ(this->a_->connect(this->listener_->addr(), &x), 0);
  ASSERT_EQ(this->a_->connect(this->listener_->addr(), &y), 0);
  int accepts = 0;
  this->rb_.accept_hook = [&](Listener*, StreamConn*) {
    if (accepts++ == 0) this->b_->close_listener(this->listener_);
  };
  ASSERT_TRUE(this->poll_until(
      [&] { return this->ra_.connected.contains(x) && this->ra_.connected.contains(y); }));
  this->poll_for(milliseconds(50));
  EXPECT_EQ(this->rb_.accepted.size(), 1u);
  if (TypeParam::kResetsUnreportedAccepts) {
    EXPECT_EQ(this->ra_.closed.size(), 1u) << "the unreported connection is reset";
  }
  for (StreamConn* c : this->rb_.accepted) this->b_->release(c);
  this->a_->release(x);
  this->a_->release(y);
}

TYPED_TEST(TransportContract, PollTimeoutIsHonoured) {
  auto start = Clock::now();
  EXPECT_EQ(this->a_->poll(this->ra_, 0), 0);
  EXPECT_EQ(this->a_->poll(this->ra_, 30'000), 0);
  auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(29));
  EXPECT_LT(took, milliseconds(2000));
}

// wake() from another thread ends a poll(-1). If it failed to, the helper
// connects to a listener of the polling transport after 3 s
// (TypeParam::rescue) so the test still ends.
TYPED_TEST(TransportContract, WakeInterruptsBlockingPoll) {
  ASSERT_EQ(this->a_->listen(TypeParam::server_addr(0), 16, &this->listener_), 0);
  const sockaddr_in rescue = this->listener_->addr();

  this->a_->wake();  // a wake that comes first is not lost
  auto start = Clock::now();
  EXPECT_EQ(this->a_->poll(this->ra_, -1), 0);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));

  std::atomic<bool> returned{false};
  std::thread helper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    this->a_->wake();
    auto until = Clock::now() + std::chrono::seconds(3);
    while (!returned && Clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
    if (!returned) TypeParam::rescue(rescue);
  });
  start = Clock::now();
  int r = this->a_->poll(this->ra_, -1);
  auto took = Clock::now() - start;
  returned = true;
  helper.join();
  EXPECT_EQ(r, 0);
  EXPECT_GE(took, milliseconds(50));
  EXPECT_LT(took, milliseconds(2000));
  EXPECT_TRUE(this->ra_.accepted.empty()) << "poll ended by the rescue connection, not wake()";
  for (StreamConn* c : this->ra_.accepted) this->a_->release(c);
  this->a_->close_listener(this->listener_);
}

}  // namespace
}  // namespace softrdma::net::testing
