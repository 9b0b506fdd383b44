// A host interface as a FrameLink through an AF_PACKET socket with
// virtio-net headers (PACKET_VNET_HDR): the kernel's own segmentation and
// checksum offloads under lwIP. lwIP hands the link TCP segments of up to
// 64 KiB; the kernel cuts them to the interface's MTU where a wire needs it
// (GSO, or the NIC's TSO), and over veth and bridges passes them whole, as
// it does its own TCP's. Received segments come as the kernel's GRO made
// them. TCP checksums are the kernel's (or the NIC's) both ways: lwIP leaves
// them to the link (LinkChecksums::kTcpByLink), which verifies in software
// only what the kernel did not.
//
// The socket receives only what softrdma's socket filter picks (TCP to the
// steered ports, tc_steer.h); no DPDK, no hugepages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stack/net/frame_link.h"
#include "stack/net/host_addr.h"

namespace softrdma::net {

class PacketLink : public FrameLink {
 public:
  // The largest IP packet lwIP may hand the link (its MTU for lwIP).
  static constexpr uint32_t kMaxIpPacket = 65000;
  virtual int fd() const = 0;  // the socket: polls readable on a frame
};

// Opens iface's packet socket (root: CAP_NET_RAW) with the socket filter
// filter_fd (a BPF_PROG_TYPE_SOCKET_FILTER program) attached before it
// receives anything; wire_mtu is the interface's IP MTU, what the kernel
// cuts segments to. Null with the reason in *error.
std::unique_ptr<PacketLink> open_packet_link(const HostIface& iface, uint32_t wire_mtu,
                                             int filter_fd, std::string* error);

}  // namespace softrdma::net
