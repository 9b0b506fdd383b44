// The ports map of one of softrdma's BPF programs on an interface: TCP
// segments to a port in it are softrdma's (xdp_steer.h: redirected to the
// AF_XDP socket; tc_steer.h: picked by the packet socket and kept from the
// kernel), everything else stays the kernel's. No libbpf in this header.
#pragma once

#include <cstdint>

namespace softrdma::net {

class PortSteer {
 public:
  explicit PortSteer(int map_fd) : map_fd_(map_fd) {}
  virtual ~PortSteer();
  PortSteer(const PortSteer&) = delete;
  PortSteer& operator=(const PortSteer&) = delete;

  // port in host byte order; 0 or -errno.
  int add(uint16_t port);
  int remove(uint16_t port);

 private:
  int map_fd_;
};

// A compiled BPF object of the build: the build tree's copy while we run
// from the build tree (tests, the demo before install) or when nothing is
// installed, the installed one otherwise.
const char* bpf_object_path(const char* built, const char* installed);

}  // namespace softrdma::net
