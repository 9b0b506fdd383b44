// softrdma-switch's data path: NIC burst -> the rank holding the TCP
// destination port; a rank's ring -> checks -> NIC burst. One copy from
// the NIC into a rank's ring; none the other way where the port lends (the
// packet socket): the kernel copies the frame out of the rank's ring, with
// the headers from the switch's checked copy.
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "stack/net/switch/switch.h"

namespace softrdma::net::sw {

namespace {

constexpr int kBurst = 32;
constexpr uint32_t kEth = 14, kMinTcpFrame = kEth + 20 + 20;
// NIC frames that may wait for room in ranks' rings: per rank and in all,
// well inside the port's 8192 buffers (the rest keep the NIC receiving).
constexpr size_t kMaxWaitingPerRank = 1024, kMaxWaiting = 4096;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// The TCP header's offset in an IPv4/TCP Ethernet frame, or 0.
uint32_t tcp_offset(const uint8_t* f, uint32_t len) {
  if (len < kMinTcpFrame || be16(f + 12) != 0x0800 || (f[kEth] >> 4) != 4 || f[kEth + 9] != 6)
    return 0;
  const uint32_t ihl = (f[kEth] & 0xfu) * 4u;
  return ihl >= 20 && kEth + ihl + 20 <= len ? kEth + ihl : 0;
}

void kick(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

}  // namespace

bool Switch::to_rank(Rank* r, const RxFrame& f) {
  uint32_t slot;
  uint8_t* dst = r->to_rank->reserve(&slot);
  if (dst == nullptr) return false;
  std::memcpy(dst, f.data, f.len);
  r->to_rank->commit(slot, f.len);
  r->kicked = true;
  ++c_.to_rank;
  return true;
}

// Frames that found a rank's ring full wait in the switch (the NIC's
// buffers) rather than being dropped: a drop costs TCP a retransmission.
void Switch::flush_waiting() {
  for (auto& r : ranks_) {
    while (!r->waiting.empty() && to_rank(r.get(), r->waiting.front())) {
      nic_.port->rx_release(r->waiting.front().handle);
      r->waiting.pop_front();
      --waiting_;
    }
  }
}

int Switch::nic_to_ranks() {
  if (waiting_ > 0) flush_waiting();
  RxFrame f[kBurst];
  const int n = nic_.port->rx_burst(f, kBurst);
  for (int i = 0; i < n; ++i) {
    ++c_.nic_rx;
    const uint32_t t = tcp_offset(f[i].data, f[i].len);
    Rank* r = t ? by_port_[be16(f[i].data + t + 2)] : nullptr;
    if (r == nullptr || f[i].len > slot_size_) {
      ++c_.drop_no_rank;
    } else if (r->waiting.empty() && to_rank(r, f[i])) {
      // delivered
    } else if (r->waiting.size() < kMaxWaitingPerRank && waiting_ < kMaxWaiting) {
      r->waiting.push_back(f[i]);
      ++waiting_;
      ++c_.rank_waits;
      continue;  // the buffer stays ours till it is delivered
    } else {
      ++c_.drop_rank_full;
    }
    nic_.port->rx_release(f[i].handle);
  }
  for (auto& r : ranks_) {
    if (!r->kicked) continue;
    r->kicked = false;
    if (r->to_rank->consumer_sleeping()) {
      kick(r->kick_rank);
      ++c_.rank_kicks;
    }
  }
  return n;
}

bool Switch::frame_allowed(const Rank& r, const uint8_t* h, uint32_t len) const {
  if (len > mtu_ + kEth + 4) return false;
  const uint32_t t = tcp_offset(h, len < kCheckedHead ? len : kCheckedHead);
  if (t == 0 || std::memcmp(h + 6, mac_, 6) != 0) return false;
  if (std::memcmp(h + kEth + 12, &iface_.addr.s_addr, 4) != 0) return false;
  return by_port_[be16(h + t)] == &r;
}

void Switch::lent_done(void* frame, void* ctx) {
  auto* r = static_cast<Rank*>(ctx);
  r->to_switch->release(r->to_switch->slot_of(static_cast<const uint8_t*>(frame)));
  --r->lent;
}

int Switch::ranks_to_nic() {
  int moved = 0;
  for (auto& rp : ranks_) {
    Rank& r = *rp;
    if (!r.to_switch || r.ctl < 0) continue;
    for (int k = 0; k < kBurst; ++k) {
      const uint8_t* d;
      uint32_t len;
      const int rc = r.to_switch->peek(&d, &len);
      if (rc < 0) {
        std::fprintf(stderr, "softrdma-switch: %s: pid %d broke its ring; dropped\n",
                     iface_.name.c_str(), static_cast<int>(r.pid));
        drop(&r);
        break;
      }
      if (rc == 0) break;
      // The rank may rewrite its slot while we read it: check a copy of the
      // headers and send that copy.
      uint8_t* head = r.heads.data() + size_t{r.to_switch->slot_of(d)} * kCheckedHead;
      const uint32_t hl = len < kCheckedHead ? len : kCheckedHead;
      std::memcpy(head, d, hl);
      if (!frame_allowed(r, head, len)) {
        ++c_.drop_refused;
        r.to_switch->pop();
        continue;
      }
      const int lent = nic_.port->tx_lend_headed(head, hl, d, len, &Switch::lent_done, &r);
      if (lent > 0) {
        r.to_switch->take();
        ++r.lent;
        ++c_.from_rank;
        ++moved;
        continue;
      }
      if (lent < 0) {  // the NIC is full: the frame waits in the ring
        ++c_.nic_busy;
        break;
      }
      void* handle;
      uint8_t* out = nic_.port->tx_begin(len, &handle);
      if (out == nullptr) {  // the NIC is full: the frame waits in the ring
        ++c_.nic_busy;
        break;
      }
      std::memcpy(out + hl, d + hl, len - hl);
      std::memcpy(out, head, hl);
      nic_.port->tx_commit(handle, len);
      r.to_switch->pop();
      ++c_.from_rank;
      ++moved;
    }
  }
  if (moved > 0) nic_.port->tx_flush();
  return moved;
}

}  // namespace softrdma::net::sw
