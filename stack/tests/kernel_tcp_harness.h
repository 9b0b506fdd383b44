// The kernel TCP transport for TransportFixture (see transport_fixture.h):
// one transport holding both ends on 127.0.0.1, with the given receive
// buffer and transmit backlog sizes.
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <memory>

#include "stack/net/kernel_tcp.h"
#include "stack/tests/loopback.h"

namespace softrdma::net::testing {

using ::softrdma::testing::loopback;

template <size_t kRxBuffer = KernelTcpOptions{}.rx_buffer_bytes,
          size_t kTxBacklog = KernelTcpOptions{}.tx_backlog_bytes>
struct KernelTcpHarness {
  static constexpr const char* kName = "kernel-tcp";
  static constexpr bool kOneTransport = true;
  static constexpr auto kDeadline = std::chrono::seconds(5);
  static constexpr int kWaitUs = 10'000, kIdleUs = 5'000, kBusyUs = 1'000;
  // With data unread at the aborting end the peer may see the FIN first.
  static constexpr bool kExactReset = false;
  // close(2) with unread bytes resets the stream.
  static constexpr bool kGracefulRelease = false;
  static constexpr bool kResetsUnreportedAccepts = false;

  static KernelTcpOptions options() {
    KernelTcpOptions o;
    o.rx_buffer_bytes = kRxBuffer;
    o.tx_backlog_bytes = kTxBacklog;
    return o;
  }
  static void set_up() {}
  static void tear_down() {}
  static std::unique_ptr<Transport> make(int /*side*/) {
    return make_kernel_tcp_transport(options());
  }
  static in_addr client_ip() { return loopback(0).sin_addr; }
  static sockaddr_in server_addr(uint16_t port) { return loopback(port); }
  static sockaddr_in unreachable() {
    sockaddr_in bcast = loopback(1);
    bcast.sin_addr.s_addr = htonl(INADDR_BROADCAST);  // TCP refuses broadcast at once
    return bcast;
  }
  static size_t max_tx_space() { return kTxBacklog; }
  // The receiver reads from the socket into its linear buffer until it is
  // full, and lends it as one view.
  static void expect_peer_full(size_t /*sent*/, StreamConn* receiver) {
    RxView v;
    ASSERT_EQ(receiver->rx_peek(&v, 1), 1u);
    EXPECT_EQ(v.len, kRxBuffer) << "receive buffer should be full";
  }
  // A connection to a listener in the same epoll set ends the poll.
  static void rescue(const sockaddr_in& listener) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&listener), sizeof(listener));
    ::close(fd);
  }
};

}  // namespace softrdma::net::testing
