// lwIP transport: connection and listener state (open, accept, close,
// abort, release, lingering) and lwIP's error mapping.
#include <errno.h>

#include <memory>
#include <vector>

#include "lwip/etharp.h"
#include "lwip/ip4.h"
#include "lwip/tcp.h"
#include "stack/common/pass_clock.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace softrdma::net::lwip_impl {

int errno_of_connect(err_t e) {
  switch (e) {
    case ERR_RTE: return -ENETUNREACH;
    case ERR_USE: return -EADDRINUSE;
    case ERR_ISCONN: return -EISCONN;
    case ERR_BUF: return -EADDRNOTAVAIL;  // no ephemeral port left (as Linux)
    case ERR_MEM: return -ENOBUFS;
    default: return -EINVAL;
  }
}

// lwIP's error callback: ERR_RST is the peer's reset (refused while
// connecting); ERR_ABRT is lwIP giving up (retransmission or SYN timeout,
// or a pcb reclaimed under pool pressure: we never abort pcbs we still
// listen to); ERR_CLSD only follows our own FIN's acknowledgement.
int errno_of_callback(err_t e, bool connecting) {
  if (g_stack->removing_link) return -ENETDOWN;
  if (g_stack->resetting) e = ERR_RST;
  switch (e) {
    case ERR_RST: return connecting ? -ECONNREFUSED : -ECONNRESET;
    case ERR_ABRT: return -ETIMEDOUT;
    case ERR_CLSD: return -EPIPE;
    default: return -EIO;
  }
}

// Why a SYN to peer cannot leave, as Linux would say it: no route there
// (off every link and no gateway: -ENETUNREACH), or the next hop on an
// Ethernet link has no ARP entry, nobody answered for it (-EHOSTUNREACH).
// 0: it can.
static int unreachable(const sockaddr_in& local, const sockaddr_in& peer) {
  ip4_addr_t src, dst;
  ip4_addr_set_u32(&src, local.sin_addr.s_addr);
  ip4_addr_set_u32(&dst, peer.sin_addr.s_addr);
  // As lwIP routes: our routes (hooks), else a link's own subnet.
  netif* nif = ip4_route_src(&src, &dst);
  if (nif == nullptr) return -ENETUNREACH;
  if (!(nif->flags & NETIF_FLAG_ETHARP)) return 0;
  const ip4_addr_t* hop = g_stack->next_hop(nif, &dst);
  if (hop == nullptr)
    hop = ip4_addr_netcmp(&dst, netif_ip4_addr(nif), netif_ip4_netmask(nif)) ? &dst
                                                                              : netif_ip4_gw(nif);
  if (ip4_addr_isany(hop)) return -ENETUNREACH;
  eth_addr* mac = nullptr;
  const ip4_addr_t* ip = nullptr;
  return etharp_find_addr(nif, hop, &mac, &ip) < 0 ? -EHOSTUNREACH : 0;
}

// lwIP holds a SYN whose next hop has no ARP entry in the ARP queue and
// does not retransmit it while it is held there (nor one it cannot route),
// so such a connect would only end at the engine's connect timeout, as
// ETIMEDOUT. Like Linux after its ARP probes, it fails after
// kNeighbourWaitMs, saying why.
constexpr int kNeighbourWaitMs = 3000;
static_assert(kNeighbourWaitMs / TCP_SLOW_INTERVAL <= 255);  // lwIP's poll interval: u8_t

static err_t connect_poll(void* arg, tcp_pcb* pcb) {
  auto* c = static_cast<Conn*>(arg);
  if (c == nullptr || !c->connecting_ || pcb->state != SYN_SENT) {
    tcp_poll(pcb, nullptr, 0);  // lwIP's default again: nothing to watch
    return ERR_OK;
  }
  const int why = unreachable(c->local_, c->peer_);
  if (why == 0) return ERR_OK;
  c->detach_pcb();
  tcp_abort(pcb);
  ++g_stack->ctr.conns_failed;
  if (c->released_) {
    g_stack->want_work(c);  // the lingering object can go
  } else {
    c->fail_now(why);
  }
  return ERR_ABRT;
}

Conn::Conn(TransportImpl* transport, tcp_pcb* pcb, bool connecting)
    : transport_(transport), pcb_(pcb), connecting_(connecting) {}

Conn::~Conn() {
  g_stack->forget(this);
  if (pcb_ != nullptr) {  // safety net: never leave lwIP a dangling arg
    tcp_arg(pcb_, nullptr);
    tcp_abort(pcb_);
    pcb_ = nullptr;
  }
  free_rx();
}

void Conn::attach() {
  tcp_arg(pcb_, this);
  tcp_recv(pcb_, &Conn::lw_recv);
  tcp_sent(pcb_, &Conn::lw_sent);
  tcp_err(pcb_, &Conn::lw_err);
  // iWARP FPDUs are latency-bound messages: no Nagle. (Delayed ACKs wait
  // one poll at most, see Stack::flush_acks.)
  tcp_nagle_disable(pcb_);
  ip_set_option(pcb_, SOF_KEEPALIVE);  // timings in lwipopts.h
  // lwIP starts each connection with a 3 s RTO, kept for SYNs (no backoff in
  // SYN_SENT) and decaying slowly from there: one lost SYN or MPA frame then
  // stalls set-up past the MPA timeout. Our links are a LAN or shared memory.
  constexpr s16_t kInitialRto = 200 / TCP_SLOW_INTERVAL;
  pcb_->sv = std::min(pcb_->sv, kInitialRto);
  pcb_->rto = std::min(pcb_->rto, kInitialRto);
}

void Conn::cache_endpoints() {
  if (pcb_ == nullptr) return;
  local_ = make_sockaddr(ip4_addr_get_u32(ip_2_ip4(&pcb_->local_ip)), pcb_->local_port);
  peer_ = make_sockaddr(ip4_addr_get_u32(ip_2_ip4(&pcb_->remote_ip)), pcb_->remote_port);
  // The MSS lwIP settled on (peer's option, bounded by the outgoing link's
  // MTU): iWARP sizes its FPDUs to it.
  max_segment_ = tcp_mss(pcb_);
  const struct netif* nif = ip_route(&pcb_->local_ip, &pcb_->remote_ip);
  // Our links' netifs only: lwIP's loopback has no Link.
  lossless_ = nif != nullptr && nif->linkoutput == &Stack::link_output &&
              static_cast<const Link*>(nif->state)->port->lossless();
}

void Conn::notify(EvKind kind, int err) {
  if (!can_notify()) return;
  transport_->queue(Event{kind, this, nullptr, err});
}

void Conn::fail_now(int err) {
  if (err_ == 0) err_ = err;
  parked_.clear();
  parked_off_ = 0;
  notify(connecting_ ? EvKind::kConnected : EvKind::kClosed, err);
}

void Conn::free_rx() {
  if (rx_head_ != nullptr) pbuf_free(rx_head_);  // every link has refcount 1
  rx_head_ = rx_tail_ = nullptr;
  rx_off_ = 0;
  rx_bytes_ = 0;
}

// Both FINs seen (or released): lwIP finishes the pcb on its own, including
// TIME_WAIT, and frees it without telling anyone, so let go of it now.
void Conn::detach_pcb() {
  if (pcb_ == nullptr) return;
  tcp_arg(pcb_, nullptr);
  pcb_ = nullptr;
}

void Conn::try_shutdown() {
  if (!close_requested_ || fin_sent_ || pcb_ == nullptr || err_ != 0 || connecting_) return;
  if (!parked_.empty()) return;
  if (tcp_shutdown(pcb_, 0, 1) != ERR_OK) {  // no memory for the FIN: retry from poll
    g_stack->want_work(this);
    return;
  }
  fin_sent_ = true;
  if (fin_rcvd_) detach_pcb();
}

void Conn::close() {
  Locked g;
  if (close_requested_ || aborted_) return;
  close_requested_ = true;
  try_shutdown();
}

void Conn::abort() {
  Locked g;
  if (aborted_) return;
  aborted_ = true;
  if (pcb_ != nullptr) {
    tcp_arg(pcb_, nullptr);  // the error callback tcp_abort makes is not ours
    tcp_abort(pcb_);         // RST
    pcb_ = nullptr;
  }
  free_rx();
  parked_.clear();
  parked_off_ = 0;
  done_ = true;
  if (err_ == 0) err_ = -ECONNABORTED;
}

bool Conn::try_finish() {
  if (pcb_ == nullptr) return true;
  if (close_requested_ && err_ == 0) {
    drain_parked();
    if (pcb_ != nullptr && !parked_.empty()) {
      tcp_output(pcb_);
      return false;
    }
    if (pcb_ == nullptr) return true;
  }
  // Unconsumed bytes are dropped as if read, so lwIP ends with a FIN (a
  // socket's close() with an empty receive queue), not a RST.
  size_t n = rx_bytes_;
  free_rx();
  while (n > 0) {
    auto chunk = static_cast<u16_t>(std::min(n, kMaxWrite));
    tcp_recved(pcb_, chunk);
    n -= chunk;
  }
  tcp_arg(pcb_, nullptr);
  // From here lwIP finishes the close alone (an orphan, in kernel terms).
  // The lowest priority makes the oldest orphan the one lwIP resets when a
  // new connection finds the pcb pool empty, as Linux drops orphans under
  // pressure, so closing a connection makes room for the next at once.
  tcp_setprio(pcb_, TCP_PRIO_MIN);
  if (tcp_close(pcb_) != ERR_OK) {  // no memory for the FIN: retry from poll
    tcp_arg(pcb_, this);
    tcp_setprio(pcb_, TCP_PRIO_NORMAL);
    return false;
  }
  pcb_ = nullptr;
  return true;
}

// lwIP has already freed the pcb.
void Conn::lw_err(void* arg, err_t err) {
  auto* c = static_cast<Conn*>(arg);
  if (c == nullptr) return;
  c->pcb_ = nullptr;
  ++g_stack->ctr.conns_failed;
  int e = errno_of_callback(err, c->connecting_);
  if (c->released_) {
    g_stack->want_work(c);  // the lingering object can go
    return;
  }
  c->fail_now(e);
}

err_t Conn::lw_connected(void* arg, tcp_pcb* pcb, err_t /*err*/) {
  tcp_poll(pcb, nullptr, 0);  // connect_poll's watch is over: lwIP's default
  auto* c = static_cast<Conn*>(arg);
  if (c == nullptr) return ERR_OK;
  c->connecting_ = false;
  c->cache_endpoints();
  ++g_stack->ctr.conns_opened;
  c->notify(EvKind::kConnected, 0);
  if (c->close_requested_ || c->released_) g_stack->want_work(c);
  return ERR_OK;
}

void ListenerImpl::shut() {
  if (pcb_ == nullptr) return;
  tcp_arg(pcb_, nullptr);
  tcp_accept(pcb_, nullptr);
  tcp_close(pcb_);  // a listening pcb is freed at once
  pcb_ = nullptr;
}

err_t ListenerImpl::lw_accept(void* arg, tcp_pcb* newpcb, err_t err) {
  auto* l = static_cast<ListenerImpl*>(arg);
  if (l == nullptr || newpcb == nullptr || err != ERR_OK) return ERR_VAL;  // lwIP aborts it
  Conn* c = l->transport_->adopt(newpcb, l);
  if (c == nullptr) return ERR_MEM;
  // Counts against the listen backlog until the owner's poll delivers it,
  // so a transport nobody polls stops taking SYNs, like a full accept queue.
  tcp_backlog_delayed(newpcb);
  ++g_stack->ctr.conns_opened;
  l->transport_->queue(Event{EvKind::kAccept, c, l, 0});
  return ERR_OK;
}

int TransportImpl::listen(const sockaddr_in& addr, int backlog, Listener** out) {
  if (out == nullptr) return -EINVAL;
  if (addr.sin_family != AF_INET && addr.sin_family != AF_UNSPEC) return -EAFNOSUPPORT;
  Locked g;
  Stack& s = Stack::get();
  uint32_t ip = addr.sin_addr.s_addr;
  uint16_t port = ntohs(addr.sin_port);
  if (ip != 0 && !s.is_local(ip)) return -EADDRNOTAVAIL;
  // SO_REUSE lets a listener reuse a port that old connections still hold
  // (as SO_REUSEADDR does on Linux), so a second listener is refused here.
  if (port != 0) {
    for (tcp_pcb_listen* lp = tcp_listen_pcbs.listen_pcbs; lp != nullptr; lp = lp->next) {
      uint32_t lip = ip4_addr_get_u32(ip_2_ip4(&lp->local_ip));
      if (lp->local_port == port && (lip == 0 || ip == 0 || lip == ip)) return -EADDRINUSE;
    }
  }
  tcp_pcb* pcb = tcp_new();
  if (pcb == nullptr) return -ENOMEM;
  ip_set_option(pcb, SOF_REUSEADDR);
  ip_addr_t a;
  ip_addr_set_ip4_u32(&a, ip);
  err_t e = tcp_bind(pcb, &a, port);
  if (e != ERR_OK) {
    tcp_close(pcb);
    return e == ERR_USE ? -EADDRINUSE : -EINVAL;
  }
  auto bl = static_cast<u8_t>(backlog <= 0 || backlog > 255 ? 255 : backlog);
  tcp_pcb* lp = tcp_listen_with_backlog_and_err(pcb, bl, &e);
  if (lp == nullptr) {
    tcp_close(pcb);
    return -ENOMEM;
  }
  auto l = std::make_unique<ListenerImpl>(this, lp, make_sockaddr(ip, lp->local_port));
  tcp_arg(lp, l.get());
  tcp_accept(lp, &ListenerImpl::lw_accept);
  *out = l.get();
  listeners_.emplace(l.get(), std::move(l));
  return 0;
}

void TransportImpl::close_listener(Listener* l) {
  Locked g;
  auto it = listeners_.find(l);
  if (it == listeners_.end()) return;
  ListenerImpl* li = it->second.get();
  li->shut();
  // Connections it accepted that the owner has not been told of yet go with
  // it, as a closed socket's accept queue does.
  std::vector<Conn*> orphans;
  for (const Event& e : fifo_) {
    if (e.kind == EvKind::kAccept && e.listener == li) orphans.push_back(e.conn);
  }
  for (Conn* c : orphans) destroy(c);
  listeners_.erase(it);
}

Conn* TransportImpl::adopt(tcp_pcb* newpcb, ListenerImpl* /*l*/) {
  // As for active opens: lwIP starts a passive pcb's variance at 3 s, so its
  // RTO stays above 2 s for the first round trips and a lost MPA Reply or
  // first data segment waits that long, past the peer's MPA timeout.
  newpcb->rto = static_cast<s16_t>(kInitialRtoMs / TCP_SLOW_INTERVAL);
  newpcb->sv = static_cast<s16_t>(kInitialRtoMs / TCP_SLOW_INTERVAL);
  auto c = std::make_unique<Conn>(this, newpcb, /*connecting=*/false);
  c->attach();
  c->cache_endpoints();
  Conn* raw = c.get();
  conns_.emplace(raw, std::move(c));
  return raw;
}

int TransportImpl::connect(const sockaddr_in& peer, StreamConn** out) {
  sockaddr_in local{};
  local.sin_family = AF_INET;
  // The source address applies to destinations reached over links; 127/8
  // is answered from 127.0.0.1 (lwIP's loopback interface), as on Linux.
  if ((ntohl(peer.sin_addr.s_addr) >> 24) != 127) local.sin_addr = options_.source;
  return connect_from(local, peer, out);
}

int TransportImpl::connect_from(const sockaddr_in& local, const sockaddr_in& peer,
                                StreamConn** out) {
  if (out == nullptr) return -EINVAL;
  Locked g;
  tcp_pcb* pcb = tcp_new();
  if (pcb == nullptr) return -ENOMEM;
  auto owned = std::make_unique<Conn>(this, pcb, /*connecting=*/true);
  Conn* c = owned.get();
  conns_.emplace(c, std::move(owned));
  c->attach();
  c->peer_ = peer;
  err_t e = ERR_OK;
  if (local.sin_addr.s_addr != 0 || local.sin_port != 0) {
    ip_addr_t src;
    ip_addr_set_ip4_u32(&src, local.sin_addr.s_addr);
    e = tcp_bind(pcb, &src, ntohs(local.sin_port));
  }
  if (e == ERR_OK) {
    pcb->rto = static_cast<s16_t>(kInitialRtoMs / TCP_SLOW_INTERVAL);
    pcb->sv = static_cast<s16_t>(kInitialRtoMs / TCP_SLOW_INTERVAL);
    ip_addr_t dst;
    ip_addr_set_ip4_u32(&dst, peer.sin_addr.s_addr);
    e = tcp_connect(pcb, &dst, ntohs(peer.sin_port), &Conn::lw_connected);
  }
  if (e != ERR_OK) {
    // Reported from poll(), like any other outcome of a connect.
    c->detach_pcb();
    tcp_abort(pcb);
    ++Stack::get().ctr.conns_failed;
    c->fail_now(errno_of_connect(e));
  } else {
    c->cache_endpoints();
    c->peer_ = peer;
    tcp_poll(pcb, &connect_poll, kNeighbourWaitMs / TCP_SLOW_INTERVAL);
  }
  *out = c;
  return 0;
}

void TransportImpl::destroy(Conn* c) {
  if (offering_ == c) offering_ = nullptr;
  fifo_.erase_if([&](const Event& e) { return e.conn == c; });
  fifo_changed();
  conns_.erase(c);  // ~Conn aborts a pcb still attached
}

void TransportImpl::release(StreamConn* sc) {
  Locked g;
  auto it = conns_.find(static_cast<Conn*>(sc));
  if (it == conns_.end()) return;
  Conn* c = it->second.get();
  if (offering_ == c) offering_ = nullptr;
  fifo_.erase_if([&](const Event& e) { return e.conn == c; });
  fifo_changed();
  c->released_ = true;
  c->queued_ = 0;
  if (c->pcb_ != nullptr && !c->aborted_ && !c->try_finish()) {
    // Keeps flushing what close() left behind (or retries the FIN), with
    // no callbacks, owned by the stack from now on.
    std::unique_ptr<Conn> owned = std::move(it->second);
    conns_.erase(it);
    Stack::get().linger(std::move(owned));
    return;
  }
  conns_.erase(it);
}

int Stack::reset_connections_to(in_addr peer) {
  int n = 0;
  resetting = true;
  // tcp_abort unlinks only that pcb (our error callback touches no other).
  for (tcp_pcb *p = tcp_active_pcbs, *next; p != nullptr; p = next) {
    next = p->next;
    if (ip4_addr_get_u32(ip_2_ip4(&p->remote_ip)) != peer.s_addr) continue;
    tcp_abort(p);
    ++n;
  }
  resetting = false;
  return n;
}

bool Stack::local_port_in_use(uint16_t port) const {
  for (const tcp_pcb* p = tcp_active_pcbs; p != nullptr; p = p->next)
    if (p->local_port == port) return true;
  for (const tcp_pcb* p = tcp_tw_pcbs; p != nullptr; p = p->next)
    if (p->local_port == port) return true;
  for (const tcp_pcb_listen* p = tcp_listen_pcbs.listen_pcbs; p != nullptr; p = p->next)
    if (p->local_port == port) return true;
  return false;
}

void Stack::linger(std::unique_ptr<Conn> c) {
  Conn* raw = c.get();
  lingering_.emplace(raw, std::move(c));
  want_work(raw);
}

// Before a transport goes, the connections it let linger, and every FIN
// lwIP has in flight, get up to `bound` to have their bytes sent and
// acknowledged: a Send the application saw complete must arrive, and once
// the last transport is gone nothing runs the stack any more (the kernel
// keeps sending for a closed socket; here the process must). True if all
// finished.
bool Stack::drain(TransportImpl* owner, std::chrono::milliseconds bound) {
  auto busy = [&] {
    for (const auto& [c, owned] : lingering_)
      if (c->transport_ == owner) return true;
    for (const tcp_pcb* p = tcp_active_pcbs; p != nullptr; p = p->next)
      if (p->state == FIN_WAIT_1 || p->state == CLOSING || p->state == LAST_ACK) return true;
    return false;
  };
  const auto end = std::chrono::steady_clock::now() + bound;
  while (busy()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    pass_clock::refresh();
    run_io(nullptr);
    flush_links();
  }
  return true;
}

// Then it drops what its lingering connections still had to write and lets
// lwIP close them.
void Stack::finish_lingering(TransportImpl* owner) {
  for (auto it = lingering_.begin(); it != lingering_.end();) {
    Conn* c = it->first;
    if (c->transport_ != owner) {
      ++it;
      continue;
    }
    c->parked_.clear();
    c->parked_off_ = 0;
    c->close_requested_ = false;
    if (!c->try_finish() && c->pcb_ != nullptr) {
      tcp_arg(c->pcb_, nullptr);
      tcp_abort(c->pcb_);
      c->pcb_ = nullptr;
    }
    it = lingering_.erase(it);
  }
}

}  // namespace softrdma::net::lwip_impl
