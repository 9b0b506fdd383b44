// ofi_rxm's flow-control ops (prov/flow_ctrl.cc) are offered exactly when
// the libfabric that loaded the provider is one whose layout they copy.
// ctest runs this twice: against this host's libfabric, and with
// fi_version() answering 1.99 (fake_fi_version.c preloaded,
// FIT_FAKE_FI_VERSION set), where fi_open_ops must refuse.
#include <cstdlib>

#include "fi-tests/fi_test.h"
#include "prov/flow_ctrl_layout.h"

namespace fit {
namespace {

using softrdma::prov::flow_ctrl_layout_known;
using softrdma::prov::FlowCtrlOps;

TEST(FlowCtrlLayout, KnownOnlyForCheckedReleases) {
  EXPECT_TRUE(flow_ctrl_layout_known(FI_VERSION(1, 17)));
  for (uint32_t v : {FI_VERSION(1, 16), FI_VERSION(1, 18), FI_VERSION(1, 99), FI_VERSION(2, 17),
                     FI_VERSION(0, 17)}) {
    EXPECT_FALSE(flow_ctrl_layout_known(v)) << FI_MAJOR(v) << "." << FI_MINOR(v);
  }
}

TEST(FlowCtrlOps, OfferedExactlyWhenTheLayoutIsKnown) {
  const bool faked = std::getenv("FIT_FAKE_FI_VERSION") != nullptr;
  const uint32_t v = fi_version();
  if (faked) {
    ASSERT_EQ(v, FI_VERSION(1, 99)) << "fake_fi_version.so was not preloaded";
  } else {
    ASSERT_TRUE(flow_ctrl_layout_known(v)) << "this host's libfabric is " << FI_MAJOR(v) << "."
                                           << FI_MINOR(v);
  }
  Fabric f;
  ASSERT_NE(f.domain(), nullptr);
  void* p = &f;  // must be overwritten either way
  const int rc = fi_open_ops(&f.domain()->fid, "ofix_flow_ctrl_v1", 0, &p, nullptr);
  if (faked) {
    EXPECT_EQ(rc, -FI_ENOSYS);
    EXPECT_EQ(p, nullptr);
    return;
  }
  ASSERT_EQ(rc, 0) << fi_strerror(-rc);
  const auto* ops = static_cast<const FlowCtrlOps*>(p);
  ASSERT_NE(ops, nullptr);
  EXPECT_EQ(ops->size, sizeof(FlowCtrlOps));
  EXPECT_NE(ops->enable, nullptr);
  EXPECT_NE(ops->add_credits, nullptr);
  EXPECT_NE(ops->set_send_handler, nullptr);
  ASSERT_NE(ops->available, nullptr);
  auto ep = f.open_ep(f.info());
  EXPECT_TRUE(ops->available(ep->ep));
}

}  // namespace
}  // namespace fit
