// The product data path: lwIP TCP/IP on DPDK ports, as an engine transport.
//
// Two topologies, chosen by configuration (FI_SOFTRDMA_* variables):
//  - Embedded (default, nothing set): processes on this host form a mesh of
//    memif links created on demand (see rendezvous.h). Each process is
//    10.128.0.0/9 + its pid; 127.0.0.1:port and the host's own IP:port
//    lead to the process listening on that port.
//  - Port: FI_SOFTRDMA_DEVARGS names one DPDK device (af_packet or af_xdp on
//    a Linux interface, a memif, a PCI NIC) with FI_SOFTRDMA_ADDR=ip/prefix
//    and optionally FI_SOFTRDMA_GATEWAY; FI_SOFTRDMA_NETNS probes it inside
//    a network namespace. For several hosts.
// FI_SOFTRDMA_MTU sets the links' MTU; FI_SOFTRDMA_PCAP=file records every
// frame (%p: pid, %n: link name); FI_SOFTRDMA_EAL_ARGS adds EAL arguments.
#pragma once

#include <netinet/in.h>

#include <memory>
#include <string>

#include "stack/net/transport.h"

namespace softrdma::net {

struct DpdkTransportConfig {
  std::string devargs;  // empty: the embedded memif mesh
  in_addr addr{};
  int prefix = 24;
  in_addr gateway{};
  std::string netns;
  // 0: the mode's default. The memif mesh uses 9000 (memif moves jumbo
  // frames in one buffer when its bsize fits: measured ~3x the bandwidth of
  // 1500); a configured port 1500, its NIC's usual MTU.
  uint32_t mtu = 0;
  static DpdkTransportConfig from_env();
};

// Null (with the reason on stderr) when DPDK or the port cannot start.
std::unique_ptr<Transport> make_dpdk_transport(const DpdkTransportConfig& cfg);

}  // namespace softrdma::net
