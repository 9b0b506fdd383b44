#include "stack/net/host_path.h"

#include <arpa/inet.h>
#include <dirent.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "stack/net/dpdk/port.h"
#include "stack/net/dpdk/xdp_steer.h"
#include "stack/net/fault_link.h"
#include "stack/net/kernel_arp_link.h"
#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/port_reserve.h"

namespace softrdma::net {

namespace {

struct Link {
  HostIface iface;
  int id = -1;
  std::unique_ptr<XdpSteer> steer;
};

std::mutex g_mu;
std::map<std::string, Link> g_links;
using ClaimKey = std::pair<std::string, uint16_t>;
std::map<ClaimKey, PortReservation> g_claims;
std::set<ClaimKey> g_released;  // held until lwIP is done with the port
int g_next_vdev = 0;
constexpr uint32_t kXdpMbufs = 8192;

// Receive queues of ifname (/sys/class/net/X/queues/rx-N).
int rx_queues(const std::string& ifname) {
  DIR* d = ::opendir(("/sys/class/net/" + ifname + "/queues").c_str());
  if (d == nullptr) return 1;
  int n = 0;
  while (dirent* e = ::readdir(d)) n += std::strncmp(e->d_name, "rx-", 3) == 0;
  ::closedir(d);
  return n > 0 ? n : 1;
}

uint32_t iface_mtu(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/mtu");
  uint32_t mtu = 0;
  return (f >> mtu) && mtu >= 576 ? mtu : 1500;
}

in_addr netmask_of(int prefix) {
  return in_addr{htonl(prefix <= 0 ? 0 : ~uint32_t{0} << (32 - prefix))};
}

}  // namespace

int HostPath::open(const HostIface& iface, std::string* error) {
  std::lock_guard g(g_mu);
  if (g_links.count(iface.name)) return 0;
  const std::string where = "af_xdp on " + iface.name;
  // An AF_XDP socket receives only its own queue's frames, and a port here
  // has one queue: a redirect from any other queue would be lost.
  if (int q = rx_queues(iface.name); q != 1) {
    *error = where + ": " + std::to_string(q) + " rx queues, softrdma's port reads queue 0 only" +
             " (ethtool -L " + iface.name + " combined 1)";
    return -EOPNOTSUPP;
  }
  // libxdp would put the program behind its multi-program dispatcher, which
  // needs a bpffs mount a network namespace host may not have; softrdma's
  // program is the interface's one program.
  ::setenv("LIBXDP_SKIP_DISPATCHER", "1", 0);
  std::string why;
  if (int rc = XdpSteer::clear_stale(iface.index, iface.name, &why); rc < 0) {
    *error = where + ": " + why;
    return rc;
  }
  PortOptions o;
  o.devargs = "net_af_xdp" + std::to_string(100 + g_next_vdev++) + ",iface=" + iface.name +
              ",start_queue=0,queue_count=1,busy_budget=0,xdp_prog=" + xdp_steer_program();
  o.mtu = iface_mtu(iface.name);
  // af_xdp's own pool becomes the socket's UMEM (dpdk/xdp_pool.cc): 8192
  // 4 KiB frames (32 MB) fit beside the mesh's pool in the EAL's memory and
  // cover the fill ring (2048), the rx and tx rings and what lwIP holds.
  o.pool_mbufs = kXdpMbufs;
  std::unique_ptr<FrameLink> port = open_dpdk_port(o, &why);
  if (!port) {
    *error = where + ": " + why;
    return -ENODEV;
  }
  Link l;
  l.iface = iface;
  l.steer = XdpSteer::find(iface.index, iface.name, &why);
  if (!l.steer) {
    *error = where + ": " + why;
    return -ENODEV;
  }
  if (int rc = l.steer->set_owner(); rc < 0) {
    *error = where + ": XDP owner map: " + std::strerror(-rc);
    return rc;
  }
  LwipLinkOptions lo;
  lo.checksums = LinkChecksums::kFull;  // a wire: frames can be damaged
  l.id = LwipStack::get().add_link(
      with_kernel_arp(with_env_decorators(std::move(port)), iface.name), iface.addr,
      netmask_of(iface.prefix), iface.gateway, lo);
  if (l.id < 0) {
    *error = where + ": lwIP refused the link: " + std::strerror(-l.id);
    return l.id;
  }
  LwipStack::get().sync_link_states();
  g_links.emplace(iface.name, std::move(l));
  return 0;
}

int HostPath::claim(const HostIface& iface, uint16_t port, HostClaim* out, std::string* error) {
  std::lock_guard g(g_mu);
  auto it = g_links.find(iface.name);
  if (it == g_links.end()) {
    *error = "no softrdma port on " + iface.name;
    return -ENODEV;
  }
  if (port != 0 && g_released.erase({iface.name, port})) {  // ours still: use it again
    *out = HostClaim{iface.name, iface.addr, port};
    return 0;
  }
  char ip[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &iface.addr, ip, sizeof(ip));
  PortReservation r;
  if (int rc = r.take(iface.addr, port); rc < 0) {
    *error = std::string("reserving TCP port ") + ip + ":" + std::to_string(port) +
             " in the kernel: " + std::strerror(-rc);
    return rc;
  }
  if (int rc = it->second.steer->add(r.port()); rc < 0) {
    *error = "XDP port map on " + iface.name + ": " + std::strerror(-rc);
    return rc;
  }
  *out = HostClaim{iface.name, iface.addr, r.port()};
  g_claims[{iface.name, r.port()}] = std::move(r);
  return 0;
}

void HostPath::release(const HostClaim& c) {
  std::lock_guard g(g_mu);
  if (g_claims.count({c.iface, c.port})) g_released.insert({c.iface, c.port});
}

void HostPath::sweep() {
  std::lock_guard g(g_mu);
  for (auto it = g_released.begin(); it != g_released.end();) {
    if (LwipStack::get().local_port_in_use(it->second)) {
      ++it;
      continue;
    }
    if (auto l = g_links.find(it->first); l != g_links.end()) l->second.steer->remove(it->second);
    g_claims.erase(*it);
    it = g_released.erase(it);
  }
}

int HostPath::route_via_gateway(const HostIface& iface, in_addr dest) {
  std::lock_guard g(g_mu);
  auto it = g_links.find(iface.name);
  if (it == g_links.end()) return -ENODEV;
  return LwipStack::get().add_route(dest, 32, it->second.id, iface.gateway);
}

}  // namespace softrdma::net
