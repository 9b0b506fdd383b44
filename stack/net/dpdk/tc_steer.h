// The packet path's steering (tc_steer.bpf.c) on an interface: a socket
// filter for the packet socket and a tcx ingress program that keeps the
// same TCP ports from the kernel. The tcx link lives as long as this
// object's descriptors: a process that dies takes its program with it.
#pragma once

#include <memory>
#include <string>

#include "stack/net/dpdk/port_steer.h"

namespace softrdma::net {

class TcSteer final : public PortSteer {
 public:
  // Loads the programs and attaches the ingress one to ifindex; null with
  // the reason in *error.
  static std::unique_ptr<TcSteer> attach(int ifindex, const std::string& ifname,
                                         std::string* error);
  ~TcSteer() override;
  // The socket filter (SO_ATTACH_BPF) for the interface's packet socket.
  int socket_filter() const { return pick_fd_; }

 private:
  TcSteer(int map_fd, int pick_fd, int link_fd)
      : PortSteer(map_fd), pick_fd_(pick_fd), link_fd_(link_fd) {}
  int pick_fd_;
  int link_fd_;
};

}  // namespace softrdma::net
