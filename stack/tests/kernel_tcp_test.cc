// Kernel TCP transport over loopback: connection setup, byte-exact streaming
// through rx_peek/rx_consume and tx_send, the transmit backlog, close/abort
// reporting, callback hygiene after release(), and wake().

#include "stack/net/kernel_tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "stack/iwarp/fpdu_size.h"

namespace softrdma::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kDeadline = std::chrono::seconds(5);

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Records every callback and checks the callback rules as they happen.
class Recorder : public TransportEvents {
 public:
  void on_accept(Listener* l, StreamConn* c) override {
    check_alive(c);
    listener_of[c] = l;
    accepted.push_back(c);
  }
  void on_connected(StreamConn* c, int err) override {
    check_alive(c);
    EXPECT_FALSE(connected.contains(c)) << "on_connected twice";
    connected[c] = err;
  }
  void on_readable(StreamConn* c) override {
    check_alive(c);
    ++readable[c];
    if (read_hook) read_hook(c);
  }
  void on_writable(StreamConn* c) override {
    check_alive(c);
    ++writable[c];
  }
  void on_closed(StreamConn* c, int err) override {
    check_alive(c);
    closed[c] = err;
  }

  std::vector<StreamConn*> accepted;
  std::map<StreamConn*, Listener*> listener_of;
  std::map<StreamConn*, int> connected;
  std::map<StreamConn*, int> closed;
  std::map<StreamConn*, int> readable;
  std::map<StreamConn*, int> writable;
  std::set<StreamConn*> forbidden;  // released or aborted: must stay silent
  std::function<void(StreamConn*)> read_hook;

 private:
  void check_alive(StreamConn* c) {
    EXPECT_FALSE(forbidden.contains(c)) << "callback after release/abort";
    EXPECT_FALSE(closed.contains(c)) << "callback after on_closed";
  }
};

class KernelTcpTest : public ::testing::Test {
 protected:
  void make_transport() {
    t_ = make_kernel_tcp_transport();
    ASSERT_NE(t_, nullptr);
  }
  void make_transport(const KernelTcpOptions& options) {
    t_ = make_kernel_tcp_transport(options);
    ASSERT_NE(t_, nullptr);
  }

  // Polls until pred holds or the deadline passes; returns pred().
  bool poll_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = kDeadline) {
    auto end = Clock::now() + limit;
    while (!pred() && Clock::now() < end) {
      int r = t_->poll(rec_, 10'000);
      EXPECT_GE(r, 0);
    }
    return pred();
  }

  // Polls for a while, for tests that expect nothing to happen.
  void poll_for(std::chrono::milliseconds d) {
    auto end = Clock::now() + d;
    while (Clock::now() < end) t_->poll(rec_, 5'000);
  }

  // Listener on an ephemeral loopback port plus one established connection.
  void connect_pair() {
    ASSERT_EQ(t_->listen(loopback(0), 16, &listener_), 0);
    ASSERT_EQ(t_->connect(listener_->addr(), &client_), 0);
    ASSERT_TRUE(
        poll_until([&] { return rec_.connected.contains(client_) && !rec_.accepted.empty(); }));
    ASSERT_EQ(rec_.connected[client_], 0);
    server_ = rec_.accepted.front();
  }

  std::unique_ptr<Transport> t_;
  Recorder rec_;
  Listener* listener_ = nullptr;
  StreamConn* client_ = nullptr;
  StreamConn* server_ = nullptr;
};

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return v;
}

// Sends data[*sent, ...) in chunks cut into random gather lists until done or
// the backlog refuses one. The scratch copy is scribbled over after each
// send: tx_send must not keep pointers into the caller's memory.
void send_random_chunks(StreamConn* c, const std::vector<uint8_t>& data, size_t* sent,
                        std::mt19937& rng) {
  std::vector<uint8_t> scratch;
  while (*sent < data.size()) {
    size_t len = std::min<size_t>(data.size() - *sent, rng() % (256 << 10) + 1);
    scratch.assign(data.begin() + *sent, data.begin() + *sent + len);
    std::vector<size_t> cuts{0, len};
    for (int k = static_cast<int>(rng() % 8); k > 0; --k) cuts.push_back(rng() % (len + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<iovec> iov;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      iov.push_back(iovec{scratch.data() + cuts[i], cuts[i + 1] - cuts[i]});  // empties too
    }
    int r = c->tx_send(iov.data(), static_cast<int>(iov.size()), len);
    if (r == -EAGAIN) {
      EXPECT_LT(c->tx_space(), len);
      return;
    }
    ASSERT_EQ(r, 0);
    std::fill(scratch.begin(), scratch.end(), 0xA5);
    *sent += len;
  }
}

TEST_F(KernelTcpTest, ListenConnectAccept) {
  make_transport();
  connect_pair();
  EXPECT_STREQ(t_->name(), "kernel-tcp");

  sockaddr_in la = listener_->addr();
  EXPECT_NE(la.sin_port, 0) << "port 0 must be replaced by the ephemeral port";
  EXPECT_EQ(rec_.listener_of[server_], listener_);

  sockaddr_in cp = client_->peer_addr();
  EXPECT_EQ(cp.sin_port, la.sin_port);
  EXPECT_EQ(cp.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  EXPECT_EQ(server_->peer_addr().sin_port, client_->local_addr().sin_port);
  EXPECT_EQ(server_->local_addr().sin_port, la.sin_port);
  EXPECT_NE(client_->local_addr().sin_port, 0);

  for (StreamConn* c : {client_, server_}) {
    size_t m = iwarp::fpdu_size(c->max_segment());
    EXPECT_GE(m, 1024u);
    EXPECT_LE(m, 65536u - 8);
    EXPECT_EQ(m % 4, 0u);
  }
  EXPECT_EQ(client_->tx_space(), size_t{4} << 20);
  RxView v;
  EXPECT_EQ(server_->rx_peek(&v, 1), 0u);

  t_->release(client_);
  t_->release(server_);
  t_->close_listener(listener_);
}

class KernelTcpStreamTest : public KernelTcpTest, public ::testing::WithParamInterface<size_t> {};

// A few MiB one way with random gather lists and random partial consumption,
// checked byte for byte. The small buffer keeps hitting "full" and compaction.
TEST_P(KernelTcpStreamTest, RandomSplitsArriveIntact) {
  KernelTcpOptions opt;
  opt.rx_buffer_bytes = GetParam();
  make_transport(opt);
  connect_pair();

  const std::vector<uint8_t> data = random_bytes(6 << 20, 42);
  std::mt19937 rng(7);
  size_t sent = 0;
  size_t received = 0;
  auto drain_some = [&](StreamConn* c) {
    if (c != server_) return;
    RxView v;
    if (server_->rx_peek(&v, 1) == 0) return;
    ASSERT_LE(received + v.len, data.size());
    ASSERT_EQ(std::memcmp(v.data, data.data() + received, v.len), 0) << "at offset " << received;
    size_t n = rng() % 2 ? v.len : rng() % v.len + 1;  // often leave a remainder
    server_->rx_consume(n);
    received += n;
  };
  rec_.read_hook = drain_some;

  auto end = Clock::now() + kDeadline;
  while (received < data.size() && Clock::now() < end) {
    send_random_chunks(client_, data, &sent, rng);
    t_->poll(rec_, 1'000);
    drain_some(server_);  // a remainder may wait without new data arriving
  }
  EXPECT_EQ(sent, data.size());
  EXPECT_EQ(received, data.size());
  EXPECT_TRUE(rec_.closed.empty());
  t_->release(client_);
  t_->release(server_);
}

INSTANTIATE_TEST_SUITE_P(RxBuffer, KernelTcpStreamTest,
                         ::testing::Values(kKernelTcpMinRxBuffer, size_t{1} << 20));

// An engine that consumes only whole FPDUs must not stall on a partial one
// stuck at the end of a small buffer; views of unconsumed bytes must stay
// valid across rx_consume.
TEST_F(KernelTcpTest, WholeRecordConsumerNeverStalls) {
  KernelTcpOptions opt;
  opt.rx_buffer_bytes = kKernelTcpMinRxBuffer;
  make_transport(opt);
  connect_pair();

  constexpr size_t kRecord = 65536 - 8;
  const std::vector<uint8_t> data = random_bytes(kRecord * 64, 3);
  size_t received = 0;
  rec_.read_hook = [&](StreamConn* c) {
    RxView v;
    if (c->rx_peek(&v, 1) == 0) return;
    for (size_t off = 0; off + kRecord <= v.len; off += kRecord) {
      ASSERT_EQ(std::memcmp(v.data + off, data.data() + received, kRecord), 0);
      c->rx_consume(kRecord);  // v stays valid for the records after this one
      received += kRecord;
    }
  };

  size_t sent = 0;
  auto end = Clock::now() + kDeadline;
  while (received < data.size() && Clock::now() < end) {
    while (sent < data.size()) {
      iovec iov{const_cast<uint8_t*>(data.data() + sent), kRecord};
      if (client_->tx_send(&iov, 1, kRecord) != 0) break;
      sent += kRecord;
    }
    t_->poll(rec_, 1'000);
  }
  EXPECT_EQ(received, data.size());
  t_->release(client_);
  t_->release(server_);
}

// The peer does not read: the kernel buffers fill, then the backlog, then
// tx_send refuses. Once the peer reads, the backlog drains, on_writable
// fires and every byte arrives in order.
TEST_F(KernelTcpTest, BacklogFillsThenDrains) {
  make_transport();
  connect_pair();

  const std::vector<uint8_t> data = random_bytes(32 << 20, 9);
  constexpr size_t kChunk = 64 << 10;
  size_t sent = 0;
  bool refused = false;
  auto end = Clock::now() + kDeadline;
  while (!refused && sent + kChunk <= data.size() && Clock::now() < end) {
    iovec iov[2] = {{const_cast<uint8_t*>(data.data() + sent), 1000},
                    {const_cast<uint8_t*>(data.data() + sent + 1000), kChunk - 1000}};
    int r = client_->tx_send(iov, 2, kChunk);
    if (r == -EAGAIN) {
      refused = true;
    } else {
      ASSERT_EQ(r, 0);
      sent += kChunk;
    }
    t_->poll(rec_, 0);  // the server reads into its buffer until it is full
  }
  ASSERT_TRUE(refused) << "sent " << sent << " bytes without filling the backlog";
  EXPECT_LT(client_->tx_space(), kChunk);
  // Under load the server may have read enough during the loop to drain an
  // earlier backlog; the one refused now must produce a later on_writable.
  const int writable_before = rec_.writable[client_];
  poll_for(milliseconds(50));
  RxView v;
  ASSERT_EQ(server_->rx_peek(&v, 1), 1u);
  EXPECT_EQ(v.len, size_t{1} << 20) << "receive buffer should be full";

  size_t received = 0;
  auto drain = [&](StreamConn* c) {
    RxView w;
    if (c != server_ || c->rx_peek(&w, 1) == 0) return;
    ASSERT_LE(received + w.len, sent);
    ASSERT_EQ(std::memcmp(w.data, data.data() + received, w.len), 0);
    c->rx_consume(w.len);
    received += w.len;
  };
  rec_.read_hook = drain;
  drain(server_);  // nothing re-arms reading but a consume
  ASSERT_TRUE(
      poll_until([&] { return received == sent && rec_.writable[client_] > writable_before; }));
  EXPECT_EQ(client_->tx_space(), size_t{4} << 20);
  t_->release(client_);
  t_->release(server_);
}

TEST_F(KernelTcpTest, SendLargerThanBacklogIsRefusedWhole) {
  KernelTcpOptions opt;
  opt.tx_backlog_bytes = kKernelTcpMinTxBacklog;
  make_transport(opt);
  connect_pair();
  std::vector<uint8_t> big(kKernelTcpMinTxBacklog + 1, 1);
  iovec iov{big.data(), big.size()};
  EXPECT_EQ(client_->tx_send(&iov, 1, big.size()), -EAGAIN);
  EXPECT_EQ(client_->tx_send(&iov, 1, big.size() - 1), -EINVAL) << "total must match the iov";
  poll_for(milliseconds(50));
  RxView v;
  EXPECT_EQ(server_->rx_peek(&v, 1), 0u) << "a refused send must send nothing";
  t_->release(client_);
  t_->release(server_);
}

TEST_F(KernelTcpTest, SendWhileConnectingIsQueued) {
  make_transport();
  ASSERT_EQ(t_->listen(loopback(0), 16, &listener_), 0);
  ASSERT_EQ(t_->connect(listener_->addr(), &client_), 0);
  char msg[] = "queued before the handshake";
  iovec iov{msg, sizeof(msg)};
  ASSERT_EQ(client_->tx_send(&iov, 1, sizeof(msg)), 0);
  std::string got;
  rec_.read_hook = [&](StreamConn* c) {
    RxView v;
    if (c->rx_peek(&v, 1) == 0) return;
    got.append(reinterpret_cast<const char*>(v.data), v.len);
    c->rx_consume(v.len);
  };
  ASSERT_TRUE(poll_until([&] { return got.size() == sizeof(msg); }));
  EXPECT_EQ(std::memcmp(got.data(), msg, sizeof(msg)), 0);
  EXPECT_EQ(rec_.connected[client_], 0);
  t_->release(client_);
  t_->release(rec_.accepted.at(0));
}

TEST_F(KernelTcpTest, ConnectWithoutListenerIsRefused) {
  make_transport();
  // Borrow an ephemeral port, then free it so nobody listens there.
  Listener* l = nullptr;
  ASSERT_EQ(t_->listen(loopback(0), 1, &l), 0);
  sockaddr_in dead = l->addr();
  t_->close_listener(l);

  StreamConn* c = nullptr;
  ASSERT_EQ(t_->connect(dead, &c), 0);
  ASSERT_TRUE(poll_until([&] { return rec_.connected.contains(c); }));
  EXPECT_EQ(rec_.connected[c], -ECONNREFUSED);
  char b = 0;
  iovec iov{&b, 1};
  EXPECT_LT(c->tx_send(&iov, 1, 1), 0);
  poll_for(milliseconds(20));
  EXPECT_FALSE(rec_.closed.contains(c)) << "a failed connect ends with on_connected";
  t_->release(c);
}

// Errors found by connect() itself are reported from poll() like any other.
TEST_F(KernelTcpTest, ImmediateConnectErrorIsReportedFromPoll) {
  make_transport();
  sockaddr_in bcast = loopback(1);
  bcast.sin_addr.s_addr = htonl(INADDR_BROADCAST);  // TCP refuses broadcast at once
  StreamConn* c = nullptr;
  ASSERT_EQ(t_->connect(bcast, &c), 0);
  EXPECT_FALSE(rec_.connected.contains(c)) << "no callbacks outside poll()";
  ASSERT_TRUE(poll_until([&] { return rec_.connected.contains(c); }));
  EXPECT_EQ(rec_.connected[c], -ENETUNREACH);
  t_->release(c);
}

// Orderly close both ways: data before the FIN arrives first, the FIN is
// on_closed(0), and the stream refuses sends after close().
TEST_F(KernelTcpTest, PeerCloseReportsEof) {
  make_transport();
  connect_pair();
  std::string got;
  rec_.read_hook = [&](StreamConn* c) {
    RxView v;
    if (c->rx_peek(&v, 1) == 0) return;
    got.append(reinterpret_cast<const char*>(v.data), v.len);
    c->rx_consume(v.len);
  };
  char msg[] = "last words";
  iovec iov{msg, sizeof(msg) - 1};
  ASSERT_EQ(client_->tx_send(&iov, 1, iov.iov_len), 0);
  client_->close();
  EXPECT_LT(client_->tx_send(&iov, 1, iov.iov_len), 0);

  ASSERT_TRUE(poll_until([&] { return rec_.closed.contains(server_); }));
  EXPECT_EQ(rec_.closed[server_], 0);
  EXPECT_EQ(got, "last words");
  EXPECT_FALSE(rec_.closed.contains(client_));

  server_->close();
  ASSERT_TRUE(poll_until([&] { return rec_.closed.contains(client_); }));
  EXPECT_EQ(rec_.closed[client_], 0);
  t_->release(client_);
  t_->release(server_);
  t_->close_listener(listener_);
}

// close() then release() at once must still deliver the whole backlog.
TEST_F(KernelTcpTest, ReleaseAfterCloseStillFlushesBacklog) {
  make_transport();
  connect_pair();
  const std::vector<uint8_t> data = random_bytes(16 << 20, 11);
  constexpr size_t kChunk = 64 << 10;
  size_t sent = 0;
  while (sent + kChunk <= data.size()) {
    iovec iov{const_cast<uint8_t*>(data.data() + sent), kChunk};
    if (client_->tx_send(&iov, 1, kChunk) != 0) break;
    sent += kChunk;
  }
  ASSERT_LT(client_->tx_space(), size_t{4} << 20) << "expected a non-empty backlog";
  client_->close();
  t_->release(client_);
  rec_.forbidden.insert(client_);

  size_t received = 0;
  rec_.read_hook = [&](StreamConn* c) {
    RxView v;
    if (c->rx_peek(&v, 1) == 0) return;
    ASSERT_LE(received + v.len, sent);
    ASSERT_EQ(std::memcmp(v.data, data.data() + received, v.len), 0);
    c->rx_consume(v.len);
    received += v.len;
  };
  ASSERT_TRUE(poll_until([&] { return rec_.closed.contains(server_); }));
  EXPECT_EQ(rec_.closed[server_], 0);
  EXPECT_EQ(received, sent);
  t_->release(server_);
}

TEST_F(KernelTcpTest, AbortResetsPeer) {
  make_transport();
  connect_pair();
  char b = 'x';
  iovec iov{&b, 1};
  ASSERT_EQ(server_->tx_send(&iov, 1, 1), 0);  // unread data: RST even without linger
  poll_for(milliseconds(20));
  client_->abort();
  rec_.forbidden.insert(client_);
  EXPECT_LT(client_->tx_send(&iov, 1, 1), 0);

  ASSERT_TRUE(poll_until([&] { return rec_.closed.contains(server_); }));
  int err = rec_.closed[server_];
  EXPECT_TRUE(err == 0 || err == -ECONNRESET) << "err " << err;
  poll_for(milliseconds(20));
  EXPECT_LT(server_->tx_send(&iov, 1, 1), 0);
  t_->release(client_);
  t_->release(server_);
}

// A send that finds the stream reset fails at once, and poll() then reports
// on_closed exactly once.
TEST_F(KernelTcpTest, SendAfterPeerResetReportsClosed) {
  make_transport();
  connect_pair();
  client_->abort();
  rec_.forbidden.insert(client_);
  std::vector<uint8_t> buf(4096, 7);
  iovec iov{buf.data(), buf.size()};
  int r = 0;
  for (int i = 0; i < 4 && r == 0; ++i) r = server_->tx_send(&iov, 1, buf.size());
  EXPECT_TRUE(r == -ECONNRESET || r == -EPIPE) << "r " << r;
  EXPECT_EQ(server_->tx_send(&iov, 1, buf.size()), r) << "the error sticks";
  ASSERT_TRUE(poll_until([&] { return rec_.closed.contains(server_); }));
  EXPECT_LT(rec_.closed[server_], 0);
  poll_for(milliseconds(20));
  t_->release(client_);
  t_->release(server_);
}

// An abort of a conn whose only data is already read still resets the peer.
TEST_F(KernelTcpTest, AbortIdleConnectionResetsPeer) {
  make_transport();
  connect_pair();
  client_->abort();
  rec_.forbidden.insert(client_);
  ASSERT_TRUE(poll_until([&] { return rec_.closed.contains(server_); }));
  EXPECT_EQ(rec_.closed[server_], -ECONNRESET);
  t_->release(client_);
  t_->release(server_);
}

// Releasing a connection from inside its own callback suppresses the events
// still pending for it (here: the FIN right behind the data).
TEST_F(KernelTcpTest, ReleaseInsideCallbackSilencesConn) {
  make_transport();
  connect_pair();
  rec_.read_hook = [&](StreamConn* c) {
    if (c != server_) return;
    t_->release(c);
    rec_.forbidden.insert(c);
  };
  char msg[] = "bye";
  iovec iov{msg, 3};
  ASSERT_EQ(client_->tx_send(&iov, 1, 3), 0);
  client_->close();
  ASSERT_TRUE(poll_until([&] { return rec_.forbidden.contains(server_); }));
  poll_for(milliseconds(50));
  EXPECT_FALSE(rec_.closed.contains(server_));
  t_->release(client_);
}

// Closing a listener inside on_accept must not break the rest of the batch.
TEST_F(KernelTcpTest, CloseListenerInsideAccept) {
  make_transport();
  ASSERT_EQ(t_->listen(loopback(0), 16, &listener_), 0);
  StreamConn* a = nullptr;
  StreamConn* b = nullptr;
  ASSERT_EQ(t_->connect(listener_->addr(), &a), 0);
  ASSERT_EQ(t_->connect(listener_->addr(), &b), 0);
  int accepts = 0;
  struct Closer : Recorder {
    std::function<void()> hook;
    void on_accept(Listener* l, StreamConn* c) override {
      Recorder::on_accept(l, c);
      if (hook) hook();
    }
  } closer;
  closer.hook = [&] {
    if (accepts++ == 0) t_->close_listener(listener_);
  };
  auto end = Clock::now() + kDeadline;
  while (!(closer.connected.contains(a) && closer.connected.contains(b)) && Clock::now() < end) {
    t_->poll(closer, 10'000);
  }
  EXPECT_EQ(closer.accepted.size(), 1u);
  for (StreamConn* c : closer.accepted) t_->release(c);
  t_->release(a);
  t_->release(b);
}

TEST_F(KernelTcpTest, PollTimeoutIsHonoured) {
  make_transport();
  auto start = Clock::now();
  EXPECT_EQ(t_->poll(rec_, 0), 0);
  EXPECT_EQ(t_->poll(rec_, 30'000), 0);
  auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(29));
  EXPECT_LT(took, milliseconds(2000));
}

// wake() from another thread ends a poll(-1). If it failed to, the helper
// connects to a listener in the same set after 3 s so the test still ends.
TEST_F(KernelTcpTest, WakeInterruptsBlockingPoll) {
  make_transport();
  ASSERT_EQ(t_->listen(loopback(0), 16, &listener_), 0);
  const sockaddr_in rescue = listener_->addr();

  t_->wake();  // a wake that comes first is not lost
  auto start = Clock::now();
  EXPECT_EQ(t_->poll(rec_, -1), 0);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));

  std::atomic<bool> returned{false};
  std::thread helper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    t_->wake();
    auto until = Clock::now() + std::chrono::seconds(3);
    while (!returned && Clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
    if (!returned) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      ::connect(fd, reinterpret_cast<const sockaddr*>(&rescue), sizeof(rescue));
      ::close(fd);
    }
  });
  start = Clock::now();
  int r = t_->poll(rec_, -1);
  auto took = Clock::now() - start;
  returned = true;
  helper.join();
  EXPECT_EQ(r, 0);
  EXPECT_GE(took, milliseconds(50));
  EXPECT_LT(took, milliseconds(2000));
  EXPECT_TRUE(rec_.accepted.empty()) << "poll ended by the rescue connection, not wake()";
  for (StreamConn* c : rec_.accepted) t_->release(c);
}

}  // namespace
}  // namespace softrdma::net
