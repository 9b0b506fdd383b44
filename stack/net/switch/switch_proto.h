// softrdma-switch's control protocol: what a rank and the switch say over
// the switch's control socket (SOCK_SEQPACKET, one message a datagram).
//
// A rank says Hello; the switch answers Welcome with three descriptors
// (SCM_RIGHTS): the shared memory holding the two frame rings (frame_ring.h;
// sealed against shrinking) and two eventfds, the rank's kick to the switch
// and the switch's kick to the rank. Then the rank asks Hold (a TCP port of
// the interface's address: held in the kernel, steered by BPF, forwarded to
// this rank) and LetGo; each is answered by Reply. The switch drops every
// port of a rank whose control socket closes.
#pragma once

#include <cstdint>
#include <string>

namespace softrdma::net::sw {

inline constexpr uint32_t kMagic = 0x53525357;  // "WSRS" little-endian
inline constexpr uint32_t kVersion = 2;
inline constexpr const char* kDir = "/run/softrdma-switch";
inline constexpr uint32_t kMaxPortsPerRank = 4096;

inline std::string ctl_path(const std::string& iface) { return std::string(kDir) + "/" + iface + ".ctl"; }

enum class Op : uint32_t { kHello = 1, kWelcome = 2, kHold = 3, kLetGo = 4, kReply = 5 };

// Welcome's offloads: the switch's NIC side computes and checks TCP
// checksums and cuts segments up to mtu to the wire's MTU (a packet
// socket, packet_link.h); the rank leaves TCP checksums to it.
inline constexpr uint32_t kOffloadTcp = 1;

struct Msg {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  Op op = Op::kHello;
  int32_t rc = 0;     // Welcome, Reply: 0 or -errno
  uint16_t port = 0;  // Hold (0: any), LetGo, Reply: host byte order
  uint8_t mac[6] = {};  // Welcome: the interface's
  uint32_t addr = 0;    // Welcome: the interface's IPv4 address, network order
  uint32_t prefix = 0;  // Welcome
  uint32_t mtu = 0;     // Welcome: IP MTU
  uint32_t slots = 0;   // Welcome: frames per ring
  uint32_t slot_size = 0;  // Welcome: octets per frame slot
  uint32_t offloads = 0;   // Welcome: kOffloadTcp or 0
};
static_assert(sizeof(Msg) == 48, "the layout fi-tests/hosts_switch_faults.sh writes by hand");

}  // namespace softrdma::net::sw
