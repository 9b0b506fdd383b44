// Finds softrdma_ports of the XDP program on an interface and edits it.
#include "stack/net/dpdk/xdp_steer.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <linux/if_link.h>
#include <signal.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <xdp/libxdp.h>

#include <cerrno>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace softrdma::net {

namespace {

constexpr const char* kPortsMap = "softrdma_ports";
constexpr const char* kOwnerMap = "softrdma_owner";
constexpr const char* kProgram = "softrdma_steer";

// The map called name among prog_fd's maps: an fd, or -1.
int map_of(int prog_fd, const char* name) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0 || info.nr_map_ids == 0) return -1;
  std::vector<uint32_t> ids(info.nr_map_ids);
  const uint32_t n = info.nr_map_ids;
  info = {};
  info.nr_map_ids = n;
  info.map_ids = reinterpret_cast<uint64_t>(ids.data());
  len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return -1;
  for (uint32_t i = 0; i < std::min(n, info.nr_map_ids); ++i) {
    int fd = bpf_map_get_fd_by_id(ids[i]);
    if (fd < 0) continue;
    bpf_map_info mi{};
    uint32_t mlen = sizeof(mi);
    if (bpf_obj_get_info_by_fd(fd, &mi, &mlen) == 0 && std::strcmp(mi.name, name) == 0)
      return fd;
    ::close(fd);
  }
  return -1;
}

// softrdma's program on ifindex: its fd (dup'ed, the caller closes it), or
// -1 when the interface has no program or another one.
int our_program(int ifindex) {
  xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex);
  if (mp == nullptr || libxdp_get_error(mp) != 0) return -1;
  // libxdp may have put ours behind its dispatcher, or attached it alone.
  int fd = -1;
  if (xdp_multiprog__is_legacy(mp)) {
    xdp_program* p = xdp_multiprog__main_prog(mp);
    if (p && std::strcmp(xdp_program__name(p), kProgram) == 0) fd = ::dup(xdp_program__fd(p));
  } else {
    for (xdp_program* p = xdp_multiprog__next_prog(nullptr, mp); p && fd < 0;
         p = xdp_multiprog__next_prog(p, mp)) {
      if (std::strcmp(xdp_program__name(p), kProgram) == 0) fd = ::dup(xdp_program__fd(p));
    }
  }
  xdp_multiprog__close(mp);
  return fd;
}

bool alive(uint32_t pid) { return pid != 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

const char* xdp_steer_program() {
  return bpf_object_path(SOFTRDMA_XDP_PROG, SOFTRDMA_XDP_PROG_INSTALLED);
}

int XdpSteer::clear_stale(int ifindex, const std::string& ifname, std::string* error) {
  const int prog = our_program(ifindex);
  if (prog < 0) return 0;
  const int owner = map_of(prog, kOwnerMap);
  ::close(prog);
  uint32_t key = 0, pid = 0;
  if (owner >= 0) {
    bpf_map_lookup_elem(owner, &key, &pid);
    ::close(owner);
  }
  if (alive(pid)) {
    *error = "softrdma's XDP program on " + ifname + " is in use by process " +
             std::to_string(pid) + " (one process per interface for now)";
    return -EBUSY;
  }
  // Native mode first (what DPDK asks for on veth and NICs), then generic.
  if (bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, nullptr) == 0 ||
      bpf_xdp_detach(ifindex, XDP_FLAGS_SKB_MODE, nullptr) == 0)
    return 0;
  *error = "removing a dead process's XDP program from " + ifname + ": " + std::strerror(errno);
  return -errno;
}

std::unique_ptr<XdpSteer> XdpSteer::find(int ifindex, const std::string& ifname,
                                         std::string* error) {
  const int prog = our_program(ifindex);
  if (prog < 0) {
    *error = "no softrdma XDP program (" + std::string(kProgram) + ") on " + ifname;
    return nullptr;
  }
  const int ports = map_of(prog, kPortsMap), owner = map_of(prog, kOwnerMap);
  ::close(prog);
  if (ports < 0 || owner < 0) {
    if (ports >= 0) ::close(ports);
    if (owner >= 0) ::close(owner);
    *error = "the XDP program on " + ifname + " lacks the " + kPortsMap + " or " + kOwnerMap + " map";
    return nullptr;
  }
  return std::unique_ptr<XdpSteer>(new XdpSteer(ports, owner));
}

int XdpSteer::set_owner() {
  const uint32_t key = 0, pid = static_cast<uint32_t>(::getpid());
  return bpf_map_update_elem(owner_fd_, &key, &pid, BPF_ANY) == 0 ? 0 : -errno;
}

XdpSteer::~XdpSteer() { ::close(owner_fd_); }

}  // namespace softrdma::net
