// PacketLink's set-up: the socket, its options, its buffers.
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "stack/net/packet_link_impl.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

namespace softrdma::net {

namespace packet {

namespace {
// Received frames lwIP may hold at once: 64 KiB segments (a 2 MiB window
// is 32 of them), and small ones copied out of them (ACKs, short FPDUs).
constexpr uint32_t kBigBufs = 512, kSmallBufs = 4096;
// tx_begin's buffers: TCP segments are lent, these carry the rest.
constexpr uint32_t kTxBigBufs = 64, kTxSmallBufs = 512;
constexpr int kSocketBuffer = 16 << 20;
}  // namespace

Link::Link(int fd, const HostIface& iface, uint32_t wire_mtu, const uint8_t* mac)
    : fd_(fd),
      name_("af_packet:" + iface.name),
      ifname_(iface.name),
      wire_mtu_(wire_mtu),
      big_(sizeof(BigBuf), kBigBufs),
      small_(sizeof(SmallBuf), kSmallBufs),
      tx_big_(sizeof(BigBuf), kTxBigBufs),
      tx_small_(sizeof(SmallBuf), kTxSmallBufs) {
  std::memcpy(mac_, mac, 6);
  pending_.reserve(kMaxPending + kTxBigBufs + kTxSmallBufs);
}

Link::~Link() {
  tx_discard();
  ::close(fd_);
}

bool Link::link_up() const {
  ifreq r{};
  std::strncpy(r.ifr_name, ifname_.c_str(), IFNAMSIZ - 1);
  return ::ioctl(fd_, SIOCGIFFLAGS, &r) == 0 && (r.ifr_flags & IFF_RUNNING);
}

}  // namespace packet

std::unique_ptr<PacketLink> open_packet_link(const HostIface& iface, uint32_t wire_mtu,
                                             int filter_fd, std::string* error) {
  const std::string where = "af_packet on " + iface.name + ": ";
  // Protocol 0: nothing arrives before the filter is on and bind names one.
  int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = where + "socket: " + std::strerror(errno);
    return nullptr;
  }
  auto fail = [&](const char* what) {
    *error = where + what + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  };
  const int one = 1;
  if (::setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0)
    return fail("PACKET_VNET_HDR");
  // Our own frames would come back to us as outgoing copies.
  if (::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0)
    return fail("PACKET_IGNORE_OUTGOING");
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_BPF, &filter_fd, sizeof(filter_fd)) != 0)
    return fail("attaching the socket filter");
  // A window's worth of 64 KiB segments between two of our polls.
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &packet::kSocketBuffer, sizeof(int));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &packet::kSocketBuffer, sizeof(int));
  sockaddr_ll a{};
  a.sll_family = AF_PACKET;
  // ETH_P_ALL: a tap, which sees frames before tcx ingress drops them from
  // the kernel; a socket bound to ETH_P_IP would come after it.
  a.sll_protocol = htons(ETH_P_ALL);
  a.sll_ifindex = iface.index;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return fail("bind");
  ifreq r{};
  std::strncpy(r.ifr_name, iface.name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFHWADDR, &r) != 0) return fail("SIOCGIFHWADDR");
  uint8_t mac[6];
  std::memcpy(mac, r.ifr_hwaddr.sa_data, 6);
  return std::make_unique<packet::Link>(fd, iface, wire_mtu, mac);
}

}  // namespace softrdma::net
