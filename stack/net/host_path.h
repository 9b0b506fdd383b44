// The host path: lwIP on one of the host's own interfaces, answering on
// the kernel's address of that interface. The kernel keeps the interface
// (ARP, ICMP, its own TCP); the TCP ports lwIP uses are held in the kernel
// (port_reserve.h) and steered to softrdma by its BPF programs (a packet
// socket's filter and tcx program, dpdk/tc_steer.h, or the XDP program of an
// af_xdp port, dpdk/xdp_steer.h). The NIC (nic_port.h) is either this
// process's own (root, no switch on the interface) or softrdma-switch's,
// reached through shared memory (switch/switch_link.h): the way for every
// unprivileged process, many per host.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "stack/net/host_addr.h"

namespace softrdma::net {

// A port of this process on a host interface: held in the kernel and
// steered to lwIP until release (or the process's end).
struct HostClaim {
  std::string iface;
  in_addr addr{};
  uint16_t port = 0;  // host byte order
};

class HostPath {
 public:
  // Opens iface's link for lwIP if this process has none yet: 0 or -errno,
  // with a message naming what failed in *error.
  static int open(const HostIface& iface, std::string* error);
  // Holds iface's address and port (0: one the kernel picks) and steers it
  // (open() first). 0 or -errno, with the reason in *error.
  static int claim(const HostIface& iface, uint16_t port, HostClaim* out, std::string* error);
  // The claim's user is done with it; the port stays held and steered
  // while lwIP still has a connection on it (closing, TIME-WAIT, or accepted
  // from a listener that closed): segments for it must not reach the kernel,
  // which would reset them. sweep() lets such ports go.
  static void release(const HostClaim& c);
  static void sweep();
  // Sends dest over iface's link to iface's gateway (dest is off-link).
  static int route_via_gateway(const HostIface& iface, in_addr dest);
};

}  // namespace softrdma::net
