// Kernel TCP transport over loopback, what only it does: the sizing options
// and a send that finds the stream reset before any poll. The rest of the
// Transport contract runs in transport_contract_test.cc.

#include <errno.h>
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "stack/iwarp/fpdu_size.h"
#include "stack/net/kernel_tcp.h"
#include "stack/tests/kernel_tcp_harness.h"
#include "stack/tests/transport_fixture.h"

namespace softrdma::net::testing {
namespace {

class KernelTcpTest : public TransportFixture<KernelTcpHarness<>> {};

// Sizes below the minimum are raised to it: a whole FPDU always fits.
TEST_F(KernelTcpTest, OptionsAreRaisedToTheMinimum) {
  KernelTcpOptions tiny;
  tiny.rx_buffer_bytes = 1;
  tiny.tx_backlog_bytes = 1;
  own_a_ = make_kernel_tcp_transport(tiny);
  ASSERT_NE(own_a_, nullptr);
  a_ = b_ = own_a_.get();
  connect_pair();
  EXPECT_EQ(client_->tx_space(), kKernelTcpMinTxBacklog);
  std::vector<uint8_t> fpdu(iwarp::fpdu_size(client_->max_segment()), 3);
  iovec iov{fpdu.data(), fpdu.size()};
  ASSERT_EQ(client_->tx_send(&iov, 1, fpdu.size()), 0);
  Sink sink{&fpdu};
  rb_.read_hook = [&](StreamConn* c) { sink.drain(c); };
  EXPECT_TRUE(poll_until([&] {
    sink.drain(server_);  // a remainder waits without new data arriving
    return sink.received == fpdu.size();
  }));
  rb_.read_hook = nullptr;
  release_pair();
}

// Unlike a userspace stack, the kernel knows of the peer's reset before any
// poll: the send fails at once, and poll() then reports on_closed once.
TEST_F(KernelTcpTest, SendAfterPeerResetReportsClosed) {
  connect_pair();
  client_->abort();
  ra_.forbidden.insert(client_);
  std::vector<uint8_t> buf(4096, 7);
  iovec iov{buf.data(), buf.size()};
  int r = 0;
  for (int i = 0; i < 4 && r == 0; ++i) r = server_->tx_send(&iov, 1, buf.size());
  EXPECT_TRUE(r == -ECONNRESET || r == -EPIPE) << "r " << r;
  EXPECT_EQ(server_->tx_send(&iov, 1, buf.size()), r) << "the error sticks";
  ASSERT_TRUE(poll_until([&] { return rb_.closed.contains(server_); }));
  EXPECT_LT(rb_.closed[server_], 0);
  poll_for(std::chrono::milliseconds(20));
  release_pair();
}

}  // namespace
}  // namespace softrdma::net::testing
