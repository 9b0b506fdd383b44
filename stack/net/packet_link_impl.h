// PacketLink's insides, shared by its set-up (packet_link.cc) and its data
// path (packet_link_datapath.cc).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stack/net/frame_pool.h"
#include "stack/net/packet_link.h"

namespace softrdma::net::packet {

// struct virtio_net_hdr (virtio 1.x, 5.1.6; the legacy layout a packet
// socket uses, in host byte order): <linux/virtio_net.h> is not C++.
struct VnetHdr {
  static constexpr uint8_t kNeedsCsum = 1, kDataValid = 2;  // flags
  static constexpr uint8_t kGsoNone = 0, kGsoTcpV4 = 1;      // gso_type
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;      // Ethernet + IP + TCP headers of a GSO frame
  uint16_t gso_size;     // payload octets per wire segment
  uint16_t csum_start;   // where the checksummed part begins
  uint16_t csum_offset;  // where, from csum_start, the checksum goes
};
static_assert(sizeof(VnetHdr) == 10);

// A frame buffer: the stack's scratch, the header the kernel wrote, the frame.
template <uint32_t kBytes>
struct Buf {
  alignas(64) uint8_t priv[kFramePrivSize];
  VnetHdr vnet;
  uint8_t frame[kBytes];
};
inline constexpr uint32_t kMaxFrame = PacketLink::kMaxIpPacket + 14 + 4;  // what lwIP sends
// What GRO may make of a NIC's segments: an IP packet of up to 64 KiB; an
// lwIP buffer holds a frame of up to 65535 octets.
inline constexpr uint32_t kMaxRxFrame = 65535 + 14 + 4;
inline constexpr uint32_t kMaxLwipFrame = 65535;
inline constexpr uint32_t kSmallFrame = 2048;
using BigBuf = Buf<kMaxRxFrame>;
using SmallBuf = Buf<kSmallFrame>;

// A frame on its way out: in a buffer of ours (tx_begin) or lent.
struct TxItem {
  const uint8_t* frame;
  uint32_t len;
  void* buf;  // ours to give back after the send, or null (lent)
  FrameLink::TxDone done;
  void* ctx;
  uint8_t* head = nullptr;  // sent instead of the frame's first head_len octets
  uint32_t head_len = 0;
};

class Link final : public PacketLink {
 public:
  static constexpr int kBurst = 32;
  static constexpr size_t kMaxPending = 2048;  // frames queued for the next flush
  Link(int fd, const HostIface& iface, uint32_t wire_mtu, const uint8_t* mac);
  ~Link() override;

  int rx_burst(RxFrame* out, int max) override;
  void rx_release(void* handle) override;
  uint8_t* tx_begin(uint32_t len, void** handle) override;
  void tx_commit(void* handle, uint32_t len) override;
  void tx_flush() override;
  int tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) override;
  int tx_lend_headed(const uint8_t* head, uint32_t head_len, const uint8_t* frame, uint32_t len,
                     TxDone done, void* ctx) override;
  void tx_discard() override;

  const uint8_t* mac() const override { return mac_; }
  uint32_t mtu() const override { return kMaxIpPacket; }
  bool link_up() const override;
  bool trusted_checksums() const override { return false; }
  const std::string& name() const override { return name_; }
  LinkCounters counters() const override { return c_; }
  int fd() const override { return fd_; }

 private:
  // packet_link_datapath.cc
  bool rx_accept(BigBuf* b, uint32_t len);
  bool tx_prepare(TxItem& t, VnetHdr* h);  // false: no wire takes it
  void tx_finish(TxItem& t);

  int fd_;
  std::string name_;
  std::string ifname_;
  uint32_t wire_mtu_;
  uint8_t mac_[6];
  FramePool big_, small_;        // BigBuf, SmallBuf: received frames
  FramePool tx_big_, tx_small_;  // tx_begin's
  std::vector<TxItem> pending_;
  LinkCounters c_;
};

}  // namespace softrdma::net::packet
