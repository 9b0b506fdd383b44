// lwIP raw-API transport (see lwip_transport.h for the contract, and
// lwip_transport_impl.h for how the pieces fit): the transport's events and
// poll(), the stack's I/O pass, and the public API.
#include "stack/net/lwip/lwip_transport.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "lwip/etharp.h"
#include "lwip/sys.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "stack/common/pass_clock.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace softrdma::net::lwip_impl {

TransportImpl::TransportImpl(const LwipTransportOptions& options) : options_(options) {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  evfd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  tfd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (!ok()) return;
  for (int fd : {evfd_, tfd_}) {
    epoll_event e{};
    e.events = EPOLLIN;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &e) != 0) {
      ::close(epfd_);
      epfd_ = -1;
      return;
    }
  }
  Locked g;
  Stack::get().register_transport(this);
}

TransportImpl::~TransportImpl() {
  if (ok()) {
    Locked g;
    Stack& s = Stack::get();
    s.unregister_transport(this);
    fifo_.clear();
    fifo_changed();
    listeners_.clear();  // closes the listening pcbs
    // Like closing every socket: a graceful FIN where lwIP can queue one.
    for (auto& [raw, c] : conns_) {
      c->released_ = true;
      c->close_requested_ = false;
      c->parked_.clear();
      if (!c->aborted_ && !c->try_finish() && c->pcb_ != nullptr) {
        tcp_arg(c->pcb_, nullptr);
        tcp_abort(c->pcb_);
        c->pcb_ = nullptr;
      }
    }
    conns_.clear();
    s.drain(this, kCloseDrainBound);
    s.finish_lingering(this);
  }
  for (int fd : {epfd_, evfd_, tfd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void TransportImpl::queue(const Event& e) {
  if (e.conn != nullptr && e.kind != EvKind::kAccept) {
    uint8_t bit = e.kind == EvKind::kReadable ? 1 : e.kind == EvKind::kWritable ? 2 : 0;
    if (bit != 0) {
      if (e.conn->queued_ & bit) return;
      e.conn->queued_ |= bit;
    }
  }
  bool was_empty = fifo_.empty();
  fifo_.push_back(e);
  fifo_changed();
  // Another transport's poll made this event: wake our waiter, if any.
  if (was_empty && Stack::get().fd_mode() && Stack::get().io_runner() != this) signal();
}

// Checks an event against the state now, with the process lock held.
bool TransportImpl::prepare(const Event& e) {
  Conn* c = e.conn;
  switch (e.kind) {
    case EvKind::kAccept:
      if (c->pcb_ != nullptr) tcp_backlog_accepted(c->pcb_);
      c->announced_ = true;  // delivered next: later bytes may be pushed
      return true;
    case EvKind::kConnected:
      if (!c->can_notify()) return false;
      if (e.err != 0) c->done_ = true;
      c->announced_ = e.err == 0;
      return true;
    case EvKind::kReadable: c->queued_ &= static_cast<uint8_t>(~1u); return c->can_notify();
    case EvKind::kWritable:
      c->queued_ &= static_cast<uint8_t>(~2u);
      return c->can_notify() && !c->close_requested_;
    case EvKind::kClosed:
      if (!c->can_notify()) return false;
      c->done_ = true;
      return true;
  }
  return false;
}

// One event at a time, popped in a critical section of its own and delivered
// after it (when the owner's pass holds the process lock, inside that one):
// nothing of the batch is held across a callback, so callbacks may release
// or close anything. Readable events offer the bytes to the receive entry
// in the same critical section instead.
int TransportImpl::deliver(TransportEvents& ev) {
  if (fifo_held_.load(std::memory_order_acquire) == 0) return 0;
  size_t budget = SIZE_MAX;  // the events queued when it starts
  int handled = 0;
  for (;;) {
    Event e;
    bool out = false;  // e is to be delivered after the critical section
    {
      Locked g;
      if (budget == SIZE_MAX) budget = fifo_.size();
      while (!out && budget > 0 && !fifo_.empty()) {
        --budget;
        e = fifo_.front();
        fifo_.pop_front();
        fifo_changed();
        if (!prepare(e)) continue;
        if (e.kind == EvKind::kReadable) {
          offer(e.conn, ev);
          ++handled;
          continue;
        }
        out = true;
      }
    }
    if (!out) return handled;
    switch (e.kind) {
      case EvKind::kAccept: ev.on_accept(e.listener, e.conn); break;
      case EvKind::kConnected: ev.on_connected(e.conn, e.err); break;
      case EvKind::kReadable: break;  // offered above
      case EvKind::kWritable: ev.on_writable(e.conn); break;
      case EvKind::kClosed: ev.on_closed(e.conn, e.err); break;
    }
    ++handled;
  }
}

int TransportImpl::poll(TransportEvents& ev, int timeout_us) {
  Stack& s = Stack::get();
  const int64_t start_ns = pass_clock::refresh();
  int handled = 0;
  ++polls_;
  sink_ = &ev;
  for (bool first = true;; first = false) {
    if (!first) pass_clock::refresh();
    {
      Locked g;
      drain_signals();
      if (s.acks_pending()) s.flush_acks(this);
      handled += s.run_io(this);
    }
    handled += deliver(ev);
    if (handled > 0 || timeout_us == 0) break;
    if (wake_pending_.exchange(false)) break;
    int left_ms = -1;
    if (timeout_us > 0) {
      const int64_t spent_us = (pass_clock::refresh() - start_ns) / 1000;
      if (spent_us >= timeout_us) break;
      left_ms = static_cast<int>((timeout_us - spent_us + 999) / 1000);
    }
    if (s.fd_mode()) wait(left_ms);  // else: links must be busy-polled
  }
  sink_ = nullptr;
  if (handled == 0 && s.fd_mode()) arm_wait();
  return handled;
}

void Stack::register_transport(TransportImpl* t) {
  transports_.push_back(t);
  for (const auto& l : links_) {
    if (l->wait_fd >= 0) t->link_fd(l->wait_fd, true);
  }
}

void Stack::unregister_transport(TransportImpl* t) { std::erase(transports_, t); }

void Stack::retry_blocked() {
  tx_blocked_ = false;
  for (tcp_pcb* pcb = tcp_active_pcbs; pcb != nullptr; pcb = pcb->next) {
    if (pcb->unsent != nullptr) tcp_output(pcb);
  }
}

// The sending pcb's Conn outputs again in the next pass's work. Pcbs
// without one (a listener's SYN-ACK or RST) are found by walking them all.
void Stack::retry_later(struct netif_hint* hint) {
  Conn* c = conn_of(hint);
  if (c == nullptr) {
    tx_blocked_ = true;
    return;
  }
  c->retry_output_ = true;
  want_retry(c);
}

void Stack::want_retry(Conn* c) {
  if (c->in_stalled_) return;
  c->in_stalled_ = true;
  stalled_.push_back(c);
}

// Oldest first, until a few meet dry pools or a full link again (each
// re-queues itself at the back): the rest wait for the next pass, whose
// input may bring the ACKs that free pools and the reads that free rings.
void Stack::retry_stalled() {
  constexpr int kMaxMisses = 4;  // a full link does not hold up every other
  int misses = 0;
  for (size_t n = stalled_.size(); n > 0 && misses < kMaxMisses; --n) {
    Conn* c = stalled_.front();
    stalled_.pop_front();
    if (c == nullptr) continue;  // forgotten
    c->in_stalled_ = false;
    if (work_on(c)) ++misses;
  }
}

void Stack::want_work(Conn* c) {
  if (c->in_work_) return;
  c->in_work_ = true;
  work_.push_back(c);
}

// Whether c stalled again (c may be gone when it did not).
bool Stack::work_on(Conn* c) {
  if (!c->released_) {
    c->run_work();
    return c->in_stalled_;
  }
  if (c->try_finish()) {
    lingering_.erase(c);  // c is gone
  } else {
    want_work(c);
  }
  return false;
}

void Stack::want_ack(Conn* c) {
  if (c->in_acks_) return;
  c->in_acks_ = true;
  acks_.push_back(c);
  acks_hint_.store(true, std::memory_order_relaxed);
}

void Stack::want_offer(Conn* c) {
  if (c->in_offers_) return;
  c->in_offers_ = true;
  offers_.push_back(c);
}

void Stack::forget(Conn* c) {
  if (c->in_work_) std::erase(work_, c);
  if (c->in_acks_) std::erase(acks_, c);
  if (c->in_offers_) std::replace(offers_.begin(), offers_.end(), c, static_cast<Conn*>(nullptr));
  if (c->in_stalled_) std::replace(stalled_.begin(), stalled_.end(), c, static_cast<Conn*>(nullptr));
  c->in_work_ = c->in_acks_ = c->in_offers_ = c->in_stalled_ = false;
}

namespace {

// The connections queued on q, taken for one pass. q gets the spare
// vector's capacity and the spare gets q's back at the end, so a pass
// allocates nothing once both have grown (a nested pass just allocates).
class PassBatch {
 public:
  PassBatch(std::vector<Conn*>& q, std::vector<Conn*>& spare)
      : spare_(spare), v_(std::move(spare)) {
    v_.clear();
    v_.swap(q);
  }
  ~PassBatch() {
    v_.clear();
    spare_ = std::move(v_);
  }
  PassBatch(const PassBatch&) = delete;
  PassBatch& operator=(const PassBatch&) = delete;
  auto begin() const { return v_.begin(); }
  auto end() const { return v_.end(); }

 private:
  std::vector<Conn*>& spare_;
  std::vector<Conn*> v_;
};

}  // namespace

// Returns the connections whose bytes it offered to runner's owner.
int Stack::run_io(TransportImpl* runner) {
  io_runner_ = runner;
  RxFrame frames[kRxBurst];
  bool backlog = false;
  for (size_t i = 0; i < links_.size(); ++i) {
    Link* l = links_[i].get();
    int n = l->port->rx_burst(frames, kRxBurst);
    backlog |= n == kRxBurst;
    for (int k = 0; k < n; ++k) input(l, frames[k]);
  }
  // Link state, and lwIP's timers (whose times are whole milliseconds), at
  // most once a millisecond. While a ring still holds a full burst the timers
  // wait (up to kTimerDeferMs): after this process was descheduled, the ACKs
  // queued meanwhile must be read before an RTO takes their segments as lost.
  uint32_t now = sys_now();
  if (!backlog || !in_backlog_) backlog_since_ms_ = now;
  in_backlog_ = backlog;
  if (now != last_tick_ms_ && now - backlog_since_ms_ >= (backlog ? kTimerDeferMs : 0)) {
    last_tick_ms_ = now;
    check_link_states();
    sys_check_timeouts();
  }
  netif_poll_all();  // loopback queues (traffic to our own addresses)
  if (tx_blocked_) retry_blocked();
  if (!stalled_.empty()) retry_stalled();
  if (!work_.empty()) {
    const PassBatch batch(work_, work_spare_);
    for (Conn* c : batch) c->in_work_ = false;
    for (Conn* c : batch) {
      if (!c->in_work_) (void)work_on(c);  // else queued again by an earlier entry's work
    }
  }
  if (!retired_.empty()) sweep_retired();
  int offered = 0;
  // Connections with a receiver for this pass (lw_recv checks). By index: an
  // owner may release another connection of the list, whose entry forget()
  // then clears.
  for (size_t i = 0; i < offers_.size(); ++i) {
    Conn* c = std::exchange(offers_[i], nullptr);
    if (c == nullptr) continue;
    c->in_offers_ = false;
    c->transport_->offer_pushed(c);
    // Another engine's completions: its waiter, if asleep, looks again.
    if (c->transport_ != runner && fd_mode()) c->transport_->wake_waiter();
    ++offered;
  }
  offers_.clear();
  if (burst_acks_) ack_bursts();  // after the owners' replies, which carry them
  io_runner_ = nullptr;
  return offered;
}

// The one ACK for the burst of segments a connection took in this pass
// (lwip_acks.cc), unless a reply sent while its owner took them carried it.
void Stack::ack_bursts() {
  burst_acks_ = false;
  for (Conn* c : acks_) {
    if (!std::exchange(c->ack_burst_, false)) continue;
    if (c->released_ || c->pcb_ == nullptr || !(c->pcb_->flags & TF_ACK_DELAY)) continue;
    tcp_ack_now(c->pcb_);
    tcp_output(c->pcb_);
  }
}

// Delayed ACKs still pending when the owner polls again after a poll that
// returned with the data delivered (Conn::ack_from_poll_) go out now instead of on the next
// fast-timer tick, up to TCP_TMR_INTERVAL later. Until then the owner may
// piggyback them on a reply, from its callback or right after poll()
// returns; flushing at the end of the poll that received the data instead
// cost a pure ACK per round trip (+0.45 us on the 64 B ping-pong over the
// pipe). A burst of segments is acknowledged at the end of its pass
// (ack_bursts).
void Stack::flush_acks(TransportImpl* owner) {
  // In place: tcp_output never calls back into want_ack.
  size_t keep = 0;
  for (Conn* c : acks_) {
    const bool delayed = c->pcb_ != nullptr && (c->pcb_->flags & TF_ACK_DELAY);
    if (c->released_ || !delayed) {  // gone, or a reply carried the ACK
      c->in_acks_ = false;
      continue;
    }
    if (c->transport_ != owner || (c->queued_ & 1) || owner->polls() < c->ack_from_poll_) {
      acks_[keep++] = c;
      continue;
    }
    c->in_acks_ = false;
    tcp_ack_now(c->pcb_);
    tcp_output(c->pcb_);
  }
  acks_.resize(keep);
  acks_hint_.store(keep != 0, std::memory_order_relaxed);
}

}  // namespace softrdma::net::lwip_impl

namespace softrdma::net {

using lwip_impl::Locked;
using lwip_impl::Stack;
using lwip_impl::TransportImpl;

LwipStack& LwipStack::get() {
  static LwipStack facade;
  Stack::get();
  return facade;
}

int LwipStack::add_link(std::unique_ptr<FrameLink> link, in_addr ip, in_addr netmask,
                        in_addr gateway, const LwipLinkOptions& options) {
  Locked g;
  return Stack::get().add_link(std::move(link), ip, netmask, gateway, options);
}

int LwipStack::remove_link(int link_id) {
  Locked g;
  return Stack::get().remove_link(link_id);
}

int LwipStack::add_route(in_addr dest, int prefix_len, int link_id, in_addr via) {
  Locked g;
  return Stack::get().add_route(dest, prefix_len, link_id, via);
}

int LwipStack::remove_route(in_addr dest, int prefix_len) {
  Locked g;
  return Stack::get().remove_route(dest, prefix_len);
}

int LwipStack::add_neighbor(in_addr dest, const uint8_t mac[6]) {
  Locked g;
  ip4_addr_t ip;
  ip4_addr_set_u32(&ip, dest.s_addr);
  eth_addr ea;
  std::memcpy(ea.addr, mac, ETH_HWADDR_LEN);
  Stack::get().route_any_link_state = true;
  err_t e = etharp_add_static_entry(&ip, &ea);
  Stack::get().route_any_link_state = false;
  return e == ERR_OK ? 0 : -EHOSTUNREACH;
}

int LwipStack::reset_connections_to(in_addr peer) {
  Locked g;
  return Stack::get().reset_connections_to(peer);
}

bool LwipStack::local_port_in_use(uint16_t port) const {
  Locked g;
  return Stack::get().local_port_in_use(port);
}

void LwipStack::sync_link_states() {
  Locked g;
  Stack::get().check_link_states();
}

LwipCounters LwipStack::counters() const {
  Locked g;
  return Stack::get().counters();
}

int LwipStack::link_counters(int link_id, LinkCounters* out) const {
  Locked g;
  return Stack::get().link_counters(link_id, out);
}

std::unique_ptr<Transport> make_lwip_transport(const LwipTransportOptions& options) {
  auto t = std::make_unique<TransportImpl>(options);
  if (!t->ok()) return nullptr;
  return t;
}

}  // namespace softrdma::net
