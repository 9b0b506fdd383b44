#include "stack/net/nic_port.h"

#include <dirent.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "stack/net/dpdk/port.h"
#include "stack/net/dpdk/tc_steer.h"
#include "stack/net/dpdk/xdp_steer.h"
#include "stack/net/packet_link.h"

namespace softrdma::net {

namespace {

int g_next_vdev = 0;
constexpr uint32_t kXdpMbufs = 8192;
#ifndef AF_XDP
#define AF_XDP 44
#endif

// Receive queues of ifname (/sys/class/net/X/queues/rx-N).
int rx_queues(const std::string& ifname) {
  DIR* d = ::opendir(("/sys/class/net/" + ifname + "/queues").c_str());
  if (d == nullptr) return 1;
  int n = 0;
  while (dirent* e = ::readdir(d)) n += std::strncmp(e->d_name, "rx-", 3) == 0;
  ::closedir(d);
  return n > 0 ? n : 1;
}

// The process's AF_XDP sockets (DPDK's af_xdp driver keeps its own hidden).
std::set<int> xdp_sockets() {
  std::set<int> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    int dom = 0;
    socklen_t len = sizeof(dom);
    if (fd > 2 && ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) == 0 && dom == AF_XDP)
      out.insert(fd);
  }
  ::closedir(d);
  return out;
}

}  // namespace

uint32_t iface_mtu(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/mtu");
  uint32_t mtu = 0;
  return (f >> mtu) && mtu >= 576 ? mtu : 1500;
}

namespace {

int open_packet_port(const HostIface& iface, NicPort* out, std::string* error) {
  const std::string where = "af_packet on " + iface.name + ": ";
  // An XDP program a dead af_xdp process left would still take our ports'
  // frames (and veth segments what passes an XDP program).
  if (int rc = XdpSteer::clear_stale(iface.index, iface.name, error); rc < 0) {
    *error = where + *error;
    return rc;
  }
  std::unique_ptr<TcSteer> steer = TcSteer::attach(iface.index, iface.name, error);
  if (!steer) {
    *error = where + *error;
    return -ENODEV;
  }
  std::unique_ptr<PacketLink> link = open_packet_link(iface, iface_mtu(iface.name), steer->socket_filter(), error);
  if (!link) return -ENODEV;
  out->fd = link->fd();
  out->port = std::move(link);
  out->steer = std::move(steer);
  return 0;
}

int open_xdp_port(const HostIface& iface, NicPort* out, std::string* error) {
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
  const std::set<int> before = xdp_sockets();
  NicPort n;
  n.port = open_dpdk_port(o, &why);
  if (!n.port) {
    *error = where + ": " + why;
    return -ENODEV;
  }
  for (int fd : xdp_sockets())
    if (!before.count(fd)) n.fd = fd;
  std::unique_ptr<XdpSteer> steer = XdpSteer::find(iface.index, iface.name, &why);
  if (!steer) {
    *error = where + ": " + why;
    return -ENODEV;
  }
  if (int rc = steer->set_owner(); rc < 0) {
    *error = where + ": XDP owner map: " + std::strerror(-rc);
    return rc;
  }
  n.steer = std::move(steer);
  *out = std::move(n);
  return 0;
}

}  // namespace

int open_nic_port(const HostIface& iface, NicKind kind, NicPort* out, std::string* error) {
  return kind == NicKind::kPacket ? open_packet_port(iface, out, error)
                                  : open_xdp_port(iface, out, error);
}

}  // namespace softrdma::net
