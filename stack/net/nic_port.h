// A host interface's NIC as softrdma opens it, either
//  - af_xdp: an AF_XDP port on queue 0 with softrdma's XDP program, which
//    steers the TCP ports in its map to the port (xdp_steer.h); frames up to
//    the interface's MTU; or
//  - af_packet: a packet socket with the kernel's segmentation and checksum
//    offloads (packet_link.h), the same ports picked by its socket filter
//    and kept from the kernel at tcx ingress (tc_steer.h); TCP segments of
//    up to 64 KiB.
// Everything else stays the kernel's. Opened by a root process on its own
// (host_path.cc) or by softrdma-switch for every rank on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stack/net/dpdk/port_steer.h"
#include "stack/net/frame_link.h"
#include "stack/net/host_addr.h"

namespace softrdma::net {

enum class NicKind : uint8_t { kAfXdp, kPacket };

struct NicPort {
  std::unique_ptr<FrameLink> port;
  std::unique_ptr<PortSteer> steer;
  int fd = -1;  // the socket under the port: polls readable on a frame
};

// 0, or -errno with a message naming the interface and what failed.
int open_nic_port(const HostIface& iface, NicKind kind, NicPort* out, std::string* error);

// The kernel's MTU of ifname (1500 when unknown).
uint32_t iface_mtu(const std::string& ifname);

}  // namespace softrdma::net
