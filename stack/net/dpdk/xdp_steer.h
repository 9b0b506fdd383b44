// The ports map of softrdma's XDP program (xdp_steer.bpf.c) on an
// interface: TCP segments to a port in it go to softrdma's AF_XDP socket,
// everything else to the kernel. No DPDK, no libbpf in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace softrdma::net {

// Where the build put the compiled program (DPDK's af_xdp xdp_prog= devarg).
const char* xdp_steer_program();

class XdpSteer {
 public:
  // The map of the program DPDK attached to ifindex; null with the reason in
  // *error (e.g. "no XDP program on veth0").
  static std::unique_ptr<XdpSteer> find(int ifindex, const std::string& ifname,
                                        std::string* error);
  // Detaches softrdma's program from ifindex if a process that is gone left
  // it there (a crash, or an exit that closed no port); a live owner's
  // stays. 0, or -errno with the reason in *error.
  static int clear_stale(int ifindex, const std::string& ifname, std::string* error);
  ~XdpSteer();

  // Records this process as the interface's owner (see clear_stale).
  int set_owner();
  XdpSteer(const XdpSteer&) = delete;
  XdpSteer& operator=(const XdpSteer&) = delete;

  // port in host byte order; 0 or -errno.
  int add(uint16_t port);
  int remove(uint16_t port);

 private:
  XdpSteer(int map_fd, int owner_fd) : map_fd_(map_fd), owner_fd_(owner_fd) {}
  int map_fd_;
  int owner_fd_;
};

}  // namespace softrdma::net
