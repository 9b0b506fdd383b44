// The DPDK port's data path: rx and tx bursts, the pending-frame queue
// behind a full ring, lent frames, and re-arming the rx interrupt.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include "stack/net/dpdk/port_impl.h"

namespace softrdma::net::dpdk_port {

void bump(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// A chained frame (a PMD that scatters, such as newer memif with one mbuf
// per ring descriptor, or a peer's frame beyond our data room) becomes one
// segment: in place when the first mbuf has the tailroom, else copied into
// a fresh mbuf; dropped if it cannot fit one.
bool DpdkPortImpl::linearize(rte_mbuf** pm) {
  rte_mbuf* m = *pm;
  // The copies below trust pkt_len; a chain that disagrees would overrun.
  uint32_t sum = 0;
  uint16_t segs = 0;
  for (const rte_mbuf* s = m; s != nullptr; s = s->next, ++segs) sum += s->data_len;
  if (sum != m->pkt_len || segs != m->nb_segs) {
    bump(rx_dropped_, 1);
    rte_pktmbuf_free(m);
    return false;
  }
  if (rte_pktmbuf_linearize(m) == 0) {
    bump(rx_linearized_, 1);
    return true;
  }
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  rte_mbuf* fresh = len <= max_frame_ ? rte_pktmbuf_alloc(pool_) : nullptr;
  if (fresh == nullptr) {
    if (len > max_frame_) bump(rx_oversize_, 1);
    bump(rx_dropped_, 1);
    rte_pktmbuf_free(m);
    return false;
  }
  auto* dst = rte_pktmbuf_mtod(fresh, uint8_t*);
  const void* src = rte_pktmbuf_read(m, 0, len, dst);
  if (src != dst) std::memcpy(dst, src, len);
  fresh->data_len = static_cast<uint16_t>(len);
  fresh->pkt_len = len;
  fresh->ol_flags = m->ol_flags;
  fresh->port = m->port;
  rte_pktmbuf_free(m);
  *pm = fresh;
  bump(rx_linearized_, 1);
  return true;
}

int DpdkPortImpl::rx_burst(RxFrame* out, int max) {
  ring_full_ = false;
  if (!tx_pending_.empty()) tx_flush();  // what a full ring refused before
  if (intr_armed_) {
    rte_eth_dev_rx_intr_disable(port_, 0);
    intr_armed_ = false;
  }
  int got = 0;
  uint64_t bytes = 0;
  while (got < max) {
    const uint16_t want = static_cast<uint16_t>(std::min<int>(max - got, burst_));
    const uint16_t n = rx_some(want);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = rx_mbufs_[i];
      if (m->nb_segs > 1 && !linearize(&m)) continue;
      if (check_csum_) {
        const uint64_t f = m->ol_flags;
        if ((f & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
            (f & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
          bump(rx_bad_checksum_, 1);
          bump(rx_dropped_, 1);
          rte_pktmbuf_free(m);
          continue;
        }
      }
      RxFrame& f = out[got++];
      f.handle = m;
      f.data = rte_pktmbuf_mtod(m, const uint8_t*);
      f.len = m->data_len;
      f.priv = rte_mbuf_to_priv(m);
      bytes += m->data_len;
    }
    if (n < want) break;
  }
  if (got > 0) {
    bump(rx_packets_, got);
    bump(rx_bytes_, bytes);
  }
  return got;
}

// Back-pressure, not loss: while frames wait for a full ring, refuse new
// ones (the TCP above keeps its segment and tries again on a later poll).
bool DpdkPortImpl::tx_room() {
  if (tx_pending_.size() < kMaxPending) return true;
  if (!ring_full_) tx_flush();
  if (tx_pending_.size() < kMaxPending) return true;
  bump(tx_retries_, 1);
  return false;
}

uint8_t* DpdkPortImpl::tx_begin(uint32_t len, void** handle) {
  if (!tx_room()) return nullptr;
  rte_mbuf* m = len <= max_tx_frame_ ? rte_pktmbuf_alloc(pool_) : nullptr;
  if (m == nullptr) {
    bump(tx_dropped_, 1);
    return nullptr;
  }
  *handle = m;
  return rte_pktmbuf_mtod(m, uint8_t*);
}

void DpdkPortImpl::tx_commit(void* handle, uint32_t len) {
  auto* m = static_cast<rte_mbuf*>(handle);
  if (len > max_tx_frame_) {
    bump(tx_dropped_, 1);
    rte_pktmbuf_free(m);
    return;
  }
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  queue_tx(m, len);
}

void DpdkPortImpl::queue_tx(rte_mbuf* m, uint32_t len) {
  tx_pending_.push_back(m);
  tx_pending_len_.push_back(len);
  if (tx_pending_.size() >= burst_ && !ring_full_) tx_flush();
}

// The frame rides in an mbuf as an external buffer; the mbuf's own data
// room goes unused and its private area (free on transmit) holds the shared
// info, whose free callback is the caller's done. The driver copies the
// frame into its ring and frees the mbuf within tx_burst, which calls done.
int DpdkPortImpl::tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) {
  if (!lends_ || len > max_tx_frame_) return 0;
  if (!tx_room()) return -ENOBUFS;
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) {
    bump(tx_dropped_, 1);
    return -ENOBUFS;
  }
  static_assert(sizeof(rte_mbuf_ext_shared_info) <= kFramePrivSize);
  auto* sh = static_cast<rte_mbuf_ext_shared_info*>(rte_mbuf_to_priv(m));
  sh->free_cb = done;
  sh->fcb_opaque = ctx;
  rte_mbuf_ext_refcnt_set(sh, 1);
  // No IOVA: only drivers that copy in software (lends_) see this mbuf.
  rte_pktmbuf_attach_extbuf(m, const_cast<uint8_t*>(frame), RTE_BAD_IOVA,
                            static_cast<uint16_t>(len), sh);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  queue_tx(m, len);
  return 1;
}

void DpdkPortImpl::tx_flush() {
  const uint16_t n = static_cast<uint16_t>(tx_pending_.size());
  if (n == 0) return;
  rte_mbuf** pkts = tx_pending_.data();
  uint16_t sent = tx_some(pkts, n);
  if (sent < n && tx_retry_cycles_ > 0) {
    // A NIC's full ring drains by itself within microseconds (a process
    // peer's only when it reads: the mesh sets tx_retry_us 0).
    const uint64_t deadline = rte_get_timer_cycles() + tx_retry_cycles_;
    do {
      bump(tx_retries_, 1);
      rte_pause();
      sent += tx_some(pkts + sent, static_cast<uint16_t>(n - sent));
    } while (sent < n && rte_get_timer_cycles() < deadline);
  }
  // What the ring did not take stays queued, in order, for the next flush:
  // the peer is a process that may simply not have been scheduled yet.
  ring_full_ = sent < n;
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < sent; ++i) bytes += tx_pending_len_[i];
  bump(tx_packets_, sent);
  bump(tx_bytes_, bytes);
  tx_pending_.erase(tx_pending_.begin(), tx_pending_.begin() + sent);
  tx_pending_len_.erase(tx_pending_len_.begin(), tx_pending_len_.begin() + sent);
}

void DpdkPortImpl::tx_discard() {
  bump(tx_dropped_, tx_pending_.size());
  if (!tx_pending_.empty()) {
    rte_pktmbuf_free_bulk(tx_pending_.data(), static_cast<unsigned>(tx_pending_.size()));
  }
  tx_pending_.clear();
  tx_pending_len_.clear();
}

void DpdkPortImpl::rx_wait_arm() {
  if (intr_fd_ < 0) return;
  // Consume the event that woke the caller so the fd is quiet until the next.
  pollfd p{intr_fd_, POLLIN, 0};
  uint64_t v;
  while (poll(&p, 1, 0) == 1 && (p.revents & POLLIN) && read(intr_fd_, &v, sizeof(v)) > 0) {
  }
  intr_armed_ = rte_eth_dev_rx_intr_enable(port_, 0) == 0;
}

}  // namespace softrdma::net::dpdk_port
