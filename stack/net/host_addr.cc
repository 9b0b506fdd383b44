// Kernel interface, route and neighbour look-ups for the host path.
#include "stack/net/host_addr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "stack/net/switch/switch_proto.h"

namespace softrdma::net {

namespace {

int prefix_of(in_addr mask) { return __builtin_popcount(mask.s_addr); }

bool same_subnet(in_addr a, in_addr b, int prefix) {
  const uint32_t m = prefix <= 0 ? 0 : ~uint32_t{0} << (32 - prefix);
  return (ntohl(a.s_addr) & m) == (ntohl(b.s_addr) & m);
}

// Every up, non-loopback interface with an IPv4 address (the first address
// of each), in the kernel's order.
std::vector<HostIface> ipv4_ifaces() {
  std::vector<HostIface> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    bool seen = false;
    for (const HostIface& h : out) seen |= h.name == i->ifa_name;
    if (seen) continue;
    HostIface h;
    h.name = i->ifa_name;
    h.index = static_cast<int>(::if_nametoindex(i->ifa_name));
    h.addr = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    h.prefix = prefix_of(reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr);
    out.push_back(h);
  }
  ::freeifaddrs(ifs);
  return out;
}

// The gateway of ifname's default route (/proc/net/route), or 0.
in_addr default_gateway(const std::string& ifname) {
  std::ifstream f("/proc/net/route");
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string name;
    unsigned dest = 0, gw = 0;
    if ((s >> name >> std::hex >> dest >> gw) && name == ifname && dest == 0 && gw != 0)
      return in_addr{gw};  // the file holds them in network order, as hex
  }
  return in_addr{};
}

}  // namespace

int kernel_source_for(in_addr dest, in_addr* source) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = dest;
  a.sin_port = htons(9);  // any: a datagram socket's connect sends nothing
  socklen_t len = sizeof(a);
  int rc = 0;
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    rc = -errno;
  ::close(s);
  if (rc == 0) *source = a.sin_addr;
  return rc;
}

std::optional<HostIface> host_route_to(in_addr dest, std::string* error) {
  char ip[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &dest, ip, sizeof(ip));
  in_addr src{};
  if (int rc = kernel_source_for(dest, &src); rc < 0) {
    *error = std::string("route to ") + ip + ": " + std::strerror(-rc);
    return std::nullopt;
  }
  for (HostIface& h : ipv4_ifaces()) {
    if (h.addr.s_addr != src.s_addr) continue;
    if (!same_subnet(dest, h.addr, h.prefix)) h.gateway = default_gateway(h.name);
    return h;
  }
  *error = std::string("route to ") + ip + ": no up, non-loopback interface has its source address";
  return std::nullopt;
}

bool host_path_allowed(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/ifalias");
  std::string alias;
  std::getline(f, alias);
  return alias.find("softrdma") != std::string::npos || switch_serves(ifname);
}

bool switch_serves(const std::string& ifname) {
  struct stat st{};
  return ::stat(sw::ctl_path(ifname).c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == 0;
}

std::optional<HostIface> host_iface_named(const std::string& ifname) {
  for (HostIface& h : ipv4_ifaces())
    if (h.name == ifname) return h;
  return std::nullopt;
}

std::vector<HostIface> host_path_ifaces() {
  std::vector<HostIface> out;
  for (HostIface& h : ipv4_ifaces())
    if (host_path_allowed(h.name)) out.push_back(h);
  return out;
}

bool kernel_neighbor(in_addr ip, const std::string& ifname, uint8_t mac[6]) {
  std::ifstream f("/proc/net/arp");
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    char addr[32], hw[32], dev[IFNAMSIZ + 1];
    unsigned type = 0, flags = 0;
    if (std::sscanf(line.c_str(), "%31s 0x%x 0x%x %31s %*s %16s", addr, &type, &flags, hw, dev) != 5)
      continue;
    in_addr a{};
    if (::inet_pton(AF_INET, addr, &a) != 1 || a.s_addr != ip.s_addr || ifname != dev) continue;
    if ((flags & 0x2) == 0) return false;  // ATF_COM: not resolved (yet)
    unsigned m[6];
    if (std::sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
      return false;
    for (int i = 0; i < 6; ++i) mac[i] = static_cast<uint8_t>(m[i]);
    return true;
  }
  return false;
}

void kernel_resolve(in_addr ip) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons(9);
  ::sendto(s, "", 0, 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::close(s);
}

}  // namespace softrdma::net
