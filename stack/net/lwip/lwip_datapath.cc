// lwIP transport: the data path. Receive (lwIP's recv callback queues pbuf
// chains, rx_peek lends them, rx_consume frees them and opens the window)
// and transmit (tx_space, tx_send into tcp_write, parked tails, tx_flush).
#include <errno.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "lwip/tcp.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace softrdma::net::lwip_impl {

size_t Conn::rx_peek(RxView* views, size_t max) {
  Locked g;
  size_t shown;
  return views_locked(views, max, &shown);
}

size_t Conn::views_locked(RxView* views, size_t max, size_t* shown) const {
  size_t n = 0, off = rx_off_;
  *shown = 0;
  for (const pbuf* p = rx_head_; p != nullptr && n < max; p = p->next) {
    if (p->len > off) {
      views[n++] = RxView{static_cast<const uint8_t*>(p->payload) + off, p->len - off};
      *shown += p->len - off;
    }
    off = 0;
  }
  return n;
}

void Conn::rx_consume(size_t n) {
  Locked g;
  consume_locked(n);
}

// Frees the pbufs (frames) consumed in full and opens the window by n.
// Views of the remaining bytes stay valid: their pbufs are untouched.
void Conn::consume_locked(size_t n) {
  n = std::min(n, rx_bytes_);
  rx_bytes_ -= n;
  size_t left = n;
  while (rx_head_ != nullptr) {
    size_t avail = rx_head_->len - rx_off_;
    if (left < avail) {
      rx_off_ += left;
      break;
    }
    left -= avail;  // all of it (zero-length pbufs go too)
    pbuf* next = rx_head_->next;
    rx_head_->next = nullptr;
    pbuf_free(rx_head_);
    rx_head_ = next;
    rx_off_ = 0;
  }
  if (rx_head_ == nullptr) rx_tail_ = nullptr;
  if (pcb_ != nullptr) {
    while (n > 0) {
      auto chunk = static_cast<u16_t>(std::min(n, kMaxWrite));
      tcp_recved(pcb_, chunk);
      n -= chunk;
    }
  }
}

void TransportImpl::offer(Conn* c, TransportEvents& ev) {
  constexpr size_t kViews = 16;
  RxView views[kViews];
  while (c->can_notify() && c->rx_bytes_ > 0) {
    size_t shown;
    const size_t n = c->views_locked(views, kViews, &shown);
    if (n == 0) return;
    offering_ = c;
    const size_t used = ev.on_data(c, views, n);
    if (offering_ != c) return;  // released by the owner
    offering_ = nullptr;
    c->consume_locked(used);
    if (used < shown) return;  // the owner takes no more now
  }
}

size_t Conn::space_locked() {
  if (!parked_.empty()) return 0;                       // parked bytes go first
  if (pcb_ == nullptr || err_ != 0) return kUnsentCap;  // tx_send reports why
  size_t unsent = pcb_->snd_lbb - pcb_->snd_nxt;
  if (unsent >= kUnsentFlush && !connecting_) {
    tcp_output(pcb_);
    unsent = pcb_->snd_lbb - pcb_->snd_nxt;
  }
  if (unsent >= kUnsentCap) return 0;
  size_t buf = pcb_->snd_buf;  // tcp_sndbuf() clamps to 16 bits
  size_t qlen = tcp_sndqueuelen(pcb_);
  size_t qcap = std::min<size_t>(TCP_SND_QUEUELEN, TCP_SNDQUEUELEN_OVERFLOW);
  if (qlen + kQueueSlack >= qcap) return 0;
  size_t by_queue = (qcap - qlen - kQueueSlack) * std::max<size_t>(tcp_mss(pcb_), 1);
  return std::min({buf, by_queue, kUnsentCap - unsent});
}

size_t Conn::tx_space() const {
  Locked g;
  auto* self = const_cast<Conn*>(this);
  size_t s = self->space_locked();
  if (s < kWritableMark) self->want_writable_ = true;
  return s;
}

int Conn::tx_send(const iovec* iov, int cnt, size_t total) {
  Locked g;
  if (err_ != 0) return err_;
  if (pcb_ == nullptr || close_requested_) return -EPIPE;
  if (cnt < 0) return -EINVAL;
  size_t sum = 0;
  for (int i = 0; i < cnt; ++i) sum += iov[i].iov_len;
  if (sum != total) return -EINVAL;
  if (total == 0) return 0;
  if (total > space_locked()) {
    want_writable_ = true;
    return -EAGAIN;
  }
  // A small gather list (an FPDU of a short message: header, payload, pad,
  // CRC) is joined first: one tcp_write costs less than one per piece.
  if (cnt > 1 && total <= kJoinMax) {
    uint8_t joined[kJoinMax];
    size_t at = 0;
    for (int i = 0; i < cnt; ++i) {
      std::memcpy(joined + at, iov[i].iov_base, iov[i].iov_len);
      at += iov[i].iov_len;
    }
    const iovec one{joined, total};
    return write_locked(&one, 1);
  }
  return write_locked(iov, cnt);
}

// tx_send's writes, under the process lock, the room already checked.
int Conn::write_locked(const iovec* iov, int cnt) {
  // One tcp_write per piece (COPY: the caller may reuse its memory; MORE: no
  // PSH, and the segment's oversized pbuf keeps filling). If lwIP's shared
  // pools run dry midway, the rest is parked so the send stays whole.
  bool parking = false;
  for (int i = 0; i < cnt; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    size_t len = iov[i].iov_len;
    while (len > 0 && !parking) {
      auto chunk = static_cast<u16_t>(std::min(len, kMaxWrite));
      err_t e = tcp_write(pcb_, p, chunk, TCP_WRITE_FLAG_COPY | TCP_WRITE_FLAG_MORE);
      if (e == ERR_MEM) {
        parking = true;
        break;
      }
      if (e != ERR_OK) {  // the stream is gone (a state lwIP refuses writes in)
        fail_now(-EPIPE);
        return -EPIPE;
      }
      p += chunk;
      len -= chunk;
    }
    if (parking && len > 0) parked_.insert(parked_.end(), p, p + len);
  }
  if (parking) {
    ++g_stack->ctr.tx_parked;
    g_stack->want_retry(this);
  }
  return 0;
}

void Conn::tx_flush() {
  Locked g;
  if (pcb_ != nullptr) tcp_output(pcb_);
}

void Conn::drain_parked() {
  while (pcb_ != nullptr && parked_off_ < parked_.size()) {
    size_t room = pcb_->snd_buf;
    size_t len = std::min({parked_.size() - parked_off_, kMaxWrite, room});
    if (len == 0) return;
    err_t e = tcp_write(pcb_, parked_.data() + parked_off_, static_cast<u16_t>(len),
                        TCP_WRITE_FLAG_COPY | TCP_WRITE_FLAG_MORE);
    if (e == ERR_MEM) return;
    if (e != ERR_OK) {
      fail_now(-EPIPE);
      return;
    }
    parked_off_ += len;
  }
  if (parked_off_ >= parked_.size()) {
    std::vector<uint8_t>().swap(parked_);  // rare path: give the memory back
    parked_off_ = 0;
  }
}

void Conn::run_work() {
  if (pcb_ == nullptr) return;
  bool had_parked = !parked_.empty();
  drain_parked();
  if (pcb_ == nullptr) return;
  if (had_parked || std::exchange(retry_output_, false)) tcp_output(pcb_);
  if (!parked_.empty()) {
    g_stack->want_retry(this);
    return;
  }
  if (had_parked && want_writable_) {
    want_writable_ = false;
    notify(EvKind::kWritable);
  }
  try_shutdown();
}

err_t Conn::lw_recv(void* arg, tcp_pcb* pcb, pbuf* p, err_t /*err*/) {
  auto* c = static_cast<Conn*>(arg);
  if (c == nullptr) {  // detached: nothing of ours is listening any more
    if (p != nullptr) {
      tcp_recved(pcb, p->tot_len);
      pbuf_free(p);
    }
    return ERR_OK;
  }
  if (p == nullptr) {
    c->fin_rcvd_ = true;
    c->notify(EvKind::kClosed, 0);  // after any data already queued
    if (c->fin_sent_) c->detach_pcb();
    return ERR_OK;
  }
  if (c->released_) {  // lingering to flush after close(): discard
    tcp_recved(pcb, p->tot_len);
    pbuf_free(p);
    return ERR_OK;
  }
  pbuf* last = p;
  while (last->next != nullptr) last = last->next;
  if (c->rx_tail_ == nullptr) {
    c->rx_head_ = p;
  } else {
    c->rx_tail_->next = p;
  }
  c->rx_tail_ = last;
  c->rx_bytes_ += p->tot_len;
  // The owner's receive entry takes the bytes at the end of this pass, not
  // here: lwIP forbids closing or aborting the pcb from inside this
  // callback, which the owner may do on what it reads.
  // Bytes another engine's pass takes in reach the owner's application only
  // when the owner's next poll returns: a reply may carry the ACK until then.
  c->ack_from_poll_ = c->transport_->polls() + (g_stack->io_runner() == c->transport_ ? 1 : 2);
  if (c->transport_->push_target(c) != nullptr) {
    g_stack->want_offer(c);
  } else {
    c->notify(EvKind::kReadable);
  }
  g_stack->want_ack(c);
  return ERR_OK;
}

err_t Conn::lw_sent(void* arg, tcp_pcb* /*pcb*/, u16_t /*len*/) {
  auto* c = static_cast<Conn*>(arg);
  if (c == nullptr) return ERR_OK;
  if (c->released_) {
    g_stack->want_work(c);  // a lingering close may finish now
  } else if (c->want_writable_ && c->parked_.empty()) {
    c->want_writable_ = false;
    c->notify(EvKind::kWritable);
  }
  return ERR_OK;
}

}  // namespace softrdma::net::lwip_impl
