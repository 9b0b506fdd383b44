// A host interface shared with the kernel answers lwIP's ARP from the
// kernel's neighbour table: the XDP program passes every ARP frame to the
// kernel (which owns the address and answers for it), so replies to lwIP's
// own requests would never reach lwIP.
#pragma once

#include <memory>
#include <string>

#include "stack/net/frame_link.h"

namespace softrdma::net {

// ifname: the kernel's name of the port's interface (its neighbour table).
std::unique_ptr<FrameLink> with_kernel_arp(std::unique_ptr<FrameLink> port,
                                           const std::string& ifname);

}  // namespace softrdma::net
