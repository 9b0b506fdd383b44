// Loads tc_steer.bpf.o and attaches its ingress program with a tcx link.
#include "stack/net/dpdk/tc_steer.h"

#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

namespace softrdma::net {

namespace {
// tcx (Linux 6.6) postdates Debian 12's headers.
constexpr int kTcxIngress = 46;  // BPF_TCX_INGRESS
}  // namespace

std::unique_ptr<TcSteer> TcSteer::attach(int ifindex, const std::string& ifname,
                                         std::string* error) {
  const char* path = bpf_object_path(SOFTRDMA_TC_PROG, SOFTRDMA_TC_PROG_INSTALLED);
  bpf_object* obj = bpf_object__open_file(path, nullptr);
  if (obj == nullptr || libbpf_get_error(obj) != 0) {
    *error = std::string("opening ") + path + ": " + std::strerror(errno);
    return nullptr;
  }
  if (int rc = bpf_object__load(obj); rc != 0) {
    *error = std::string("loading ") + path + ": " + std::strerror(-rc);
    bpf_object__close(obj);
    return nullptr;
  }
  // The descriptors outlive the object: ours are dup'ed, its own closed.
  auto fd_of = [&](bpf_program* p) { return p ? ::dup(bpf_program__fd(p)) : -1; };
  const int keep = fd_of(bpf_object__find_program_by_name(obj, "softrdma_keep"));
  const int pick = fd_of(bpf_object__find_program_by_name(obj, "softrdma_pick"));
  const int map_at = bpf_object__find_map_fd_by_name(obj, "softrdma_ports");
  const int map = map_at >= 0 ? ::dup(map_at) : -1;
  bpf_object__close(obj);
  int link = -1;
  if (keep >= 0 && pick >= 0 && map >= 0) {
    link = bpf_link_create(keep, ifindex, static_cast<bpf_attach_type>(kTcxIngress), nullptr);
    if (link < 0)
      *error = "attaching " + std::string(path) + " to " + ifname + "'s tcx ingress: " +
               std::strerror(errno) + " (Linux 6.6 or later)";
  } else {
    *error = std::string(path) + " lacks softrdma_keep, softrdma_pick or softrdma_ports";
  }
  if (keep >= 0) ::close(keep);  // the link holds the program
  if (link < 0) {
    if (pick >= 0) ::close(pick);
    if (map >= 0) ::close(map);
    return nullptr;
  }
  return std::unique_ptr<TcSteer>(new TcSteer(map, pick, link));
}

TcSteer::~TcSteer() {
  ::close(link_fd_);
  ::close(pick_fd_);
}

}  // namespace softrdma::net
