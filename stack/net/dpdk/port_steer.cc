// A steering program's ports map, and where the build's BPF objects are.
#include "stack/net/dpdk/port_steer.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>

namespace softrdma::net {

const char* bpf_object_path(const char* built, const char* installed) {
  // Paths compared resolved: the provider may be loaded by a relative
  // FI_PROVIDER_PATH.
  Dl_info info{};
  bool from_build = false;
  if (::dladdr(reinterpret_cast<void*>(&bpf_object_path), &info) != 0 && info.dli_fname) {
    char* lib = ::realpath(info.dli_fname, nullptr);
    char* tree = ::realpath(SOFTRDMA_BUILD_TREE, nullptr);
    from_build = lib && tree && std::string_view(lib).starts_with(std::string(tree) + "/");
    std::free(lib);
    std::free(tree);
  }
  return from_build || ::access(installed, R_OK) != 0 ? built : installed;
}

PortSteer::~PortSteer() { ::close(map_fd_); }

int PortSteer::add(uint16_t port) {
  const uint16_t key = htons(port);
  const uint8_t on = 1;
  return bpf_map_update_elem(map_fd_, &key, &on, BPF_ANY) == 0 ? 0 : -errno;
}

int PortSteer::remove(uint16_t port) {
  const uint16_t key = htons(port);
  return bpf_map_delete_elem(map_fd_, &key) == 0 || errno == ENOENT ? 0 : -errno;
}

}  // namespace softrdma::net
