// The lwIP transport over in-process pipe links for TransportFixture (see
// stack/tests/transport_fixture.h): two transports in the one process-wide
// stack, the client's with source 10.0.0.1 (link A) and the server's with
// 10.0.0.2 (link B), joined by a pipe with wait fds, so the transports run
// in interrupt mode (wait_fd() >= 0); lwip_engine_test covers busy polling.
// Also LwipTest, the fixture of the lwIP-only tests, and Endpoints, a
// connected pair on a wire of its own.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/lwip/tests/lwip_wire.h"
#include "stack/tests/transport_fixture.h"

namespace softrdma::net::testing {

constexpr size_t kWindow = size_t{2} << 20;  // TCP_WND in lwipopts.h

inline PipeOptions wire_options() {
  PipeOptions o;
  o.wait_fd = true;
  o.buffers = 32768;
  return o;
}

inline Wire& main_wire() {
  static Wire w = add_wire("10.0.0.1", "10.0.0.2", wire_options());
  return w;
}

inline Wire& faulty_wire() {
  // Full checksums: this wire corrupts frames.
  static Wire w = add_wire("10.0.1.1", "10.0.1.2", wire_options(), LinkChecksums::kFull);
  return w;
}

inline LinkCounters link_counters(int link) {
  LinkCounters c;
  EXPECT_EQ(LwipStack::get().link_counters(link, &c), 0);
  return c;
}
inline uint64_t tx_packets(int link) { return link_counters(link).tx_packets; }
inline uint64_t tx_bytes(int link) { return link_counters(link).tx_bytes; }

struct LwipPipeHarness {
  static constexpr const char* kName = "lwip";
  static constexpr bool kOneTransport = false;
  static constexpr auto kDeadline = std::chrono::seconds(10);
  static constexpr int kWaitUs = 0, kIdleUs = 1'000, kBusyUs = 0;
  static constexpr bool kExactReset = true;
  static constexpr bool kGracefulRelease = true;  // lwip_transport.h
  static constexpr bool kResetsUnreportedAccepts = true;

  static void set_up() { main_wire(); }
  static void tear_down() {
    // Let the closes and resets of the destroyed transports play out.
    auto t = make_lwip_transport();
    Recorder r;
    for (int i = 0; i < 50; ++i) t->poll(r, 1'000);
  }
  static std::unique_ptr<Transport> make(int side) {
    return make_lwip_transport({.source = ip4(side == 0 ? "10.0.0.1" : "10.0.0.2")});
  }
  static in_addr client_ip() { return ip4("10.0.0.1"); }
  static sockaddr_in server_addr(uint16_t port) { return addr("10.0.0.2", port); }
  static sockaddr_in unreachable() { return addr("192.0.2.1", 9); }  // no route, no default link
  static size_t max_tx_space() { return kLwipMaxTxSpace; }
  // The window, then the unsent queue, took what the peer does not read.
  static void expect_peer_full(size_t sent, StreamConn* receiver) {
    const size_t buffered = buffered_bytes(receiver);
    EXPECT_GE(sent, kWindow) << "the peer's window, then the unsent queue";
    EXPECT_GE(buffered, size_t{1} << 20) << "the receive window should be full";
    EXPECT_LE(buffered, kWindow + 1460);
  }
  // Another transport, on this thread, connects to the listener: its event
  // for the polling transport wakes that one's wait.
  static void rescue(const sockaddr_in& listener) {
    auto t = make_lwip_transport();
    Recorder r;
    StreamConn* c = nullptr;
    if (t->connect(listener, &c) != 0) return;
    for (int i = 0; i < 100 && !r.connected.contains(c); ++i) t->poll(r, 10'000);
    t->release(c);
  }
};

class LwipTest : public TransportFixture<LwipPipeHarness> {};

// Two transports with their own recorders, connected over the wire between
// ip_a (client) and ip_b (server).
struct Endpoints {
  std::unique_ptr<Transport> a, b;
  Recorder ra, rb;
  Listener* l = nullptr;
  StreamConn* c = nullptr;  // a's
  StreamConn* s = nullptr;  // b's

  void poll(int timeout_us = 0) {
    a->poll(ra, timeout_us);
    b->poll(rb, 0);
  }
  void connect(const char* ip_a, const char* ip_b) {
    a = make_lwip_transport({.source = ip4(ip_a)});
    b = make_lwip_transport({.source = ip4(ip_b)});
    ASSERT_EQ(b->listen(addr(ip_b, 0), 4, &l), 0);
    ASSERT_EQ(a->connect(l->addr(), &c), 0);
    auto end = Clock::now() + LwipPipeHarness::kDeadline;
    while ((!ra.connected.contains(c) || rb.accepted.empty()) && Clock::now() < end) poll();
    ASSERT_EQ(ra.connected[c], 0);
    s = rb.accepted.at(0);
  }
  void release() {
    a->release(c);
    b->release(s);
    b->close_listener(l);
  }
};

}  // namespace softrdma::net::testing
