// A rank's side of softrdma-switch: the process that owns a host
// interface's NIC for every unprivileged process on the host
// (switch_main.cc). A rank attaches over the switch's control socket, gets
// a frame link to lwIP through shared memory, and asks the switch to hold
// its TCP ports.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>

#include "stack/net/frame_link.h"
#include "stack/net/switch/switch_proto.h"

namespace softrdma::net {

class SwitchSession {
 public:
  // How long a control call waits for the switch's answer.
  static constexpr int kAnswerMs = 5000;
  // Attaches to iface's switch, waiting up to answer_ms for its welcome:
  // null with the reason in *error.
  static std::unique_ptr<SwitchSession> attach(const std::string& iface, std::string* error,
                                               int answer_ms = kAnswerMs);
  ~SwitchSession();
  SwitchSession(const SwitchSession&) = delete;
  SwitchSession& operator=(const SwitchSession&) = delete;

  // The frame link to the NIC through the switch (once). It stays valid
  // after the session ends; it goes down when the switch goes.
  std::unique_ptr<FrameLink> take_link();
  // Whether the switch's NIC side computes and checks TCP checksums (and
  // cuts segments up to the link's MTU to the wire's): sw::kOffloadTcp.
  bool tcp_offloaded() const;
  // Asks the switch to hold port (0: one the kernel picks) of the
  // interface's address for this process: 0 with *got, or -errno with the
  // switch's reason in *error.
  int hold(uint16_t port, uint16_t* got, std::string* error);
  void let_go(uint16_t port);
  // False once the switch has gone (its control socket hung up).
  bool alive();

  struct Shared;  // the rings and kick fds, shared with the link

 private:
  SwitchSession() = default;
  int call(const sw::Msg& out, sw::Msg* in);
  int fd_ = -1;
  std::shared_ptr<Shared> shared_;
  bool dead_ = false;
};

}  // namespace softrdma::net
