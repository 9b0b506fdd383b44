// The host's own interfaces and addresses as the kernel sees them: which
// interface and source address reach a destination, which interfaces carry
// softrdma's host path, and the kernel's neighbour (ARP) table.
#pragma once

#include <netinet/in.h>

#include <optional>
#include <string>
#include <vector>

namespace softrdma::net {

struct HostIface {
  std::string name;
  int index = 0;
  in_addr addr{};     // the kernel's IPv4 address on it
  int prefix = 32;
  in_addr gateway{};  // the next hop when the destination is off-link, else 0
};

// The source address the kernel's routing picks for dest (a UDP socket's
// connect, nothing sent): 0 or -errno.
int kernel_source_for(in_addr dest, in_addr* source);

// The interface and source address the kernel's routing picks for dest
// (a UDP socket's connect, nothing sent); nullopt with the reason in *error.
std::optional<HostIface> host_route_to(in_addr dest, std::string* error);

// The interfaces softrdma may open for its host path: up, not loopback,
// with an IPv4 address, and marked by the administrator for softrdma
// (`ip link set dev IF alias softrdma`, as an iWARP NIC's driver is loaded
// by the administrator) or served by a running softrdma-switch.
std::vector<HostIface> host_path_ifaces();
bool host_path_allowed(const std::string& ifname);
// Whether softrdma-switch serves ifname (root's control socket is there).
bool switch_serves(const std::string& ifname);
// The up, non-loopback interface ifname with its first IPv4 address.
std::optional<HostIface> host_iface_named(const std::string& ifname);

// ip's MAC from the kernel's neighbour table on ifname, if complete.
bool kernel_neighbor(in_addr ip, const std::string& ifname, uint8_t mac[6]);
// Makes the kernel resolve ip (a datagram to the discard port, which a
// host answers at most with an ICMP error).
void kernel_resolve(in_addr ip);

}  // namespace softrdma::net
