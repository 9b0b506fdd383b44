// Closing right after a Send completes loses nothing. A completion says the
// bytes were handed to the stream, not that they arrived; like closing a
// socket, fi_close (with or without fi_shutdown first) ends the connection
// with a FIN behind those bytes, and closing the domain gives them time to
// leave before the transport goes. The client is another process that
// closes everything and exits at once, so nothing else drives its network
// stack afterwards. Closing a parent before its children is refused.
#include <cstring>
#include <tuple>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

// One message that fits the stream's buffers, and one far larger.
constexpr size_t kSizes[] = {64u << 10, 16u << 20};

int send_and_close(int fd, bool shutdown_first) {
  std::vector<uint8_t> addr, size;
  if (!recv_blob(fd, &addr) || addr.size() != sizeof(sockaddr_in)) return 2;
  if (!recv_blob(fd, &size) || size.size() != sizeof(size_t)) return 2;
  size_t len;
  std::memcpy(&len, size.data(), sizeof(len));
  Fabric f;
  auto ep = connect_and_send(f, addr.data(), len, 77);
  if (::testing::Test::HasFailure()) return 1;
  if (shutdown_first) {
    EXPECT_EQ(fi_shutdown(ep->ep, 0), 0);
  }
  return ::testing::Test::HasFailure() ? 3 : 0;  // ep, domain, fabric close here
}
int close_only(int fd) { return send_and_close(fd, false); }
int shutdown_then_close(int fd) { return send_and_close(fd, true); }
FIT_CHILD(close_only, close_only);
FIT_CHILD(shutdown_then_close, shutdown_then_close);

class Close : public ::testing::TestWithParam<std::tuple<const char*, size_t>> {};

TEST_P(Close, RightAfterSendCompletesDeliversEveryByte) {
  const auto [way, len] = GetParam();
  Fabric f;
  f.listen();
  ASSERT_FALSE(HasFailure());
  int fd = -1;
  pid_t pid = spawn(way, &fd);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(send_blob(fd, &f.addr(), sizeof(sockaddr_in)));
  ASSERT_TRUE(send_blob(fd, &len, sizeof(len)));
  // A slow reader: the client's send completes with its buffers full.
  auto ep = accept_and_receive(f, len, 77, /*stall_ms=*/300);
  ASSERT_TRUE(ep);
  // Then the orderly end of the connection, not a reset.
  uint32_t event = 0;
  std::vector<uint8_t> entry(sizeof(fi_eq_cm_entry) + 256);
  fi_eq_err_entry eq_err{};
  EXPECT_GE(eq_wait(ep->eq, &event, entry.data(), entry.size(), &eq_err),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)))
      << "the connection ended with an error: " << fi_strerror(eq_err.err);
  EXPECT_EQ(event, FI_SHUTDOWN);
  EXPECT_TRUE(child_ok(pid));
  ::close(fd);
}

// fi_close of a fabric or a domain with objects still open on it is
// refused (-FI_EBUSY) and leaves everything working; in order, every close
// succeeds.
TEST(CloseOrder, ParentWithChildrenOpenIsRefused) {
  Info list;
  ASSERT_EQ(getinfo(msg_hints().get(), &list), 0);
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  fid_cntr* cntr = nullptr;
  fid_mr* mr = nullptr;
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_fabric(list->fabric_attr, &fabric, nullptr), 0);
  ASSERT_EQ(fi_domain(fabric, list.get(), &domain, nullptr), 0);
  fi_eq_attr ea{};
  ASSERT_EQ(fi_eq_open(fabric, &ea, &eq, nullptr), 0);
  fi_cq_attr ca{};
  ASSERT_EQ(fi_cq_open(domain, &ca, &cq, nullptr), 0);
  fi_cntr_attr na{};
  ASSERT_EQ(fi_cntr_open(domain, &na, &cntr, nullptr), 0);
  static uint8_t buf[4096];
  ASSERT_EQ(fi_mr_reg(domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr), 0);
  ASSERT_EQ(fi_endpoint(domain, list.get(), &ep, nullptr), 0);

  EXPECT_EQ(fi_close(&fabric->fid), -FI_EBUSY);
  EXPECT_EQ(fi_close(&domain->fid), -FI_EBUSY);
  // Each child in turn: the domain stays busy until the last one goes.
  for (fid* child : {&ep->fid, &mr->fid, &cntr->fid, &cq->fid}) {
    EXPECT_EQ(fi_close(&domain->fid), -FI_EBUSY);
    EXPECT_EQ(fi_close(child), 0);
  }
  EXPECT_EQ(fi_close(&fabric->fid), -FI_EBUSY);  // the domain and the EQ
  EXPECT_EQ(fi_close(&domain->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), -FI_EBUSY);  // the EQ
  EXPECT_EQ(fi_close(&eq->fid), 0);
  EXPECT_EQ(fi_close(&fabric->fid), 0);
}

INSTANTIATE_TEST_SUITE_P(Ways, Close,
                         ::testing::Combine(::testing::Values("close_only", "shutdown_then_close"),
                                            ::testing::ValuesIn(kSizes)),
                         [](const auto& p) {
                           return std::string(std::get<0>(p.param)) + "_" +
                                  std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace fit
