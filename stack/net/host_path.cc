#include "stack/net/host_path.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "stack/common/settings.h"
#include "stack/net/fault_link.h"
#include "stack/net/kernel_arp_link.h"
#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/nic_port.h"
#include "stack/net/port_reserve.h"
#include "stack/net/switch/switch_link.h"

namespace softrdma::net {

namespace {

// One interface's link into lwIP: the NIC opened here (a root process with
// no switch on the interface) or a session with the interface's
// softrdma-switch (everyone else).
struct Link {
  HostIface iface;
  int id = -1;
  std::unique_ptr<PortSteer> steer;
  std::unique_ptr<SwitchSession> sw;
};

std::mutex g_mu;
std::map<std::string, Link> g_links;
using ClaimKey = std::pair<std::string, uint16_t>;
std::map<ClaimKey, PortReservation> g_claims;  // empty reservations: the switch holds them
std::set<ClaimKey> g_released;  // held until lwIP is done with the port
// Ports still claimed when their interface's switch went (a listener's, or
// a connection's not yet released): held again once the switch is back.
struct Orphans {
  HostIface iface;
  std::set<uint16_t> ports;
};
std::map<std::string, Orphans> g_orphans;
std::chrono::steady_clock::time_point g_next_reattach{};
constexpr auto kReattachEvery = std::chrono::milliseconds(500);
// A re-attach runs inside a progress pass: a switch that is there but does
// not answer must not hold the pass for a control call's full wait.
constexpr int kReattachAnswerMs = 50;

in_addr netmask_of(int prefix) {
  return in_addr{htonl(prefix <= 0 ? 0 : ~uint32_t{0} << (32 - prefix))};
}

// The switch of a link has gone: its connections end now (-ENETDOWN); the
// ports still claimed wait as orphans for the switch to come back (sweep),
// and the next open attaches to it again.
void drop_dead_switch_links() {
  for (auto it = g_links.begin(); it != g_links.end();) {
    if (!it->second.sw || it->second.sw->alive()) {
      ++it;
      continue;
    }
    LwipStack::get().remove_link(it->second.id);
    for (const auto& [key, r] : g_claims) {
      if (key.first != it->first || g_released.count(key)) continue;
      Orphans& o = g_orphans[it->first];
      o.iface = it->second.iface;
      o.ports.insert(key.second);
    }
    std::erase_if(g_claims, [&](const auto& c) { return c.first.first == it->first; });
    std::erase_if(g_released, [&](const ClaimKey& k) { return k.first == it->first; });
    it = g_links.erase(it);
  }
}

// answer_ms: how long a switch may take to welcome us (SwitchSession::attach).
int open_locked(const HostIface& iface, std::string* error,
                int answer_ms = SwitchSession::kAnswerMs) {
  if (g_links.count(iface.name)) return 0;
  Link l;
  l.iface = iface;
  std::unique_ptr<FrameLink> port;
  LwipLinkOptions lo;
  lo.checksums = LinkChecksums::kFull;
  if (switch_serves(iface.name) || ::geteuid() != 0) {
    l.sw = SwitchSession::attach(iface.name, error, answer_ms);
    if (!l.sw) return -ENETUNREACH;
    port = l.sw->take_link();
    if (l.sw->tcp_offloaded()) lo.checksums = LinkChecksums::kTcpByLink;
  } else {
    const NicKind kind = settings::get_choice(settings::Id::kNic) == 0 ? NicKind::kAfXdp
                                                                       : NicKind::kPacket;
    NicPort nic;
    if (int rc = open_nic_port(iface, kind, &nic, error); rc < 0) return rc;
    port = std::move(nic.port);
    l.steer = std::move(nic.steer);
    // A wire: frames can be damaged. The packet socket's TCP checksums
    // are the kernel's or the NIC's.
    if (kind == NicKind::kPacket) lo.checksums = LinkChecksums::kTcpByLink;
  }
  l.id = LwipStack::get().add_link(
      with_kernel_arp(with_env_decorators(std::move(port)), iface.name), iface.addr,
      netmask_of(iface.prefix), iface.gateway, lo);
  if (l.id < 0) {
    *error = iface.name + ": lwIP refused the link: " + std::strerror(-l.id);
    return l.id;
  }
  LwipStack::get().sync_link_states();
  g_links.emplace(iface.name, std::move(l));
  return 0;
}

int claim_locked(const HostIface& iface, uint16_t port, HostClaim* out, std::string* error) {
  auto it = g_links.find(iface.name);
  if (it == g_links.end()) {
    *error = "no softrdma port on " + iface.name;
    return -ENODEV;
  }
  if (port != 0 && g_released.erase({iface.name, port})) {  // ours still: use it again
    *out = HostClaim{iface.name, iface.addr, port};
    return 0;
  }
  char ip[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &iface.addr, ip, sizeof(ip));
  PortReservation r;
  if (it->second.sw) {
    uint16_t got = 0;
    if (int rc = it->second.sw->hold(port, &got, error); rc < 0) return rc;
    *out = HostClaim{iface.name, iface.addr, got};
    g_claims[{iface.name, got}] = std::move(r);
    return 0;
  }
  if (int rc = r.take(iface.addr, port); rc < 0) {
    *error = std::string("reserving TCP port ") + ip + ":" + std::to_string(port) +
             " in the kernel: " + std::strerror(-rc);
    return rc;
  }
  if (int rc = it->second.steer->add(r.port()); rc < 0) {
    *error = "XDP port map on " + iface.name + ": " + std::strerror(-rc);
    return rc;
  }
  *out = HostClaim{iface.name, iface.addr, r.port()};
  g_claims[{iface.name, r.port()}] = std::move(r);
  return 0;
}

// Attaches again to the switches orphans wait for, and holds their ports
// there: a listener of this process answers again after its switch restarted.
void reattach_orphans() {
  const auto now = std::chrono::steady_clock::now();
  if (g_orphans.empty() || now < g_next_reattach) return;
  g_next_reattach = now + kReattachEvery;
  for (auto it = g_orphans.begin(); it != g_orphans.end();) {
    std::string err;
    if (open_locked(it->second.iface, &err, kReattachAnswerMs) < 0) {  // not back yet
      ++it;
      continue;
    }
    for (uint16_t port : it->second.ports) {
      HostClaim c;
      if (claim_locked(it->second.iface, port, &c, &err) < 0)
        std::fprintf(stderr, "softrdma: %s: softrdma-switch is back, but port %u is lost: %s\n",
                     it->first.c_str(), port, err.c_str());
    }
    it = g_orphans.erase(it);
  }
}

}  // namespace

int HostPath::open(const HostIface& iface, std::string* error) {
  std::lock_guard g(g_mu);
  drop_dead_switch_links();
  return open_locked(iface, error);
}

int HostPath::claim(const HostIface& iface, uint16_t port, HostClaim* out, std::string* error) {
  std::lock_guard g(g_mu);
  return claim_locked(iface, port, out, error);
}

void HostPath::release(const HostClaim& c) {
  std::lock_guard g(g_mu);
  if (g_claims.count({c.iface, c.port})) g_released.insert({c.iface, c.port});
  if (auto o = g_orphans.find(c.iface); o != g_orphans.end()) {
    o->second.ports.erase(c.port);
    if (o->second.ports.empty()) g_orphans.erase(o);
  }
}

void HostPath::sweep() {
  std::lock_guard g(g_mu);
  drop_dead_switch_links();
  reattach_orphans();
  for (auto it = g_released.begin(); it != g_released.end();) {
    if (LwipStack::get().local_port_in_use(it->second)) {
      ++it;
      continue;
    }
    if (auto l = g_links.find(it->first); l != g_links.end()) {
      if (l->second.sw) l->second.sw->let_go(it->second);
      else l->second.steer->remove(it->second);
    }
    g_claims.erase(*it);
    it = g_released.erase(it);
  }
}

int HostPath::route_via_gateway(const HostIface& iface, in_addr dest) {
  std::lock_guard g(g_mu);
  auto it = g_links.find(iface.name);
  if (it == g_links.end()) return -ENODEV;
  return LwipStack::get().add_route(dest, 32, it->second.id, iface.gateway);
}

}  // namespace softrdma::net
