// The lwIP transport over in-process pipe links: two links in the one
// process-wide stack (10.0.0.1 on link A, 10.0.0.2 on link B, joined by a
// pipe) and routes that send A->B traffic out of link A and B->A out of link
// B, driven by two transports whose sources are those addresses. The checks
// follow kernel_tcp_test.cc (setup, byte-exact streams with random gather
// lists, backlog, close/abort/release rules), plus what is particular to a
// userspace stack: loopback to our own address, shared-pool exhaustion,
// the listen backlog, link removal, event ownership between transports,
// waiting on wait_fd(), and loss/duplication/reordering/corruption.
#include "stack/net/lwip/lwip_transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "stack/net/lwip/tests/pipe_link.h"

namespace softrdma::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::PipeFaults;
using testing::PipeLink;
using testing::PipeOptions;

constexpr auto kDeadline = std::chrono::seconds(10);
constexpr size_t kWindow = size_t{2} << 20;  // TCP_WND in lwipopts.h

in_addr ip4(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a;
}

sockaddr_in addr(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr = ip4(ip);
  return a;
}

// A pipe joining two links of the stack, with host routes that make each
// address's traffic leave through its own end.
struct Wire {
  PipeLink* end[2] = {};
  int link[2] = {-1, -1};
};

Wire add_wire(const char* ip0, const char* ip1, const PipeOptions& opt,
              LinkChecksums checksums = LinkChecksums::kAuto) {
  Wire w;
  auto [e0, e1] = testing::make_pipe_pair(opt);
  w.end[0] = e0.get();
  w.end[1] = e1.get();
  LwipStack& s = LwipStack::get();
  LwipLinkOptions lo;
  lo.checksums = checksums;
  w.link[0] = s.add_link(std::move(e0), ip4(ip0), ip4("255.255.255.0"), in_addr{}, lo);
  w.link[1] = s.add_link(std::move(e1), ip4(ip1), ip4("255.255.255.0"), in_addr{}, lo);
  EXPECT_GE(w.link[0], 0);
  EXPECT_GE(w.link[1], 0);
  EXPECT_EQ(s.add_route(ip4(ip1), 32, w.link[0]), 0);
  EXPECT_EQ(s.add_route(ip4(ip0), 32, w.link[1]), 0);
  return w;
}

// Links with wait fds, so the transports run in interrupt mode (wait_fd()
// >= 0) in this binary; lwip_engine_test covers busy polling.
PipeOptions wire_options() {
  PipeOptions o;
  o.wait_fd = true;
  o.buffers = 32768;
  return o;
}

Wire& main_wire() {
  static Wire w = add_wire("10.0.0.1", "10.0.0.2", wire_options());
  return w;
}

Wire& faulty_wire() {
  // Full checksums: this wire corrupts frames.
  static Wire w = add_wire("10.0.1.1", "10.0.1.2", wire_options(), LinkChecksums::kFull);
  return w;
}

uint64_t tx_packets(int link) {
  LinkCounters c;
  EXPECT_EQ(LwipStack::get().link_counters(link, &c), 0);
  return c.tx_packets;
}

uint64_t tx_bytes(int link) {
  LinkCounters c;
  EXPECT_EQ(LwipStack::get().link_counters(link, &c), 0);
  return c.tx_bytes;
}

// Records every callback and checks the callback rules as they happen.
class Recorder : public TransportEvents {
 public:
  void on_accept(Listener* l, StreamConn* c) override {
    check_alive(c);
    listener_of[c] = l;
    accepted.push_back(c);
    if (accept_hook) accept_hook(l, c);
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
  std::function<void(Listener*, StreamConn*)> accept_hook;

 private:
  void check_alive(StreamConn* c) {
    EXPECT_FALSE(forbidden.contains(c)) << "callback after release/abort";
    EXPECT_FALSE(closed.contains(c)) << "callback after on_closed";
  }
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
// the transport refuses one. The scratch copy is scribbled over after each
// send: tx_send must not keep pointers into the caller's memory.
void send_random_chunks(StreamConn* c, const std::vector<uint8_t>& data, size_t* sent,
                        std::mt19937& rng, size_t max_chunk = 256 << 10) {
  std::vector<uint8_t> scratch;
  while (*sent < data.size()) {
    size_t len = std::min<size_t>(data.size() - *sent, rng() % max_chunk + 1);
    scratch.assign(data.begin() + static_cast<ptrdiff_t>(*sent),
                   data.begin() + static_cast<ptrdiff_t>(*sent + len));
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
      break;
    }
    ASSERT_EQ(r, 0);
    std::fill(scratch.begin(), scratch.end(), 0xA5);
    *sent += len;
  }
  c->tx_flush();
}

// Checks and consumes what c has buffered, often leaving a remainder.
struct Sink {
  const std::vector<uint8_t>* data = nullptr;
  size_t received = 0;
  std::mt19937 rng{5};
  bool partial = true;

  void drain(StreamConn* c) {
    RxView v[16];
    size_t n = c->rx_peek(v, 16);
    size_t seen = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_LE(received + seen + v[i].len, data->size());
      ASSERT_EQ(std::memcmp(v[i].data, data->data() + received + seen, v[i].len), 0)
          << "at offset " << received + seen;
      seen += v[i].len;
    }
    if (seen == 0) return;
    size_t take = partial && rng() % 2 ? rng() % seen + 1 : seen;
    c->rx_consume(take);
    received += take;
  }
};

class LwipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    main_wire();
    a_ = make_lwip_transport({.source = ip4("10.0.0.1")});
    b_ = make_lwip_transport({.source = ip4("10.0.0.2")});
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    // Let the closes and resets of the destroyed transports play out.
    auto t = make_lwip_transport();
    Recorder r;
    for (int i = 0; i < 50; ++i) t->poll(r, 1'000);
  }

  void poll_both(int timeout_us = 0) {
    EXPECT_GE(a_->poll(ra_, timeout_us), 0);
    EXPECT_GE(b_->poll(rb_, 0), 0);
  }
  bool poll_until(const std::function<bool()>& pred, Clock::duration limit = kDeadline) {
    auto end = Clock::now() + limit;
    while (!pred() && Clock::now() < end) poll_both();
    return pred();
  }
  void poll_for(Clock::duration d) {
    auto end = Clock::now() + d;
    while (Clock::now() < end) poll_both(1'000);
  }

  // b listens on 10.0.0.2, a connects from 10.0.0.1.
  void connect_pair() {
    ASSERT_EQ(b_->listen(addr("10.0.0.2", 0), 16, &listener_), 0);
    ASSERT_EQ(a_->connect(listener_->addr(), &client_), 0);
    ASSERT_TRUE(
        poll_until([&] { return ra_.connected.contains(client_) && !rb_.accepted.empty(); }));
    ASSERT_EQ(ra_.connected[client_], 0);
    server_ = rb_.accepted.front();
  }

  std::unique_ptr<Transport> a_, b_;
  Recorder ra_, rb_;
  Listener* listener_ = nullptr;
  StreamConn* client_ = nullptr;
  StreamConn* server_ = nullptr;
};

TEST_F(LwipTest, ListenConnectAccept) {
  const Wire& w = main_wire();
  uint64_t a_tx = tx_packets(w.link[0]), b_tx = tx_packets(w.link[1]);
  connect_pair();
  EXPECT_STREQ(a_->name(), "lwip");

  sockaddr_in la = listener_->addr();
  EXPECT_NE(la.sin_port, 0) << "port 0 must be replaced by an ephemeral port";
  EXPECT_EQ(la.sin_addr.s_addr, ip4("10.0.0.2").s_addr);
  EXPECT_EQ(rb_.listener_of[server_], listener_);
  EXPECT_EQ(client_->peer_addr().sin_port, la.sin_port);
  EXPECT_EQ(client_->peer_addr().sin_addr.s_addr, ip4("10.0.0.2").s_addr);
  EXPECT_EQ(client_->local_addr().sin_addr.s_addr, ip4("10.0.0.1").s_addr);
  EXPECT_NE(client_->local_addr().sin_port, 0);
  EXPECT_EQ(server_->peer_addr().sin_port, client_->local_addr().sin_port);
  EXPECT_EQ(server_->peer_addr().sin_addr.s_addr, ip4("10.0.0.1").s_addr);
  EXPECT_EQ(server_->local_addr().sin_port, la.sin_port);

  for (StreamConn* c : {client_, server_}) {
    EXPECT_EQ(c->max_segment(), 1460u) << "MSS 1460 on a 1500-byte link";
    EXPECT_EQ(c->tx_space(), kLwipMaxTxSpace);
  }
  RxView v;
  EXPECT_EQ(server_->rx_peek(&v, 1), 0u);
  // The handshake crossed the pipe both ways: routed, not looped back.
  EXPECT_GT(tx_packets(w.link[0]), a_tx);
  EXPECT_GT(tx_packets(w.link[1]), b_tx);

  a_->release(client_);
  b_->release(server_);
  b_->close_listener(listener_);
}

// MiBs both ways at once with random gather lists and random partial
// consumption, checked byte for byte; each direction leaves by its own link.
TEST_F(LwipTest, RandomSplitsBothWaysArriveIntact) {
  const Wire& w = main_wire();
  connect_pair();
  const std::vector<uint8_t> ab = random_bytes(8 << 20, 42), ba = random_bytes(8 << 20, 43);
  uint64_t a_bytes = tx_bytes(w.link[0]), b_bytes = tx_bytes(w.link[1]);
  const uint64_t lent = LwipStack::get().counters().tx_lent;
  std::mt19937 rng(7);
  size_t sent_ab = 0, sent_ba = 0;
  Sink at_b{&ab}, at_a{&ba};
  rb_.read_hook = [&](StreamConn* c) { at_b.drain(c); };
  ra_.read_hook = [&](StreamConn* c) { at_a.drain(c); };
  auto end = Clock::now() + kDeadline;
  while ((at_b.received < ab.size() || at_a.received < ba.size()) && Clock::now() < end) {
    send_random_chunks(client_, ab, &sent_ab, rng);
    send_random_chunks(server_, ba, &sent_ba, rng);
    poll_both();
    at_b.drain(server_);  // a remainder may wait without new data arriving
    at_a.drain(client_);
  }
  EXPECT_EQ(at_b.received, ab.size());
  EXPECT_EQ(at_a.received, ba.size());
  EXPECT_TRUE(ra_.closed.empty() && rb_.closed.empty());
  EXPECT_GE(tx_bytes(w.link[0]) - a_bytes, ab.size());
  EXPECT_GE(tx_bytes(w.link[1]) - b_bytes, ba.size());
  // The pipe takes lent frames: every data segment went out uncopied.
  EXPECT_GE(LwipStack::get().counters().tx_lent - lent, (ab.size() + ba.size()) / 1460);
  a_->release(client_);
  b_->release(server_);
}

// A consumer that takes only whole records spanning several segments must
// not stall, and views of unconsumed bytes stay valid across rx_consume.
TEST_F(LwipTest, WholeRecordConsumerNeverStalls) {
  connect_pair();
  constexpr size_t kRecord = 65536 - 8;
  const std::vector<uint8_t> data = random_bytes(kRecord * 64, 3);
  size_t received = 0;
  rb_.read_hook = [&](StreamConn* c) {
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
  auto end = Clock::now() + kDeadline;
  while (received < data.size() && Clock::now() < end) {
    while (sent < data.size()) {
      iovec iov{const_cast<uint8_t*>(data.data() + sent), kRecord};
      if (client_->tx_send(&iov, 1, kRecord) != 0) break;
      sent += kRecord;
    }
    client_->tx_flush();
    poll_both();
  }
  EXPECT_EQ(received, data.size());
  a_->release(client_);
  b_->release(server_);
}

// The peer does not read: its window fills, then the send buffer, then
// tx_send refuses. Once the peer reads, on_writable fires and every byte
// arrives in order.
TEST_F(LwipTest, SendBufferFillsThenDrains) {
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
    client_->tx_flush();
    poll_both();
  }
  ASSERT_TRUE(refused) << "sent " << sent << " bytes without filling the send buffer";
  EXPECT_LT(client_->tx_space(), kChunk);
  EXPECT_GE(sent, kWindow) << "the peer's window, then the unsent queue";
  const int writable_before = ra_.writable[client_];
  poll_for(milliseconds(50));
  RxView v[4096];
  size_t n = server_->rx_peek(v, 4096);
  size_t buffered = 0;
  for (size_t i = 0; i < n; ++i) buffered += v[i].len;
  EXPECT_GE(buffered, size_t{1} << 20) << "the receive window should be full";
  EXPECT_LE(buffered, kWindow + 1460);

  Sink sink{&data};
  sink.partial = false;
  rb_.read_hook = [&](StreamConn* c) { sink.drain(c); };
  sink.drain(server_);  // nothing re-arms reading but a consume
  ASSERT_TRUE(poll_until([&] {
    sink.drain(server_);
    return sink.received == sent && ra_.writable[client_] > writable_before;
  }));
  ASSERT_TRUE(poll_until([&] { return client_->tx_space() == kLwipMaxTxSpace; }))
      << "everything acknowledged frees the whole send buffer";
  a_->release(client_);
  b_->release(server_);
}

TEST_F(LwipTest, SendLargerThanSpaceIsRefusedWhole) {
  connect_pair();
  std::vector<uint8_t> big(kLwipMaxTxSpace + 1, 1);
  iovec iov{big.data(), big.size()};
  EXPECT_EQ(client_->tx_send(&iov, 1, big.size()), -EAGAIN);
  EXPECT_EQ(client_->tx_send(&iov, 1, big.size() - 1), -EINVAL) << "total must match the iov";
  poll_for(milliseconds(50));
  RxView v;
  EXPECT_EQ(server_->rx_peek(&v, 1), 0u) << "a refused send must send nothing";
  a_->release(client_);
  b_->release(server_);
}

TEST_F(LwipTest, SendWhileConnectingIsQueued) {
  ASSERT_EQ(b_->listen(addr("10.0.0.2", 0), 16, &listener_), 0);
  ASSERT_EQ(a_->connect(listener_->addr(), &client_), 0);
  char msg[] = "queued before the handshake";
  iovec iov{msg, sizeof(msg)};
  ASSERT_EQ(client_->tx_send(&iov, 1, sizeof(msg)), 0);
  client_->tx_flush();
  std::string got;
  rb_.read_hook = [&](StreamConn* c) {
    RxView v[4];
    size_t n = c->rx_peek(v, 4);
    for (size_t i = 0; i < n; ++i) {
      got.append(reinterpret_cast<const char*>(v[i].data), v[i].len);
      c->rx_consume(v[i].len);
    }
  };
  ASSERT_TRUE(poll_until([&] { return got.size() == sizeof(msg); }));
  EXPECT_EQ(std::memcmp(got.data(), msg, sizeof(msg)), 0);
  EXPECT_EQ(ra_.connected[client_], 0);
  a_->release(client_);
  b_->release(rb_.accepted.at(0));
}

TEST_F(LwipTest, ConnectWithoutListenerIsRefused) {
  Listener* l = nullptr;
  ASSERT_EQ(b_->listen(addr("10.0.0.2", 0), 1, &l), 0);
  sockaddr_in dead = l->addr();
  b_->close_listener(l);

  StreamConn* c = nullptr;
  ASSERT_EQ(a_->connect(dead, &c), 0);
  ASSERT_TRUE(poll_until([&] { return ra_.connected.contains(c); }));
  EXPECT_EQ(ra_.connected[c], -ECONNREFUSED);
  char b = 0;
  iovec iov{&b, 1};
  EXPECT_LT(c->tx_send(&iov, 1, 1), 0);
  poll_for(milliseconds(20));
  EXPECT_FALSE(ra_.closed.contains(c)) << "a failed connect ends with on_connected";
  a_->release(c);
}

// Errors found by connect() itself are reported from poll() like any other.
TEST_F(LwipTest, UnroutableConnectIsReportedFromPoll) {
  StreamConn* c = nullptr;
  ASSERT_EQ(a_->connect(addr("192.0.2.1", 9), &c), 0);  // no route, no default link
  EXPECT_FALSE(ra_.connected.contains(c)) << "no callbacks outside poll()";
  ASSERT_TRUE(poll_until([&] { return ra_.connected.contains(c); }));
  EXPECT_EQ(ra_.connected[c], -ENETUNREACH);
  a_->release(c);
}

TEST_F(LwipTest, ListenRules) {
  Listener* l = nullptr;
  EXPECT_EQ(b_->listen(addr("10.9.9.9", 0), 1, &l), -EADDRNOTAVAIL) << "not a local address";
  connect_pair();
  Listener* dup = nullptr;
  EXPECT_EQ(a_->listen(listener_->addr(), 1, &dup), -EADDRINUSE);
  EXPECT_EQ(a_->listen(addr("0.0.0.0", ntohs(listener_->addr().sin_port)), 1, &dup), -EADDRINUSE);
  sockaddr_in taken = listener_->addr();
  b_->close_listener(listener_);
  // The accepted connection still holds the port: listening again works
  // (SO_REUSEADDR semantics), and the connection is unaffected.
  ASSERT_EQ(a_->listen(taken, 1, &dup), 0);
  char msg[] = "x";
  iovec iov{msg, 1};
  ASSERT_EQ(client_->tx_send(&iov, 1, 1), 0);
  client_->tx_flush();
  ASSERT_TRUE(poll_until([&] { return rb_.readable[server_] > 0; }));
  a_->close_listener(dup);
  a_->release(client_);
  b_->release(server_);
}

// Orderly close both ways: data before the FIN arrives first, the FIN is
// on_closed(0), and the stream refuses sends after close().
TEST_F(LwipTest, PeerCloseReportsEof) {
  connect_pair();
  std::string got;
  rb_.read_hook = [&](StreamConn* c) {
    RxView v[4];
    size_t n = c->rx_peek(v, 4);
    for (size_t i = 0; i < n; ++i) {
      got.append(reinterpret_cast<const char*>(v[i].data), v[i].len);
      c->rx_consume(v[i].len);
    }
  };
  char msg[] = "last words";
  iovec iov{msg, sizeof(msg) - 1};
  ASSERT_EQ(client_->tx_send(&iov, 1, iov.iov_len), 0);
  client_->close();
  EXPECT_LT(client_->tx_send(&iov, 1, iov.iov_len), 0);

  ASSERT_TRUE(poll_until([&] { return rb_.closed.contains(server_); }));
  EXPECT_EQ(rb_.closed[server_], 0);
  EXPECT_EQ(got, "last words");
  EXPECT_FALSE(ra_.closed.contains(client_));

  // Half-close: the side that got the FIN may still send.
  char reply[] = "still here";
  iovec riov{reply, sizeof(reply) - 1};
  ASSERT_EQ(server_->tx_send(&riov, 1, riov.iov_len), 0);
  server_->tx_flush();
  std::string back;
  ra_.read_hook = [&](StreamConn* c) {
    RxView v[4];
    size_t n = c->rx_peek(v, 4);
    for (size_t i = 0; i < n; ++i) {
      back.append(reinterpret_cast<const char*>(v[i].data), v[i].len);
      c->rx_consume(v[i].len);
    }
  };
  server_->close();
  ASSERT_TRUE(poll_until([&] { return ra_.closed.contains(client_); }));
  EXPECT_EQ(ra_.closed[client_], 0);
  EXPECT_EQ(back, "still here");
  a_->release(client_);
  b_->release(server_);
  b_->close_listener(listener_);
}

// close() then release() at once must still deliver everything queued.
TEST_F(LwipTest, ReleaseAfterCloseStillDeliversEverything) {
  connect_pair();
  const std::vector<uint8_t> data = random_bytes(16 << 20, 11);
  constexpr size_t kChunk = 64 << 10;
  size_t sent = 0;
  while (sent + kChunk <= data.size()) {
    iovec iov{const_cast<uint8_t*>(data.data() + sent), kChunk};
    if (client_->tx_send(&iov, 1, kChunk) != 0) break;
    sent += kChunk;
  }
  ASSERT_LT(client_->tx_space(), kLwipMaxTxSpace) << "expected queued bytes";
  client_->close();
  a_->release(client_);
  ra_.forbidden.insert(client_);

  Sink sink{&data};
  rb_.read_hook = [&](StreamConn* c) { sink.drain(c); };
  ASSERT_TRUE(poll_until([&] {
    sink.drain(server_);
    return rb_.closed.contains(server_);
  }));
  EXPECT_EQ(rb_.closed[server_], 0);
  sink.partial = false;
  RxView v;
  while (server_->rx_peek(&v, 1) > 0) sink.drain(server_);  // bytes stay readable after the FIN
  EXPECT_EQ(sink.received, sent);
  b_->release(server_);
}

TEST_F(LwipTest, AbortResetsPeer) {
  connect_pair();
  char b = 'x';
  iovec iov{&b, 1};
  ASSERT_EQ(server_->tx_send(&iov, 1, 1), 0);
  server_->tx_flush();
  poll_for(milliseconds(20));
  client_->abort();
  ra_.forbidden.insert(client_);
  EXPECT_LT(client_->tx_send(&iov, 1, 1), 0);

  ASSERT_TRUE(poll_until([&] { return rb_.closed.contains(server_); }));
  EXPECT_EQ(rb_.closed[server_], -ECONNRESET);
  poll_for(milliseconds(20));
  EXPECT_LT(server_->tx_send(&iov, 1, 1), 0);
  a_->release(client_);
  b_->release(server_);
}

// After the peer's reset (seen by a poll), a send fails with the sticky
// error and on_closed came exactly once.
TEST_F(LwipTest, SendAfterPeerResetFails) {
  connect_pair();
  client_->abort();
  ra_.forbidden.insert(client_);
  ASSERT_TRUE(poll_until([&] { return rb_.closed.contains(server_); }));
  EXPECT_EQ(rb_.closed[server_], -ECONNRESET);
  std::vector<uint8_t> buf(4096, 7);
  iovec iov{buf.data(), buf.size()};
  EXPECT_EQ(server_->tx_send(&iov, 1, buf.size()), -ECONNRESET);
  EXPECT_EQ(server_->tx_send(&iov, 1, buf.size()), -ECONNRESET) << "the error sticks";
  poll_for(milliseconds(20));
  a_->release(client_);
  b_->release(server_);
}

// Releasing a connection from inside its own callback suppresses the events
// still pending for it (here: the FIN right behind the data).
TEST_F(LwipTest, ReleaseInsideCallbackSilencesConn) {
  connect_pair();
  rb_.read_hook = [&](StreamConn* c) {
    if (c != server_) return;
    b_->release(c);
    rb_.forbidden.insert(c);
  };
  char msg[] = "bye";
  iovec iov{msg, 3};
  ASSERT_EQ(client_->tx_send(&iov, 1, 3), 0);
  client_->close();
  ASSERT_TRUE(poll_until([&] { return rb_.forbidden.contains(server_); }));
  poll_for(milliseconds(50));
  EXPECT_FALSE(rb_.closed.contains(server_));
  // The released side closed gracefully: the client sees its FIN.
  ASSERT_TRUE(poll_until([&] { return ra_.closed.contains(client_); }));
  EXPECT_EQ(ra_.closed[client_], 0);
  a_->release(client_);
}

// Closing a listener inside on_accept drops the connections it accepted
// but had not reported yet; they are reset.
TEST_F(LwipTest, CloseListenerInsideAccept) {
  ASSERT_EQ(b_->listen(addr("10.0.0.2", 0), 16, &listener_), 0);
  StreamConn* x = nullptr;
  StreamConn* y = nullptr;
  ASSERT_EQ(a_->connect(listener_->addr(), &x), 0);
  ASSERT_EQ(a_->connect(listener_->addr(), &y), 0);
  int accepts = 0;
  rb_.accept_hook = [&](Listener*, StreamConn*) {
    if (accepts++ == 0) b_->close_listener(listener_);
  };
  ASSERT_TRUE(poll_until([&] { return ra_.connected.contains(x) && ra_.connected.contains(y); }));
  poll_for(milliseconds(50));
  EXPECT_EQ(rb_.accepted.size(), 1u);
  EXPECT_EQ(ra_.closed.size(), 1u) << "the unreported connection is reset";
  for (StreamConn* c : rb_.accepted) b_->release(c);
  a_->release(x);
  a_->release(y);
}

// A transport nobody polls gets no events (they wait for its own poll) and,
// past its listen backlog, its listener stops completing handshakes.
TEST_F(LwipTest, EventsWaitForTheOwnerAndBacklogHoldsSyns) {
  ASSERT_EQ(b_->listen(addr("10.0.0.2", 0), 1, &listener_), 0);
  StreamConn* x = nullptr;
  StreamConn* y = nullptr;
  ASSERT_EQ(a_->connect(listener_->addr(), &x), 0);
  auto until = Clock::now() + milliseconds(200);
  while (Clock::now() < until) a_->poll(ra_, 1'000);  // only a polls
  ASSERT_TRUE(ra_.connected.contains(x));
  EXPECT_TRUE(rb_.accepted.empty()) << "b's accept waits for b's poll";
  ASSERT_EQ(a_->connect(listener_->addr(), &y), 0);
  until = Clock::now() + milliseconds(300);
  while (Clock::now() < until) a_->poll(ra_, 1'000);
  EXPECT_FALSE(ra_.connected.contains(y)) << "the backlog of 1 is taken by x";

  // b accepts x; y's SYN retransmission (after ~1 s) then gets through.
  auto start = Clock::now();
  ASSERT_TRUE(poll_until([&] { return ra_.connected.contains(y) && rb_.accepted.size() == 2; }));
  std::printf("[ metric ] backlog: second SYN accepted %.0f ms after the first accept\n",
              std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  for (StreamConn* c : rb_.accepted) b_->release(c);
  a_->release(x);
  a_->release(y);
}

// A process reaches its own address through the netif's loopback queue, and
// 127.0.0.1 through lwIP's loopback interface; no frame touches a link.
TEST_F(LwipTest, ConnectToOwnAddressUsesLoopback) {
  const Wire& w = main_wire();
  for (const char* self : {"10.0.0.1", "127.0.0.1"}) {
    SCOPED_TRACE(self);
    Recorder r;
    uint64_t before = tx_packets(w.link[0]) + tx_packets(w.link[1]);
    Listener* l = nullptr;
    ASSERT_EQ(a_->listen(addr(self, 0), 4, &l), 0);
    StreamConn* c = nullptr;
    ASSERT_EQ(a_->connect(l->addr(), &c), 0);
    auto end = Clock::now() + kDeadline;
    while ((!r.connected.contains(c) || r.accepted.empty()) && Clock::now() < end) {
      a_->poll(r, 0);
    }
    ASSERT_EQ(r.connected[c], 0);
    ASSERT_EQ(r.accepted.size(), 1u);
    StreamConn* s = r.accepted[0];
    EXPECT_EQ(c->local_addr().sin_addr.s_addr, ip4(self).s_addr);
    const std::vector<uint8_t> data = random_bytes(2 << 20, 21);
    Sink sink{&data};
    r.read_hook = [&](StreamConn* x) {
      if (x == s) sink.drain(x);
    };
    std::mt19937 rng(3);
    size_t sent = 0;
    while (sink.received < data.size() && Clock::now() < end) {
      send_random_chunks(c, data, &sent, rng);
      a_->poll(r, 0);
      sink.drain(s);
    }
    EXPECT_EQ(sink.received, data.size());
    EXPECT_EQ(tx_packets(w.link[0]) + tx_packets(w.link[1]), before);
    a_->release(c);
    a_->release(s);
    a_->close_listener(l);
  }
}

// Streams one buffer per connection from a to b, verified at b; step()
// is called after every round of sends.
struct Streams {
  std::vector<StreamConn*> cs;
  std::vector<std::vector<uint8_t>> data;
  std::vector<size_t> sent;
  std::vector<Sink> sinks;
  std::mt19937 rng{1};

  bool done() const {
    for (size_t i = 0; i < cs.size(); ++i) {
      if (sinks[i].received < data[i].size()) return false;
    }
    return true;
  }
  void send_some() {
    for (size_t i = 0; i < cs.size(); ++i)
      send_random_chunks(cs[i], data[i], &sent[i], rng, 64 << 10);
  }
};

// More unacknowledged data than lwIP's shared segment pools hold (ACKs are
// lost for a while, after the congestion windows opened): sends still
// succeed whole, the tails are parked, and every stream arrives intact.
TEST_F(LwipTest, PoolExhaustionParksSendsWithoutLoss) {
  const Wire& w = main_wire();
  ASSERT_EQ(b_->listen(addr("10.0.0.2", 0), 64, &listener_), 0);
  constexpr int kConns = 12;
  // Parking may already start while the windows open: count from here.
  const LwipCounters start = LwipStack::get().counters();
  Streams st;
  st.cs.resize(kConns);
  for (auto& c : st.cs) ASSERT_EQ(a_->connect(listener_->addr(), &c), 0);
  ASSERT_TRUE(
      poll_until([&] { return rb_.accepted.size() == kConns && ra_.connected.size() == kConns; }));
  std::map<uint16_t, int> index;  // client port -> stream
  for (int i = 0; i < kConns; ++i) index[st.cs[i]->local_addr().sin_port] = i;
  for (int i = 0; i < kConns; ++i) st.data.push_back(random_bytes(10 << 20, 100 + i));
  st.sent.assign(kConns, 0);
  st.sinks.resize(kConns);
  for (StreamConn* s : rb_.accepted) {
    int i = index.at(s->peer_addr().sin_port);
    st.sinks[i].data = &st.data[i];
    s->owner = &st.sinks[i];
  }
  rb_.read_hook = [&](StreamConn* c) { static_cast<Sink*>(c->owner)->drain(c); };
  auto drain_all = [&] {
    for (StreamConn* s : rb_.accepted) static_cast<Sink*>(s->owner)->drain(s);
  };
  // Open the congestion windows.
  ASSERT_TRUE(poll_until([&] {
    st.send_some();
    drain_all();
    for (int i = 0; i < kConns; ++i) {
      if (st.sinks[i].received < (4u << 20)) return false;
    }
    return true;
  }));
  LwipCounters before = LwipStack::get().counters();
  w.end[1]->set_faults({.drop = 1.0});  // b's ACKs vanish
  auto until = Clock::now() + milliseconds(300);
  while (Clock::now() < until) {
    st.send_some();
    poll_both();
    drain_all();
  }
  LwipCounters mid = LwipStack::get().counters();
  w.end[1]->set_faults({});
  EXPECT_GT(mid.tx_parked, start.tx_parked) << "expected the pools to run dry";
  EXPECT_GE(mid.tx_parked, before.tx_parked);
  ASSERT_TRUE(poll_until(
      [&] {
        st.send_some();
        drain_all();
        return st.done();
      },
      std::chrono::seconds(30)));
  for (StreamConn* c : st.cs) a_->release(c);
  for (StreamConn* s : rb_.accepted) b_->release(s);
}

// An idle connection whose peer vanished (nothing comes back any more) is
// closed with an error by keepalive (lwipopts.h: 5 s idle, then 5 probes a
// second apart), not kept forever; a live idle one is not touched.
TEST_F(LwipTest, KeepaliveFindsAVanishedIdlePeer) {
  const Wire& w = main_wire();
  connect_pair();
  const auto t0 = Clock::now();
  poll_for(std::chrono::seconds(7));  // idle past KEEPIDLE: probes answered
  EXPECT_FALSE(ra_.closed.contains(client_)) << "a live idle connection was closed";
  w.end[0]->set_faults({.drop = 1.0});  // from now on nothing reaches a
  w.end[1]->set_faults({.drop = 1.0});
  const auto cut = Clock::now();
  ASSERT_TRUE(poll_until([&] { return ra_.closed.contains(client_); }, std::chrono::seconds(30)));
  const double secs = std::chrono::duration<double>(Clock::now() - cut).count();
  std::printf("[ metric ] vanished idle peer found after %.1f s (idle before: %.1f s)\n", secs,
              std::chrono::duration<double>(cut - t0).count());
  EXPECT_NE(ra_.closed[client_], 0);
  EXPECT_LT(secs, 12.0);
  w.end[0]->set_faults({});
  w.end[1]->set_faults({});
  a_->release(client_);
  b_->release(server_);
  b_->close_listener(listener_);
}

// A link that is mostly out of transmit buffers: lwIP keeps what it could
// not send and the transport pushes it again, nothing is lost.
TEST_F(LwipTest, LinkOutOfBuffersStillDelivers) {
  PipeOptions o = wire_options();
  o.buffers = 48;
  Wire w = add_wire("10.0.4.1", "10.0.4.2", o);
  auto a = make_lwip_transport({.source = ip4("10.0.4.1")});
  auto b = make_lwip_transport({.source = ip4("10.0.4.2")});
  Recorder ra, rb;
  Listener* l = nullptr;
  ASSERT_EQ(b->listen(addr("10.0.4.2", 0), 4, &l), 0);
  StreamConn* c = nullptr;
  ASSERT_EQ(a->connect(l->addr(), &c), 0);
  auto end = Clock::now() + kDeadline;
  while ((!ra.connected.contains(c) || rb.accepted.empty()) && Clock::now() < end) {
    a->poll(ra, 0);
    b->poll(rb, 0);
  }
  ASSERT_EQ(ra.connected[c], 0);
  StreamConn* s = rb.accepted.at(0);
  uint64_t no_buffer = LwipStack::get().counters().tx_no_buffer;
  const std::vector<uint8_t> data = random_bytes(8 << 20, 31);
  Sink sink{&data};
  rb.read_hook = [&](StreamConn* x) { sink.drain(x); };
  std::mt19937 rng(2);
  size_t sent = 0;
  while (sink.received < data.size() && Clock::now() < end) {
    send_random_chunks(c, data, &sent, rng);
    a->poll(ra, 0);
    b->poll(rb, 0);
    sink.drain(s);
  }
  EXPECT_EQ(sink.received, data.size());
  EXPECT_GT(LwipStack::get().counters().tx_no_buffer, no_buffer);
  LinkCounters lc;
  ASSERT_EQ(LwipStack::get().link_counters(w.link[0], &lc), 0);
  EXPECT_GT(lc.tx_dropped, 0u) << "the port saw the refusals too";
  a->release(c);
  b->release(s);
  b->close_listener(l);
}

// Removing a link resets the connections bound to its address.
TEST_F(LwipTest, RemoveLinkResetsItsConnections) {
  Wire w = add_wire("10.0.2.1", "10.0.2.2", wire_options());
  auto c_t = make_lwip_transport({.source = ip4("10.0.2.1")});
  auto s_t = make_lwip_transport({.source = ip4("10.0.2.2")});
  Recorder rc, rs;
  Listener* l = nullptr;
  ASSERT_EQ(s_t->listen(addr("10.0.2.2", 0), 4, &l), 0);
  StreamConn* c = nullptr;
  ASSERT_EQ(c_t->connect(l->addr(), &c), 0);
  auto end = Clock::now() + kDeadline;
  while ((!rc.connected.contains(c) || rs.accepted.empty()) && Clock::now() < end) {
    c_t->poll(rc, 0);
    s_t->poll(rs, 0);
  }
  ASSERT_EQ(rc.connected[c], 0);
  size_t links = LwipStack::get().counters().links;
  ASSERT_EQ(LwipStack::get().remove_link(w.link[0]), 0);
  EXPECT_EQ(LwipStack::get().remove_link(w.link[0]), -ENOENT);
  while (!rc.closed.contains(c) && Clock::now() < end) c_t->poll(rc, 1'000);
  EXPECT_EQ(rc.closed[c], -ENETDOWN);
  EXPECT_EQ(LwipStack::get().counters().links, links - 1);
  LinkCounters lc;
  EXPECT_EQ(LwipStack::get().link_counters(w.link[0], &lc), -ENOENT);
  c_t->release(c);
  for (StreamConn* s : rs.accepted) s_t->release(s);
  s_t->close_listener(l);
  ASSERT_EQ(LwipStack::get().remove_link(w.link[1]), 0);
}

TEST_F(LwipTest, PollTimeoutIsHonoured) {
  auto start = Clock::now();
  EXPECT_EQ(a_->poll(ra_, 0), 0);
  EXPECT_EQ(a_->poll(ra_, 30'000), 0);
  auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(29));
  EXPECT_LT(took, milliseconds(2000));
}

TEST_F(LwipTest, WakeInterruptsBlockingPoll) {
  a_->wake();  // a wake that comes first is not lost
  auto start = Clock::now();
  EXPECT_EQ(a_->poll(ra_, -1), 0);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));

  std::thread helper([&] {
    std::this_thread::sleep_for(milliseconds(100));
    a_->wake();
  });
  start = Clock::now();
  int r = a_->poll(ra_, -1);
  auto took = Clock::now() - start;
  helper.join();
  EXPECT_EQ(r, 0);
  EXPECT_GE(took, milliseconds(50));
  EXPECT_LT(took, milliseconds(2000));
}

// Interrupt mode: the links have wait fds, so wait_fd() is an fd that turns
// readable when frames (or another transport's events for us) arrive.
TEST_F(LwipTest, WaitFdWakesOnData) {
  connect_pair();
  int fd = b_->wait_fd();
  ASSERT_GE(fd, 0);
  // Idle: once armed, nothing but lwIP's timers may wake it.
  EXPECT_EQ(b_->poll(rb_, 0), 0);
  char msg[] = "ping";
  iovec iov{msg, 4};
  std::thread sender([&] {
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_EQ(client_->tx_send(&iov, 1, 4), 0);
    client_->tx_flush();
  });
  auto start = Clock::now();
  bool got = false;
  while (!got && Clock::now() - start < std::chrono::seconds(2)) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 500);
    b_->poll(rb_, 0);
    got = rb_.readable[server_] > 0;
  }
  sender.join();
  EXPECT_TRUE(got);
  EXPECT_LT(Clock::now() - start, milliseconds(1000));
  a_->release(client_);
  b_->release(server_);
}

// Loss, duplication, reordering and corruption (caught by checksums) on a
// second wire: data still arrives intact both ways.
TEST_F(LwipTest, FaultInjectionBothWays) {
  Wire& w = faulty_wire();
  auto a = make_lwip_transport({.source = ip4("10.0.1.1")});
  auto b = make_lwip_transport({.source = ip4("10.0.1.2")});
  Recorder ra, rb;
  Listener* l = nullptr;
  ASSERT_EQ(b->listen(addr("10.0.1.2", 0), 4, &l), 0);
  StreamConn* c = nullptr;
  ASSERT_EQ(a->connect(l->addr(), &c), 0);
  auto end = Clock::now() + kDeadline;
  while ((!ra.connected.contains(c) || rb.accepted.empty()) && Clock::now() < end) {
    a->poll(ra, 0);
    b->poll(rb, 0);
  }
  ASSERT_EQ(ra.connected[c], 0);
  StreamConn* s = rb.accepted.at(0);

  struct Case {
    double drop, dup, reorder, corrupt;
    size_t bytes;
  };
  for (const Case& k :
       {Case{0.01, 0.01, 0.02, 0.01, 4 << 20}, Case{0.05, 0.05, 0.05, 0.02, 1 << 20}}) {
    LwipCounters before = LwipStack::get().counters();
    w.end[0]->set_faults({k.drop, k.dup, k.reorder, k.corrupt, 11});
    w.end[1]->set_faults({k.drop, k.dup, k.reorder, k.corrupt, 12});
    const std::vector<uint8_t> ab = random_bytes(k.bytes, 1), ba = random_bytes(k.bytes, 2);
    Sink at_b{&ab}, at_a{&ba};
    rb.read_hook = [&](StreamConn* x) { at_b.drain(x); };
    ra.read_hook = [&](StreamConn* x) { at_a.drain(x); };
    size_t sent_ab = 0, sent_ba = 0;
    std::mt19937 rng(9);
    auto start = Clock::now();
    auto limit = start + std::chrono::seconds(60);
    while ((at_b.received < ab.size() || at_a.received < ba.size()) && Clock::now() < limit) {
      send_random_chunks(c, ab, &sent_ab, rng);
      send_random_chunks(s, ba, &sent_ba, rng);
      a->poll(ra, 0);
      b->poll(rb, 0);
      at_b.drain(s);
      at_a.drain(c);
    }
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    w.end[0]->set_faults({});
    w.end[1]->set_faults({});
    EXPECT_EQ(at_b.received, ab.size());
    EXPECT_EQ(at_a.received, ba.size());
    EXPECT_TRUE(ra.closed.empty() && rb.closed.empty());
    LwipCounters after = LwipStack::get().counters();
    auto f0 = w.end[0]->fault_counts(), f1 = w.end[1]->fault_counts();
    std::printf(
        "[ metric ] faults drop %.0f%% dup %.0f%% reorder %.0f%% corrupt %.0f%%: 2 x %zu KiB in "
        "%.2f s (%.1f Mbit/s each way); retransmitted %llu segments; injected so far: "
        "dropped %llu dup %llu reordered %llu corrupted %llu\n",
        k.drop * 100, k.dup * 100, k.reorder * 100, k.corrupt * 100, k.bytes >> 10, secs,
        k.bytes * 8 / secs / 1e6,
        static_cast<unsigned long long>(after.tcp_retransmits - before.tcp_retransmits),
        static_cast<unsigned long long>(f0.dropped + f1.dropped),
        static_cast<unsigned long long>(f0.duplicated + f1.duplicated),
        static_cast<unsigned long long>(f0.reordered + f1.reordered),
        static_cast<unsigned long long>(f0.corrupted + f1.corrupted));
    EXPECT_GT(after.tcp_retransmits, before.tcp_retransmits);
  }

  // Recovery times: a lost lone segment needs the retransmission timer; a
  // loss inside a burst is repaired by fast retransmit (duplicate ACKs), if
  // the congestion window lets enough segments follow it, so each burst
  // sample comes after a clean transfer that reopens the window.
  size_t got = 0;
  rb.read_hook = [&](StreamConn* x) {
    RxView v[64];
    for (size_t n; (n = x->rx_peek(v, 64)) > 0;) {
      size_t sum = 0;
      for (size_t i = 0; i < n; ++i) sum += v[i].len;
      x->rx_consume(sum);
      got += sum;
    }
  };
  ra.read_hook = nullptr;
  const std::vector<uint8_t> blob = random_bytes(4 << 20, 77);
  auto transfer = [&](size_t bytes, int drop) {
    got = 0;
    w.end[0]->drop_next(drop);
    auto t0 = Clock::now();
    size_t sent = 0;
    while (got < bytes && Clock::now() - t0 < std::chrono::seconds(10)) {
      while (sent < bytes) {
        size_t n = std::min<size_t>(bytes - sent, 64 << 10);
        iovec iov{const_cast<uint8_t*>(blob.data()), n};
        if (c->tx_send(&iov, 1, n) != 0) break;
        sent += n;
      }
      c->tx_flush();
      a->poll(ra, 0);
      b->poll(rb, 0);
    }
    EXPECT_EQ(got, bytes);
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  auto settle = [&] {
    auto until = Clock::now() + milliseconds(30);
    while (Clock::now() < until) {
      a->poll(ra, 0);
      b->poll(rb, 0);
    }
  };
  std::vector<double> tail, burst, clean;
  for (int i = 0; i < 7; ++i) {
    transfer(4 << 20, 0);
    settle();
    clean.push_back(transfer(256 << 10, 0));
    settle();
    burst.push_back(transfer(256 << 10, 1));
    settle();
    tail.push_back(transfer(64, 1));
    settle();
  }
  for (auto* v : {&tail, &burst, &clean}) std::sort(v->begin(), v->end());
  std::printf(
      "[ metric ] recovery (median of 7): lone 64 B segment lost: %.1f ms; first segment of a "
      "256 KiB burst lost: %.2f ms (the same burst without loss: %.2f ms)\n",
      tail[3], burst[3], clean[3]);
  a->release(c);
  b->release(s);
  b->close_listener(l);
}

}  // namespace
}  // namespace softrdma::net
