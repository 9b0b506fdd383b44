// lwIP transport: links (netifs over FrameLinks), the route table, link
// state, and the counters of both.
#include <errno.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "lwip/etharp.h"
#include "lwip/init.h"
#include "lwip/ip4.h"
#include "lwip/netif.h"
#include "lwip/stats.h"
#include "lwip/tcp.h"
#include "lwip_hooks.h"
#include "netif/ethernet.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace softrdma::net::lwip_impl {

// tcp_init() seeds the last ephemeral port from LWIP_RAND(); every seed must
// leave tcp_new_port() a first increment that stays in range (lwipopts.h).
static_assert(TCP_ENSURE_LOCAL_PORT_RANGE(0xffffffffu) < TCP_LOCAL_PORT_RANGE_END &&
                  TCP_ENSURE_LOCAL_PORT_RANGE(0xffffu) < TCP_LOCAL_PORT_RANGE_END &&
                  TCP_ENSURE_LOCAL_PORT_RANGE(0u) >= TCP_LOCAL_PORT_RANGE_START,
              "ephemeral port seed range");

Stack* g_stack = nullptr;

Stack::Stack() {
  g_stack = this;
  lwip_init();  // also brings up the 127.0.0.1 loopback netif
  // It has no MTU (any segment fits, up to TCP_MSS): give it the mesh's, so
  // that its segments stay in the pool classes sized for them (lwippools.h).
  for (netif* n = netif_list; n != nullptr; n = n->next)
    if (n->name[0] == 'l' && n->name[1] == 'o') n->mtu = 9000;
  // Frames queued in a critical section leave when it ends (big_lock.h).
  big_lock::set_release_hook([] { g_stack->flush_links(); });
}

Link* Stack::find_link(int id) const {
  for (const auto& l : links_) {
    if (l->id == id) return l.get();
  }
  return nullptr;
}

bool Stack::is_local(uint32_t ip) const {
  if ((ntohl(ip) >> 24) == 127) return true;
  for (const auto& l : links_) {
    if (l->ip == ip) return true;
  }
  return false;
}

err_t Stack::link_netif_init(struct netif* nif) {
  auto* l = static_cast<Link*>(nif->state);
  nif->name[0] = 's';
  nif->name[1] = 'r';
  nif->output = etharp_output;
  nif->linkoutput = &Stack::link_output;
  nif->mtu = static_cast<u16_t>(std::min<uint32_t>(l->port->mtu(), 0xFFFF));
  nif->hwaddr_len = ETH_HWADDR_LEN;
  std::memcpy(nif->hwaddr, l->port->mac(), ETH_HWADDR_LEN);
  nif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET;
  NETIF_SET_CHECKSUM_CTRL(nif, l->checksum_flags);
  return ERR_OK;
}

int Stack::add_link(std::unique_ptr<FrameLink> port, in_addr ip, in_addr mask, in_addr gw,
                    const LwipLinkOptions& opt) {
  if (port == nullptr || ip.s_addr == 0 || port->mtu() < 576) return -EINVAL;
  if (is_local(ip.s_addr)) return -EADDRINUSE;
  auto l = std::make_unique<Link>();
  l->id = next_link_id_++;
  l->ip = ip.s_addr;
  l->port = std::move(port);
  l->wait_fd = l->port->rx_wait_fd();
  bool skip = opt.checksums == LinkChecksums::kNone ||
              (opt.checksums == LinkChecksums::kAuto && l->port->trusted_checksums());
  l->checksum_flags = skip ? NETIF_CHECKSUM_DISABLE_ALL : NETIF_CHECKSUM_ENABLE_ALL;
  if (opt.checksums == LinkChecksums::kTcpByLink)
    l->checksum_flags = NETIF_CHECKSUM_ENABLE_ALL & ~(NETIF_CHECKSUM_GEN_TCP | NETIF_CHECKSUM_CHECK_TCP);
  ip4_addr_t a, m, g;
  ip4_addr_set_u32(&a, ip.s_addr);
  ip4_addr_set_u32(&m, mask.s_addr);
  ip4_addr_set_u32(&g, gw.s_addr);
  if (netif_add(&l->nif, &a, &m, &g, l.get(), &Stack::link_netif_init, ethernet_input) == nullptr) {
    return -ENOMEM;
  }
  netif_set_up(&l->nif);
  if (l->port->link_up()) netif_set_link_up(&l->nif);
  if (opt.default_link) netif_set_default(&l->nif);
  int id = l->id;
  if (l->wait_fd >= 0) {
    for (TransportImpl* t : transports_) t->link_fd(l->wait_fd, true);
  }
  links_.push_back(std::move(l));
  update_fd_mode();
  return id;
}

int Stack::remove_link(int id) {
  auto it = std::find_if(links_.begin(), links_.end(), [&](const auto& l) { return l->id == id; });
  if (it == links_.end()) return -ENOENT;
  Link* l = it->get();
  routes_changed();
  std::erase_if(host_routes_, [&](const auto& kv) { return kv.second.link == l; });
  std::erase_if(net_routes_, [&](const Route& r) { return r.link == l; });
  netif_poll(&l->nif);  // hand queued loopback packets to lwIP before the netif goes
  removing_link = true;
  netif_remove(&l->nif);  // resets pcbs bound to its address, drops its ARP entries
  removing_link = false;
  if (l->wait_fd >= 0) {
    for (TransportImpl* t : transports_) t->link_fd(l->wait_fd, false);
  }
  if (l->dirty) l->port->tx_flush();  // flush_links only sees live links
  l->port->tx_discard();              // what a full ring kept: no frame lent past here
  l->dirty = false;
  l->removed = true;
  retired_.push_back(std::move(*it));
  links_.erase(it);
  update_fd_mode();
  sweep_retired();
  return 0;
}

void Stack::update_fd_mode() {
  bool all = !links_.empty();
  for (const auto& l : links_) all = all && l->wait_fd >= 0;
  fd_mode_.store(all, std::memory_order_relaxed);
}

void Stack::sweep_retired() {
  std::erase_if(retired_, [](const auto& l) { return l->held == 0; });
}

int Stack::add_route(in_addr dest, int prefix, int link_id, in_addr via) {
  if (prefix < 0 || prefix > 32) return -EINVAL;
  Link* l = find_link(link_id);
  if (l == nullptr) return -ENOENT;
  Route r;
  r.mask = prefix_mask(prefix);
  r.net = dest.s_addr & r.mask;
  r.prefix = prefix;
  r.link = l;
  ip4_addr_set_u32(&r.via, via.s_addr);
  routes_changed();
  if (prefix == 32) {
    host_routes_[r.net] = r;
    return 0;
  }
  std::erase_if(net_routes_, [&](const Route& o) { return o.net == r.net && o.prefix == prefix; });
  net_routes_.push_back(r);
  std::stable_sort(net_routes_.begin(), net_routes_.end(),
                   [](const Route& a, const Route& b) { return a.prefix > b.prefix; });
  return 0;
}

int Stack::remove_route(in_addr dest, int prefix) {
  if (prefix < 0 || prefix > 32) return -EINVAL;
  uint32_t mask = prefix_mask(prefix);
  uint32_t net = dest.s_addr & mask;
  routes_changed();
  if (prefix == 32) return host_routes_.erase(net) > 0 ? 0 : -ENOENT;
  size_t n = std::erase_if(net_routes_,
                           [&](const Route& r) { return r.net == net && r.prefix == prefix; });
  return n > 0 ? 0 : -ENOENT;
}

const Route* Stack::lookup(uint32_t dest) const {
  if (last_route_ != nullptr && last_dest_ == dest) return last_route_;
  const Route* found = nullptr;
  if (auto it = host_routes_.find(dest); it != host_routes_.end()) {
    found = &it->second;
  } else {
    for (const Route& r : net_routes_) {
      if ((dest & r.mask) == r.net) {
        found = &r;
        break;
      }
    }
  }
  last_dest_ = dest;
  last_route_ = found;
  return found;
}

struct netif* Stack::route(const ip4_addr_t* src, const ip4_addr_t* dest) {
  uint32_t d = ip4_addr_get_u32(dest);
  for (const auto& l : links_) {
    if (l->ip != d) continue;
    // To ourselves: the owning netif loops it back (ip4_output_if sees its
    // own address), unless a source bound to another of our link addresses
    // asks for a route: that is how two local addresses reach each other
    // over a link (tests joining two links of this stack with a pipe).
    uint32_t s = src == nullptr ? 0 : ip4_addr_get_u32(src);
    if (s == 0 || s == d || (ntohl(s) >> 24) == 127) {
      return netif_is_up(&l->nif) ? &l->nif : nullptr;
    }
    break;
  }
  const Route* r = lookup(d);
  if (r != nullptr && netif_is_up(&r->link->nif) &&
      (route_any_link_state || netif_is_link_up(&r->link->nif))) {
    return &r->link->nif;
  }
  return nullptr;
}

const ip4_addr_t* Stack::next_hop(struct netif* nif, const ip4_addr_t* dest) {
  const Route* r = lookup(ip4_addr_get_u32(dest));
  if (r == nullptr || &r->link->nif != nif) return nullptr;
  return ip4_addr_isany_val(r->via) ? dest : &r->via;
}

void Stack::flush_links() {
  if (!links_dirty_) return;  // every unlock of the process lock comes here
  links_dirty_ = false;
  for (const auto& l : links_) {
    if (l->dirty) {
      l->dirty = false;
      l->port->tx_flush();
    }
  }
}

void Stack::check_link_states() {
  for (const auto& l : links_) {
    bool up = l->port->link_up();
    if (up != static_cast<bool>(netif_is_link_up(&l->nif))) {
      if (up) {
        netif_set_link_up(&l->nif);
      } else {
        netif_set_link_down(&l->nif);
      }
    }
  }
}

LwipCounters Stack::counters() const {
  LwipCounters c = ctr;
  c.rx_frames_held = 0;
  for (const auto& l : links_) {
    c.rx_frames_held += l->held;
    const LinkCounters p = l->port->counters();
    c.port_rx_dropped += p.rx_dropped;
    c.port_tx_dropped += p.tx_dropped;
  }
  for (const auto& l : retired_) c.rx_frames_held += l->held;
  c.links = links_.size();
  c.routes = host_routes_.size() + net_routes_.size();
  // Refused inside lwIP: bad IP or TCP checksums (a corrupting link), bad lengths.
  c.rx_input_errors += uint64_t{lwip_stats.ip.chkerr} + lwip_stats.ip.lenerr +
                       lwip_stats.tcp.chkerr + lwip_stats.tcp.lenerr;
  return c;
}

int Stack::link_counters(int id, LinkCounters* out) const {
  Link* l = find_link(id);
  if (l == nullptr || out == nullptr) return -ENOENT;
  *out = l->port->counters();
  return 0;
}

}  // namespace softrdma::net::lwip_impl

// ---------------------------------------------------------------------------
// lwIP hooks (lwip_hooks.h), called inside lwIP with the process lock held
// ---------------------------------------------------------------------------

extern "C" struct netif* softrdma_lwip_route(const ip4_addr_t* src, const ip4_addr_t* dest) {
  return softrdma::net::lwip_impl::g_stack->route(src, dest);
}

extern "C" const ip4_addr_t* softrdma_lwip_next_hop(struct netif* netif, const ip4_addr_t* dest) {
  return softrdma::net::lwip_impl::g_stack->next_hop(netif, dest);
}

// lwIP's RTO is its estimator's, whose floor is ~3 slow ticks (60 ms).
// Thousands of connections' operations queued in two processes make the
// round trip approach that, and the timer then fires on segments in flight
// and resends whole windows. On a link that loses nothing the floor is
// Linux's TCP_RTO_MIN (200 ms); on one that may lose frames, lwIP's own,
// which recovers a lost lone segment sooner.
// A pcb's arg is its Conn from ESTABLISHED on (its listener's before).
extern "C" s16_t softrdma_lwip_rto(const struct tcp_pcb* pcb) {
  constexpr int kLosslessFloorTicks = 200 / TCP_SLOW_INTERVAL;
  const int rto = (pcb->sa >> 3) + pcb->sv;
  const auto* c = static_cast<const softrdma::net::lwip_impl::Conn*>(pcb->callback_arg);
  if (pcb->state == SYN_RCVD || c == nullptr || !c->lossless_) return static_cast<s16_t>(rto);
  return static_cast<s16_t>(std::max(rto, kLosslessFloorTicks));
}
