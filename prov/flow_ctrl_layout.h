// The layout of ofi_rxm's flow-control ops ("ofix_flow_ctrl_v1", struct
// ofi_ops_flow_ctrl in libfabric's include/ofi_util.h, which libfabric does
// not install), and the libfabric releases it is known to match. rxm finds
// the struct by name and calls through it by offset: under a libfabric
// whose struct differs it would call the wrong functions, so the provider
// offers the ops only when the libfabric that loaded it is one of these.
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>

namespace softrdma::prov {

struct FlowCtrlOps {
  size_t size;
  bool (*available)(fid_ep* ep);
  int (*enable)(fid_ep* ep, uint64_t threshold);
  void (*add_credits)(fid_ep* ep, uint64_t credits);
  void (*set_send_handler)(fid_domain* domain, ssize_t (*send_handler)(fid_ep* ep, uint64_t credits));
};

// fi_version() of the releases whose ofi_rxm was checked against FlowCtrlOps:
// 1.17 (Debian 12's). fi_version() carries no patch level; the struct does
// not change within a minor release.
constexpr bool flow_ctrl_layout_known(uint32_t version) {
  return FI_MAJOR(version) == 1 && FI_MINOR(version) == 17;
}

}  // namespace softrdma::prov
