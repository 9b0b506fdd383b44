// The lwIP transport over in-process pipe links when frames go missing:
// more unacknowledged data than the shared segment pools hold, a peer that
// vanished, a link out of transmit buffers, and loss, duplication,
// reordering and corruption on the wire (with recovery times).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/lwip/tests/lwip_harness.h"

namespace softrdma::net::testing {
namespace {

using std::chrono::milliseconds;

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
  // 10 s by design, counted from the last answered probe (up to 1 s before
  // the cut), on lwIP's 0.5 s slow timer; the rest is slack for a loaded
  // 2-vCPU host, where this one polling thread waits for a core.
  EXPECT_LT(secs, 14.0);
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
  Endpoints e;
  ASSERT_NO_FATAL_FAILURE(e.connect("10.0.4.1", "10.0.4.2"));
  uint64_t no_buffer = LwipStack::get().counters().tx_no_buffer;
  const std::vector<uint8_t> data = random_bytes(8 << 20, 31);
  Sink sink{&data};
  e.rb.read_hook = [&](StreamConn* x) { sink.drain(x); };
  std::mt19937 rng(2);
  size_t sent = 0;
  auto end = Clock::now() + LwipPipeHarness::kDeadline;
  while (sink.received < data.size() && Clock::now() < end) {
    send_random_chunks(e.c, data, &sent, rng);
    e.poll();
    sink.drain(e.s);
  }
  EXPECT_EQ(sink.received, data.size());
  EXPECT_GT(LwipStack::get().counters().tx_no_buffer, no_buffer);
  EXPECT_GT(link_counters(w.link[0]).tx_dropped, 0u) << "the port saw the refusals too";
  e.rb.read_hook = nullptr;
  e.release();
}

// A lost segment that fast retransmit puts back as the unsent queue's only
// segment, while later ones wait for their ACK, stays there when the link
// refuses its frame. Bytes written meanwhile must not be appended to it:
// they would go out under sequence numbers the later segments carry.
TEST_F(LwipTest, RetransmissionHeldByTheLinkTakesNoNewBytes) {
  Wire w = add_wire("10.0.5.1", "10.0.5.2", wire_options());
  Endpoints e;
  ASSERT_NO_FATAL_FAILURE(e.connect("10.0.5.1", "10.0.5.2"));
  const std::vector<uint8_t> data = random_bytes(1000 + 4 * 100 + 3000, 41);
  Sink sink{&data};
  e.rb.read_hook = [&](StreamConn* x) { sink.drain(x); };
  size_t sent = 0;
  auto send = [&](size_t n) {
    iovec iov{const_cast<uint8_t*>(data.data() + sent), n};
    ASSERT_EQ(e.c->tx_send(&iov, 1, n), 0);
    e.c->tx_flush();
    sent += n;
  };
  // A (1000 B, less than an MSS) is lost; four small segments follow it,
  // each drawing a duplicate ACK.
  w.end[0]->drop_next(1);
  ASSERT_NO_FATAL_FAILURE(send(1000));
  for (int i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(send(100));
  // The sender takes the duplicate ACKs while its link is full: A goes
  // back to the unsent queue and stays there.
  w.end[0]->set_tx_full(true);
  const uint64_t refused = LwipStack::get().counters().tx_no_buffer;
  ASSERT_TRUE(poll_until([&] {
    e.poll();
    return LwipStack::get().counters().tx_no_buffer > refused;
  }));
  const uint64_t retx = LwipStack::get().counters().tcp_retransmits;
  ASSERT_NO_FATAL_FAILURE(send(3000));
  w.end[0]->set_tx_full(false);
  ASSERT_TRUE(poll_until([&] {
    e.poll();
    sink.drain(e.s);
    return sink.received == data.size() || HasFatalFailure();
  }));
  EXPECT_EQ(sink.received, data.size());
  EXPECT_GT(LwipStack::get().counters().tcp_retransmits, retx);
  e.rb.read_hook = nullptr;
  e.release();
}

// Loss, duplication, reordering and corruption (caught by checksums) on a
// second wire: data still arrives intact both ways.
TEST_F(LwipTest, FaultInjectionBothWays) {
  Wire& w = faulty_wire();
  Endpoints e;
  ASSERT_NO_FATAL_FAILURE(e.connect("10.0.1.1", "10.0.1.2"));
  StreamConn* c = e.c;
  StreamConn* s = e.s;
  Recorder& ra = e.ra;
  Recorder& rb = e.rb;

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
      e.poll();
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
  rb.read_hook = [&](StreamConn* x) { got += consume_all(x); };
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
      e.poll();
    }
    EXPECT_EQ(got, bytes);
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  auto settle = [&] {
    auto until = Clock::now() + milliseconds(30);
    while (Clock::now() < until) {
      e.poll();
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
  e.release();
}

}  // namespace
}  // namespace softrdma::net::testing
