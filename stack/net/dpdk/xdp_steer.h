// The ports map of softrdma's XDP program (xdp_steer.bpf.c) on an
// interface: TCP segments to a port in it go to softrdma's AF_XDP socket,
// everything else to the kernel. No DPDK, no libbpf in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stack/net/dpdk/port_steer.h"

namespace softrdma::net {

// Where the build put the compiled program (DPDK's af_xdp xdp_prog= devarg).
const char* xdp_steer_program();

class XdpSteer final : public PortSteer {
 public:
  // The map of the program DPDK attached to ifindex; null with the reason in
  // *error (e.g. "no XDP program on veth0").
  static std::unique_ptr<XdpSteer> find(int ifindex, const std::string& ifname,
                                        std::string* error);
  // Detaches softrdma's program from ifindex if a process that is gone left
  // it there (a crash, or an exit that closed no port); a live owner's
  // stays. 0, or -errno with the reason in *error.
  static int clear_stale(int ifindex, const std::string& ifname, std::string* error);
  ~XdpSteer() override;

  // Records this process as the interface's owner (see clear_stale).
  int set_owner();

 private:
  XdpSteer(int map_fd, int owner_fd) : PortSteer(map_fd), owner_fd_(owner_fd) {}
  int owner_fd_;
};

}  // namespace softrdma::net
