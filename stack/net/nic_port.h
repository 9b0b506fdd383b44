// A host interface's NIC as softrdma opens it: an af_xdp port on queue 0
// with softrdma's XDP program, which steers the TCP ports in its map to the
// port and leaves everything else to the kernel. Opened by a root process
// on its own (host_path.cc) or by softrdma-switch for every rank on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stack/net/dpdk/xdp_steer.h"
#include "stack/net/frame_link.h"
#include "stack/net/host_addr.h"

namespace softrdma::net {

struct NicPort {
  std::unique_ptr<FrameLink> port;
  std::unique_ptr<XdpSteer> steer;
  int xsk_fd = -1;  // the AF_XDP socket under the port: polls readable on a frame
};

// 0, or -errno with a message naming the interface and what failed.
int open_nic_port(const HostIface& iface, NicPort* out, std::string* error);

// The kernel's MTU of ifname (1500 when unknown).
uint32_t iface_mtu(const std::string& ifname);

}  // namespace softrdma::net
