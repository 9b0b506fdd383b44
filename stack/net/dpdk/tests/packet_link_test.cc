// The packet socket's link (packet_link.h) with its steering (tc_steer.h)
// on a veth pair in a network namespace of the test's own (unshare): what
// the link sends, the kernel cuts and checksums correctly; what it
// receives is checked where the kernel did not; its ports' segments never
// reach the kernel's TCP. Needs root.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "stack/net/dpdk/tc_steer.h"
#include "stack/net/packet_link.h"

namespace softrdma::net {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint16_t kPort = 7001, kOtherPort = 7002, kPeerPort = 40000;
constexpr uint32_t kMtu = 1500;

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
void put16(uint8_t* p, uint16_t v) { p[0] = v >> 8, p[1] = v & 0xff; }
void put32(uint8_t* p, uint32_t v) { put16(p, v >> 16), put16(p + 2, v & 0xffff); }

uint32_t sum16(const uint8_t* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += be16(p + i);
  if (n & 1) acc += p[n - 1] << 8;
  return acc;
}
uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}
// A TCP segment's checksum over the pseudo-header: 0xffff when it is right.
uint16_t tcp_sum(const uint8_t* f, uint32_t tcp_len) {
  uint32_t acc = sum16(f + 26, 8) + 6 + tcp_len;
  return fold(sum16(f + 34, tcp_len, acc));
}
uint8_t pattern(uint32_t i) { return static_cast<uint8_t>(i * 7 + 3); }

// An Ethernet/IPv4/TCP frame with payload octets pattern(seq + i).
std::vector<uint8_t> tcp_frame(const uint8_t* dst, const uint8_t* src, in_addr from, in_addr to,
                               uint16_t sport, uint16_t dport, uint32_t seq, uint32_t payload,
                               bool checksum) {
  std::vector<uint8_t> f(54 + payload);
  std::memcpy(f.data(), dst, 6);
  std::memcpy(f.data() + 6, src, 6);
  put16(&f[12], 0x0800);
  uint8_t* ip = &f[14];
  ip[0] = 0x45, ip[8] = 64, ip[9] = 6;
  put16(ip + 2, static_cast<uint16_t>(40 + payload));
  std::memcpy(ip + 12, &from, 4);
  std::memcpy(ip + 16, &to, 4);
  put16(ip + 10, static_cast<uint16_t>(~fold(sum16(ip, 20))));
  uint8_t* tcp = &f[34];
  put16(tcp, sport);
  put16(tcp + 2, dport);
  put32(tcp + 4, seq);
  tcp[12] = 5 << 4, tcp[13] = 0x10;  // ACK
  put16(tcp + 14, 65535);
  for (uint32_t i = 0; i < payload; ++i) f[54 + i] = pattern(seq + i);
  if (checksum) put16(tcp + 16, static_cast<uint16_t>(~tcp_sum(f.data(), 20 + payload)));
  return f;
}

uint64_t kernel_tcp_in_segs() {
  std::ifstream f("/proc/net/snmp");
  std::string line, head;
  while (std::getline(f, line)) {
    if (line.rfind("Tcp:", 0) != 0) continue;
    if (head.empty()) {
      head = line;
      continue;
    }
    std::istringstream h(head), v(line);
    std::string name, value;
    while (h >> name && v >> value)
      if (name == "InSegs") return std::stoull(value);
  }
  return 0;
}

class PacketLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_FAIL() << "needs root (netns, veth, BPF, packet sockets)";
    ASSERT_EQ(unshare(CLONE_NEWNET), 0) << std::strerror(errno);  // a namespace per test
    ASSERT_TRUE(sh("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"));
    ASSERT_TRUE(sh("ip link add va type veth peer name vb"));
    ASSERT_TRUE(sh("ip addr add 10.9.0.1/24 dev va && ip link set va up && ip link set vb up"));
    iface_.name = "va";
    iface_.index = static_cast<int>(if_nametoindex("va"));
    inet_pton(AF_INET, "10.9.0.1", &iface_.addr);
    inet_pton(AF_INET, "10.9.0.2", &peer_);
    iface_.prefix = 24;
    std::string err;
    steer_ = TcSteer::attach(iface_.index, iface_.name, &err);
    ASSERT_TRUE(steer_) << err;
    ASSERT_EQ(steer_->add(kPort), 0);
    link_ = open_packet_link(iface_, kMtu, steer_->socket_filter(), &err);
    ASSERT_TRUE(link_) << err;
    raw_ = open_raw("vb", false);
    vnet_ = open_raw("vb", true);
    ASSERT_GE(raw_, 0);
    ASSERT_GE(vnet_, 0);
    ifreq r{};  // not /sys: it shows the namespace it was mounted in
    std::strncpy(r.ifr_name, "vb", IFNAMSIZ - 1);
    ASSERT_EQ(::ioctl(raw_, SIOCGIFHWADDR, &r), 0);
    std::memcpy(peer_mac_, r.ifr_hwaddr.sa_data, 6);
    while (::recv(raw_, scratch_, sizeof(scratch_), MSG_DONTWAIT) > 0) {}  // the kernel's chatter
  }

  void TearDown() override {
    link_.reset();
    steer_.reset();
    if (raw_ >= 0) ::close(raw_);
    if (vnet_ >= 0) ::close(vnet_);
  }

  static int open_raw(const char* ifname, bool vnet) {
    int fd = ::socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    const int one = 1;
    if (fd < 0 || (vnet && ::setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0))
      return -1;
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = static_cast<int>(if_nametoindex(ifname));
    timeval tv{0, 200000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 ? fd : -1;
  }

  // The next TCP frame vb receives from our port (with its virtio-net
  // header first on the vnet socket), or empty after a second.
  std::vector<uint8_t> next_from_link(int fd, size_t skip = 0) {
    const auto end = Clock::now() + std::chrono::seconds(1);
    while (Clock::now() < end) {
      const ssize_t n = ::recv(fd, scratch_, sizeof(scratch_), 0);
      if (n < static_cast<ssize_t>(skip + 54)) continue;
      const uint8_t* f = scratch_ + skip;
      if (be16(f + 12) == 0x0800 && f[23] == 6 && be16(f + 34) == kPort)
        return std::vector<uint8_t>(scratch_, scratch_ + n);
    }
    return {};
  }

  // Frames the link delivers within a second (released at once).
  std::vector<std::vector<uint8_t>> received() {
    std::vector<std::vector<uint8_t>> out;
    const auto end = Clock::now() + std::chrono::seconds(1);
    while (Clock::now() < end) {
      RxFrame f[8];
      const int n = link_->rx_burst(f, 8);
      for (int i = 0; i < n; ++i) {
        out.emplace_back(f[i].data, f[i].data + f[i].len);
        link_->rx_release(f[i].handle);
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return out;
  }

  void send_from_peer(uint16_t dport, uint32_t seq, uint32_t payload, bool checksum) {
    auto f = tcp_frame(link_->mac(), peer_mac_, peer_, iface_.addr, kPeerPort, dport, seq, payload,
                       checksum);
    ASSERT_EQ(::send(raw_, f.data(), f.size(), 0), static_cast<ssize_t>(f.size()));
  }

  void send_from_link(uint32_t seq, uint32_t payload) {
    auto f = tcp_frame(peer_mac_, link_->mac(), iface_.addr, peer_, kPort, kPeerPort, seq, payload,
                       false);  // the kernel's to fill in
    void* h;
    uint8_t* p = link_->tx_begin(static_cast<uint32_t>(f.size()), &h);
    ASSERT_NE(p, nullptr);
    std::memcpy(p, f.data(), f.size());
    link_->tx_commit(h, static_cast<uint32_t>(f.size()));
    link_->tx_flush();
    EXPECT_EQ(link_->counters().tx_dropped, 0u);
  }

  HostIface iface_;
  in_addr peer_{};
  uint8_t peer_mac_[6]{};
  std::unique_ptr<TcSteer> steer_;
  std::unique_ptr<PacketLink> link_;
  int raw_ = -1, vnet_ = -1;
  uint8_t scratch_[70000];
};

TEST_F(PacketLinkTest, TakesItsPortsFromTheKernelAndChecksWhatTheKernelDidNot) {
  const uint64_t in0 = kernel_tcp_in_segs();
  send_from_peer(kPort, 1000, 700, true);
  send_from_peer(kPort, 2000, 700, false);  // a bad checksum: dropped
  auto got = received();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), 54u + 700);
  for (uint32_t i = 0; i < 700; ++i) ASSERT_EQ(got[0][54 + i], pattern(1000 + i)) << i;
  EXPECT_EQ(link_->counters().rx_dropped, 1u);
  EXPECT_EQ(kernel_tcp_in_segs(), in0);  // neither reached the kernel's TCP

  send_from_peer(kOtherPort, 3000, 100, true);  // not ours: the kernel's
  EXPECT_TRUE(received().empty());
  EXPECT_EQ(kernel_tcp_in_segs(), in0 + 1);
  ASSERT_EQ(steer_->add(kOtherPort), 0);
  send_from_peer(kOtherPort, 4000, 100, true);
  EXPECT_EQ(received().size(), 1u);
  ASSERT_EQ(steer_->remove(kOtherPort), 0);
  send_from_peer(kOtherPort, 5000, 100, true);
  EXPECT_TRUE(received().empty());
  EXPECT_EQ(kernel_tcp_in_segs(), in0 + 2);
}

TEST_F(PacketLinkTest, TakesSegmentsAsLargeAsGroMakesThem) {
  // GRO merges a NIC's segments into IP packets of up to 64 KiB, larger
  // than lwIP's own (65000): they arrive whole, every octet in place.
  constexpr uint32_t kPayload = 65400;
  auto f = tcp_frame(link_->mac(), peer_mac_, peer_, iface_.addr, kPeerPort, kPort, 5000, kPayload,
                     false);
  uint8_t vnet[10] = {1, 1};  // NEEDS_CSUM, GSO TCPv4
  const uint16_t hdr_len = 54, gso_size = 1460, csum_start = 34, csum_offset = 16;
  std::memcpy(vnet + 2, &hdr_len, 2);
  std::memcpy(vnet + 4, &gso_size, 2);
  std::memcpy(vnet + 6, &csum_start, 2);
  std::memcpy(vnet + 8, &csum_offset, 2);
  iovec iov[2] = {{vnet, sizeof(vnet)}, {f.data(), f.size()}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  ASSERT_EQ(::sendmsg(vnet_, &m, 0), static_cast<ssize_t>(sizeof(vnet) + f.size()));
  auto got = received();
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), 54u + kPayload);
  for (uint32_t i = 0; i < kPayload; ++i) ASSERT_EQ(got[0][54 + i], pattern(5000 + i)) << i;
  EXPECT_EQ(link_->counters().rx_dropped, 0u);
}

TEST_F(PacketLinkTest, HandsTheKernelWholeSegmentsMarkedForSegmentation) {
  constexpr uint32_t kPayload = 40000;
  send_from_link(7, kPayload);
  auto f = next_from_link(vnet_, 10);
  ASSERT_EQ(f.size(), 10u + 54 + kPayload) << "a veth passes the segment whole";
  uint8_t flags = f[0], gso_type = f[1];
  uint16_t hdr_len, gso_size, csum_start, csum_offset;
  std::memcpy(&hdr_len, &f[2], 2);
  std::memcpy(&gso_size, &f[4], 2);
  std::memcpy(&csum_start, &f[6], 2);
  std::memcpy(&csum_offset, &f[8], 2);
  EXPECT_EQ(flags & 1, 1);     // VIRTIO_NET_HDR_F_NEEDS_CSUM
  EXPECT_EQ(gso_type, 1);      // VIRTIO_NET_HDR_GSO_TCPV4
  EXPECT_EQ(gso_size, kMtu - 40);
  EXPECT_EQ(csum_start, 34);
  EXPECT_EQ(csum_offset, 16);
  EXPECT_EQ(hdr_len, 54);
  for (uint32_t i = 0; i < kPayload; ++i) ASSERT_EQ(f[10 + 54 + i], pattern(7 + i)) << i;
}

TEST_F(PacketLinkTest, TheKernelCutsAndChecksumsWhereTheWireNeedsIt) {
  // Without offloads on va the kernel segments and checksums in software,
  // as on a NIC without TSO: each wire segment must be whole and right.
  ASSERT_TRUE(sh("ethtool -K va tso off tx off"));
  constexpr uint32_t kPayload = 30000;
  send_from_link(100, kPayload);
  uint32_t next = 100, segments = 0;
  while (next < 100 + kPayload) {
    auto f = next_from_link(raw_);
    ASSERT_FALSE(f.empty()) << "segment at " << next << " missing";
    ASSERT_LE(f.size(), 14u + kMtu);
    const uint32_t tcp_len = be16(&f[16]) - 20;
    EXPECT_EQ(fold(sum16(&f[14], 20)), 0xffff) << "IP checksum";
    EXPECT_EQ(tcp_sum(f.data(), tcp_len), 0xffff) << "TCP checksum of the segment at " << next;
    const uint32_t seq = static_cast<uint32_t>(be16(&f[38])) << 16 | be16(&f[40]);
    ASSERT_EQ(seq, next);
    for (uint32_t i = 0; i < tcp_len - 20; ++i) ASSERT_EQ(f[54 + i], pattern(seq + i));
    next += tcp_len - 20;
    ++segments;
  }
  EXPECT_EQ(segments, (kPayload + kMtu - 41) / (kMtu - 40));
}

}  // namespace
}  // namespace softrdma::net
