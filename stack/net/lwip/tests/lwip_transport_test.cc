// The lwIP transport over in-process pipe links, what is particular to a
// userspace stack (the Transport contract itself runs in
// stack/tests/transport_contract_test.cc): traffic routed out of each
// address's own link without copies, segment-sized FPDUs, listen rules,
// event ownership between transports and the listen backlog, loopback to
// our own address, link removal, waiting on wait_fd() and one ACK per
// received burst. Losses, pools and
// faults: lwip_fault_test.cc.
#include <errno.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/lwip/tests/lwip_harness.h"

namespace softrdma::net::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(LwipTest, RoutedHandshakeAndSegmentSizedFpdus) {
  const Wire& w = main_wire();
  uint64_t a_tx = tx_packets(w.link[0]), b_tx = tx_packets(w.link[1]);
  connect_pair();
  for (StreamConn* c : {client_, server_}) {
    EXPECT_EQ(c->max_segment(), 1460u) << "MSS 1460 on a 1500-byte link";
  }
  // The handshake crossed the pipe both ways: routed, not looped back.
  EXPECT_GT(tx_packets(w.link[0]), a_tx);
  EXPECT_GT(tx_packets(w.link[1]), b_tx);
  release_pair();
  b_->close_listener(listener_);
}

// Each direction of a stream leaves by its own link, every data segment
// lent to the pipe uncopied.
TEST_F(LwipTest, StreamsLeaveByTheirOwnLinkUncopied) {
  const Wire& w = main_wire();
  connect_pair();
  const size_t bytes = 8 << 20;
  uint64_t a_bytes = tx_bytes(w.link[0]), b_bytes = tx_bytes(w.link[1]);
  const uint64_t lent = LwipStack::get().counters().tx_lent;
  stream_both_ways(bytes);
  EXPECT_GE(tx_bytes(w.link[0]) - a_bytes, bytes);
  EXPECT_GE(tx_bytes(w.link[1]) - b_bytes, bytes);
  EXPECT_GE(LwipStack::get().counters().tx_lent - lent, 2 * bytes / 1460);
  release_pair();
}

// A bulk receiver acknowledges once per burst of frames (lwip_acks.cc), not
// every second segment as lwIP does by itself: the reverse direction carries
// a small fraction of the data direction's frames, and every byte arrives.
TEST_F(LwipTest, BulkReceiveAcknowledgesPerBurst) {
  const Wire& w = main_wire();
  connect_pair();
  const size_t bytes = 8 << 20;
  const std::vector<uint8_t> data = random_bytes(bytes, 11);
  Sink at_b{&data};
  rb_.read_hook = [&](StreamConn* c) { at_b.drain(c); };
  const uint64_t segs0 = tx_packets(w.link[0]), acks0 = tx_packets(w.link[1]);
  std::mt19937 rng(3);
  size_t sent = 0;
  const auto end = Clock::now() + LwipPipeHarness::kDeadline;
  while (at_b.received < bytes && Clock::now() < end) {
    send_random_chunks(client_, data, &sent, rng, max_chunk());
    poll_both();
    at_b.drain(server_);
  }
  rb_.read_hook = nullptr;
  ASSERT_EQ(at_b.received, bytes);
  const uint64_t segs = tx_packets(w.link[0]) - segs0, acks = tx_packets(w.link[1]) - acks0;
  EXPECT_GE(segs, bytes / 1460);
  EXPECT_GE(acks, 1u);
  EXPECT_LE(acks * 4, segs) << acks << " frames back for " << segs << " data frames";
  release_pair();
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
  release_pair();
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
    auto end = Clock::now() + LwipPipeHarness::kDeadline;
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

// Removing a link resets the connections bound to its address.
TEST_F(LwipTest, RemoveLinkResetsItsConnections) {
  Wire w = add_wire("10.0.2.1", "10.0.2.2", wire_options());
  Endpoints e;
  ASSERT_NO_FATAL_FAILURE(e.connect("10.0.2.1", "10.0.2.2"));
  size_t links = LwipStack::get().counters().links;
  ASSERT_EQ(LwipStack::get().remove_link(w.link[0]), 0);
  EXPECT_EQ(LwipStack::get().remove_link(w.link[0]), -ENOENT);
  auto end = Clock::now() + LwipPipeHarness::kDeadline;
  while (!e.ra.closed.contains(e.c) && Clock::now() < end) e.a->poll(e.ra, 1'000);
  EXPECT_EQ(e.ra.closed[e.c], -ENETDOWN);
  EXPECT_EQ(LwipStack::get().counters().links, links - 1);
  LinkCounters lc;
  EXPECT_EQ(LwipStack::get().link_counters(w.link[0], &lc), -ENOENT);
  e.release();
  ASSERT_EQ(LwipStack::get().remove_link(w.link[1]), 0);
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
  release_pair();
}

}  // namespace
}  // namespace softrdma::net::testing
