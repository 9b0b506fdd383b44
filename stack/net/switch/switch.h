// softrdma-switch: one root process per host interface owns its NIC (a
// packet socket with the kernel's offloads, or an af_xdp port: nic_port.h)
// for every softrdma process on the host, so that ranks run as ordinary
// users, many per host.
// A rank attaches over the control socket (switch_proto.h) and exchanges
// frames with the switch through two rings in shared memory (frame_ring.h);
// the switch holds each rank's TCP ports in the kernel and in the BPF
// program's map.
//
// Forwarding (switch_datapath.cc): from the NIC to the rank holding the TCP
// destination port; from a rank to the NIC only TCP frames from the
// interface's MAC and address and from a port that rank holds. Set-up and
// control (switch_ctl.cc) apart; the loop and its sleep in switch_main.cc.
#pragma once

#include <sys/types.h>

#include <array>
#include <deque>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stack/net/host_addr.h"
#include "stack/net/nic_port.h"
#include "stack/net/port_reserve.h"
#include "stack/net/switch/frame_ring.h"
#include "stack/net/switch/switch_proto.h"

namespace softrdma::net::sw {

// The octets of a rank's frame copied out before they are checked (and
// sent from the copy): Ethernet, IPv4 and TCP headers up to the port fields.
inline constexpr uint32_t kCheckedHead = 128;

struct Rank {
  int ctl = -1;  // its control connection
  pid_t pid = 0;
  uid_t uid = 0;
  void* base = nullptr;  // the shared rings
  size_t bytes = 0;
  int kick_switch = -1, kick_rank = -1;
  std::unique_ptr<FrameRing> to_rank, to_switch;
  std::map<uint16_t, PortReservation> ports;
  std::deque<RxFrame> waiting;  // NIC frames for a full ring, oldest first
  bool kicked = false;  // frames pushed this pass
  // Headers of to_switch's frames as checked, a copy per slot: the NIC
  // sends these while the rest goes out of the ring (lent).
  std::vector<uint8_t> heads;
  size_t lent = 0;  // to_switch slots lent to the NIC
  ~Rank();
};

struct SwitchCounters {
  uint64_t nic_rx = 0, nic_tx = 0, to_rank = 0, from_rank = 0;
  uint64_t drop_no_rank = 0, drop_rank_full = 0, drop_refused = 0, nic_busy = 0;
  uint64_t rank_waits = 0;  // frames that waited for room in a rank's ring
  uint64_t rank_kicks = 0;  // wake-ups sent to sleeping ranks
  uint64_t ranks_attached = 0, ranks_dropped = 0;
};

class Switch {
 public:
  // Opens iface's NIC and the control socket: 0, or -errno with the reason.
  int open(const std::string& iface, std::string* error);
  // Forwards until *stop turns true (a signal).
  void run(const volatile bool* stop);
  ~Switch();
  const SwitchCounters& counters() const { return c_; }

 private:
  // switch_ctl.cc
  void accept_ranks();
  void serve(Rank* r);  // one control message
  int hold(Rank* r, uint16_t port, uint16_t* got);
  void let_go(Rank* r, uint16_t port);
  void drop(Rank* r);
  void sweep_dropped();
  void handle_events(int timeout_ms);  // control requests and kicks
  // switch_datapath.cc: frames moved this pass
  int nic_to_ranks();
  bool to_rank(Rank* r, const RxFrame& f);  // false: its ring is full
  void flush_waiting();
  int ranks_to_nic();
  bool frame_allowed(const Rank& r, const uint8_t* f, uint32_t len) const;
  static void lent_done(void* frame, void* ctx);  // a to_switch slot back
  // switch_main.cc
  void sleep_until_work();

  HostIface iface_;
  NicPort nic_;
  uint8_t mac_[6]{};
  uint32_t mtu_ = 1500, slots_ = 1024, slot_size_ = 0, offloads_ = 0;
  int ctl_ = -1, ep_ = -1;
  uint16_t unprivileged_start_ = 1024;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::array<Rank*, 65536> by_port_{};
  std::vector<Rank*> dropped_;
  size_t waiting_ = 0;  // NIC frames held in ranks' waiting queues
  SwitchCounters c_;
};

}  // namespace softrdma::net::sw
