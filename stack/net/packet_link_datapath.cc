// PacketLink's data path. Receive: recvmmsg into 64 KiB buffers -> the
// kernel's checksum verdict (or ours) -> small frames copied into small
// buffers so that big ones go back at once -> lent to lwIP. Transmit: lwIP's
// segments lent (or copied by tx_begin) -> a virtio-net header each: TCP
// checksum left to the kernel, segments over the wire MTU marked for
// segmentation -> sendmmsg, which copies them into the kernel.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "stack/net/packet_link_impl.h"

namespace softrdma::net::packet {

namespace {

constexpr uint32_t kEth = 14, kTcpChecksumAt = 16;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// The ones' complement sum of n octets (16-bit words in memory order),
// added to acc and not yet folded.
uint64_t add_words(const uint8_t* p, size_t n, uint64_t acc) {
  for (; n >= 4; p += 4, n -= 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    acc += w;
  }
  if (n >= 2) {
    uint16_t w;
    std::memcpy(&w, p, 2);
    acc += w;
    p += 2;
    n -= 2;
  }
  if (n == 1) {
    uint16_t w = 0;
    std::memcpy(&w, p, 1);
    acc += w;
  }
  return acc;
}

uint16_t fold(uint64_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

// An IPv4/TCP frame's IP header length and IP total length, or false.
bool ipv4_tcp(const uint8_t* f, uint32_t len, uint32_t* ihl, uint32_t* total) {
  if (len < kEth + 40 || be16(f + 12) != 0x0800 || (f[kEth] >> 4) != 4 || f[kEth + 9] != 6)
    return false;
  *ihl = (f[kEth] & 0xfu) * 4u;
  *total = be16(f + kEth + 2);
  return *ihl >= 20 && *total >= *ihl + 20 && kEth + *total <= len;
}

// The TCP pseudo-header's sum (addresses, protocol, TCP length).
uint64_t pseudo_sum(const uint8_t* f, uint32_t tcp_len) {
  return add_words(f + kEth + 12, 8, 0) + htons(6) + htons(static_cast<uint16_t>(tcp_len));
}

}  // namespace

// What the kernel did not vouch for, we check: the TCP checksum of a frame
// from a NIC without receive offload.
bool Link::rx_accept(BigBuf* b, uint32_t len) {
  if (b->vnet.flags & (VnetHdr::kNeedsCsum | VnetHdr::kDataValid)) return true;
  uint32_t ihl, total;
  if (!ipv4_tcp(b->frame, len, &ihl, &total)) return false;
  const uint8_t* tcp = b->frame + kEth + ihl;
  return fold(add_words(tcp, total - ihl, pseudo_sum(b->frame, total - ihl))) == 0xffff;
}

int Link::rx_burst(RxFrame* out, int max) {
  const int want = static_cast<int>(std::min<size_t>({static_cast<size_t>(max), kBurst, big_.available()}));
  if (want <= 0) return 0;
  BigBuf* bufs[kBurst];
  iovec iov[kBurst][2];
  mmsghdr m[kBurst];
  for (int i = 0; i < want; ++i) {
    bufs[i] = big_.get<BigBuf>();
    iov[i][0] = {&bufs[i]->vnet, sizeof(VnetHdr)};
    iov[i][1] = {bufs[i]->frame, kMaxRxFrame};
    m[i].msg_hdr = msghdr{};
    m[i].msg_hdr.msg_iov = iov[i];
    m[i].msg_hdr.msg_iovlen = 2;
  }
  int n = ::recvmmsg(fd_, m, want, MSG_DONTWAIT, nullptr);
  if (n < 0) n = 0;
  int got = 0;
  for (int i = 0; i < n; ++i) {
    BigBuf* b = bufs[i];
    const uint32_t len = m[i].msg_len > sizeof(VnetHdr)
                             ? m[i].msg_len - static_cast<uint32_t>(sizeof(VnetHdr))
                             : 0;
    // GRO can make an IP packet of up to 64 KiB, 14 octets more than an lwIP
    // buffer holds: such a rare one is dropped, and TCP resends it alone.
    if ((m[i].msg_hdr.msg_flags & MSG_TRUNC) || len < kEth || len > kMaxLwipFrame ||
        !rx_accept(b, len)) {
      ++c_.rx_dropped;
      big_.put(b);
      continue;
    }
    ++c_.rx_packets;
    c_.rx_bytes += len;
    SmallBuf* s = len <= kSmallFrame ? small_.get<SmallBuf>() : nullptr;
    if (s != nullptr) {
      std::memcpy(s->frame, b->frame, len);
      big_.put(b);
      out[got++] = RxFrame{s, s->frame, len, s->priv};
    } else {
      out[got++] = RxFrame{b, b->frame, len, b->priv};
    }
  }
  for (int i = n; i < want; ++i) big_.put(bufs[i]);
  return got;
}

void Link::rx_release(void* handle) {
  (big_.owns(handle) ? big_ : small_).put(handle);
}

uint8_t* Link::tx_begin(uint32_t len, void** handle) {
  if (len <= kSmallFrame) {
    if (auto* b = tx_small_.get<SmallBuf>()) {
      *handle = b;
      return b->frame;
    }
  } else if (len <= kMaxFrame) {
    if (auto* b = tx_big_.get<BigBuf>()) {
      *handle = b;
      return b->frame;
    }
  }
  ++c_.tx_dropped;
  return nullptr;
}

void Link::tx_commit(void* handle, uint32_t len) {
  const uint8_t* frame = tx_big_.owns(handle) ? static_cast<BigBuf*>(handle)->frame
                                              : static_cast<SmallBuf*>(handle)->frame;
  pending_.push_back(TxItem{frame, len, handle, nullptr, nullptr});
}

int Link::tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) {
  return tx_lend_headed(nullptr, 0, frame, len, done, ctx);
}

int Link::tx_lend_headed(const uint8_t* head, uint32_t head_len, const uint8_t* frame,
                         uint32_t len, TxDone done, void* ctx) {
  if (len > kMaxFrame || head_len > len) return 0;
  if (head != nullptr && head_len < std::min(len, kEth + 40)) return 0;  // headers not all there
  if (pending_.size() >= kMaxPending) {
    tx_flush();
    if (pending_.size() >= kMaxPending) return -ENOBUFS;
  }
  pending_.push_back(TxItem{frame, len, nullptr, done, ctx, const_cast<uint8_t*>(head), head_len});
  return 1;
}

// The kernel fills in the TCP checksum (CHECKSUM_PARTIAL: the field holds
// the pseudo-header's sum) and cuts segments over the wire's MTU. The frame
// is lwIP's: it zeroes the field whenever it outputs a segment again.
// A headed frame's headers are read and written in its head only.
bool Link::tx_prepare(TxItem& t, VnetHdr* h) {
  *h = VnetHdr{};
  uint8_t* f = t.head != nullptr ? t.head : const_cast<uint8_t*>(t.frame);
  uint32_t ihl, total;
  if (!ipv4_tcp(f, t.len, &ihl, &total)) return t.len <= kEth + wire_mtu_;
  if (t.head != nullptr && kEth + ihl + kTcpChecksumAt + 2 > t.head_len) return false;
  const uint32_t thl = (f[kEth + ihl + 12] >> 4) * 4u;
  if (thl < 20 || ihl + thl > total) return false;
  const uint16_t sum = fold(pseudo_sum(f, total - ihl));
  std::memcpy(f + kEth + ihl + kTcpChecksumAt, &sum, 2);
  h->flags = VnetHdr::kNeedsCsum;
  h->csum_start = static_cast<uint16_t>(kEth + ihl);
  h->csum_offset = kTcpChecksumAt;
  if (total > wire_mtu_) {
    h->gso_type = VnetHdr::kGsoTcpV4;
    h->gso_size = static_cast<uint16_t>(wire_mtu_ - ihl - thl);
    h->hdr_len = static_cast<uint16_t>(kEth + ihl + thl);
  }
  return true;
}

void Link::tx_finish(TxItem& t) {
  if (t.done != nullptr) t.done(const_cast<uint8_t*>(t.frame), t.ctx);
  if (t.buf != nullptr) (tx_big_.owns(t.buf) ? tx_big_ : tx_small_).put(t.buf);
  t.frame = nullptr;
}

void Link::tx_flush() {
  size_t at = 0;
  while (at < pending_.size()) {
    VnetHdr hdr[kBurst];
    iovec iov[kBurst][3];
    mmsghdr m[kBurst];
    size_t idx[kBurst];
    int k = 0;
    for (; at < pending_.size() && k < kBurst; ++at) {
      TxItem& t = pending_[at];
      if (t.frame == nullptr) continue;
      if (!tx_prepare(t, &hdr[k])) {  // no wire takes it
        ++c_.tx_dropped;
        tx_finish(t);
        continue;
      }
      iov[k][0] = {&hdr[k], sizeof(VnetHdr)};
      iov[k][1] = {t.head, t.head_len};
      iov[k][2] = {const_cast<uint8_t*>(t.frame) + t.head_len, t.len - t.head_len};
      m[k].msg_hdr = msghdr{};
      m[k].msg_hdr.msg_iov = iov[k];
      m[k].msg_hdr.msg_iovlen = 3;
      idx[k++] = at;
    }
    if (k == 0) break;
    int sent = ::sendmmsg(fd_, m, k, MSG_DONTWAIT);
    bool full = false;
    if (sent < 0) {
      full = errno == EAGAIN || errno == ENOBUFS || errno == EINTR;
      if (!full) {  // the first frame was refused: it is lost, as on a wire
        ++c_.tx_dropped;
        tx_finish(pending_[idx[0]]);
        at = idx[0] + 1;
        continue;
      }
      sent = 0;
    }
    for (int i = 0; i < sent; ++i) {
      ++c_.tx_packets;
      c_.tx_bytes += pending_[idx[i]].len;
      tx_finish(pending_[idx[i]]);
    }
    if (full || sent < k) break;  // the socket's buffer is full: the rest waits
  }
  // Frames sent or dropped are done; the rest keep their order.
  std::erase_if(pending_, [](const TxItem& t) { return t.frame == nullptr; });
}

void Link::tx_discard() {
  for (TxItem& t : pending_) {
    if (t.frame == nullptr) continue;
    ++c_.tx_dropped;
    tx_finish(t);
  }
  pending_.clear();
}

}  // namespace softrdma::net::packet
