// Glue between the engine, the lwIP stack and DPDK ports. Includes neither
// DPDK nor lwIP headers: ports come from open_dpdk_port(), the stack from
// LwipStack, each behind its own DPDK- or lwIP-free header.
#include "stack/net/dpdk_transport.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>
#include <mutex>
#include <optional>
#include <thread>

#include "stack/common/pass_clock.h"
#include "stack/common/settings.h"
#include "stack/net/dpdk/port.h"
#include "stack/net/fault_link.h"
#include "stack/net/host_path.h"
#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/rendezvous.h"

namespace softrdma::net {

namespace {

// FI_SOFTRDMA_DEBUG=1: the mesh says what it does, on stderr.
bool debug() {
  static const bool on = settings::get_bool(settings::Id::kDebug);
  return on;
}

in_addr netmask_of(int prefix) {
  return in_addr{htonl(prefix <= 0 ? 0 : ~uint32_t{0} << (32 - prefix))};
}

std::string mac_string(const uint8_t m[6]) {
  char b[18];
  std::snprintf(b, sizeof(b), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return b;
}

// The interface that owns this process's virtual address in the embedded
// mesh: it carries no frames (traffic to ourselves loops inside lwIP, to
// others goes over their links), it only makes the address local.
class SelfLink : public FrameLink {
 public:
  explicit SelfLink(pid_t pid) : name_("self") { Rendezvous::mac_of(pid, mac_); }
  int rx_burst(RxFrame*, int) override { return 0; }
  void rx_release(void*) override {}
  uint8_t* tx_begin(uint32_t, void**) override { return nullptr; }
  void tx_commit(void*, uint32_t) override {}
  void tx_flush() override {}
  const uint8_t* mac() const override { return mac_; }
  uint32_t mtu() const override { return 9000; }  // lwIP's loopback: the mesh's MSS
  bool link_up() const override { return true; }
  bool trusted_checksums() const override { return true; }
  const std::string& name() const override { return name_; }
  LinkCounters counters() const override { return {}; }

 private:
  std::string name_;
  uint8_t mac_[6];
};

// lwIP's handle on a mesh port that the Mesh keeps open: taking the link
// out of lwIP stops the polling without closing the port (Mesh::retire).
// It changes no frame, so lent ones pass.
class KeptLink final : public ForwardingLink {
 public:
  explicit KeptLink(std::shared_ptr<FrameLink> port)
      : ForwardingLink(port.get(), /*lend_through=*/true), port_(std::move(port)) {}

 private:
  std::shared_ptr<FrameLink> port_;
};

// The embedded mesh: process-wide, shared by every engine of the process.
//
// Closing a link is a handshake (BYE, BYEACK through the rendezvous): DPDK's
// memif unmaps a link's rings on its interrupt thread when the far end
// closes, while this process may be in the middle of a burst on them, so
// the far end first stops polling its port, and closes it only once ours is
// gone. A process says BYE to every peer when it exits.
class Mesh {
 public:
  static Mesh* get(uint32_t mtu) {
    static Mesh* m = [mtu] {
      auto* mesh = new Mesh(mtu);
      if (!mesh->ok_) return static_cast<Mesh*>(nullptr);
      instance_ = mesh;
      std::atexit([] { instance_->say_goodbye(); });
      return mesh;
    }();
    return m;
  }

  in_addr self() const { return rv_.self(); }

  // Who serves ip:port, as a virtual address; else -errno (Rendezvous::resolve).
  int resolve(in_addr ip, uint16_t port, in_addr* out) {
    std::lock_guard g(mu_);
    pid_t pid = 0;
    if (int rc = rv_.resolve(ip, port, &pid); rc < 0) return rc;
    *out = Rendezvous::address_of(pid);
    return 0;
  }

  // A link to pid, up and routed, within the deadline (else -ETIMEDOUT).
  int ensure_link(pid_t pid) {
    std::lock_guard g(mu_);
    if (pid == rv_.pid()) return 0;  // ourselves: lwIP loops it back
    if (auto it = links_.find(pid); it == links_.end()) {
      int rc = pid > rv_.pid() ? open_server(pid) : rv_.send_serve(pid);
      if (rc < 0) return rc;
    } else if (pid > rv_.pid() && !it->second.port->link_up()) {
      rv_.send_link(pid, rv_.link_name(pid));  // the peer's last attach may have failed
    }
    // Generous: a loaded host may be slow to run the peer's interrupt thread.
    auto end = std::chrono::steady_clock::now() + kLinkUpTimeout;
    for (;;) {
      serve_locked();  // the peer's LINK answers our SERVE; crossed requests
      auto it = links_.find(pid);
      if (it != links_.end() && it->second.port->link_up()) {
        LwipStack::get().sync_link_states();  // lwIP routes over it from now
        return 0;
      }
      if (std::chrono::steady_clock::now() > end) {
        if (debug())
          std::fprintf(stderr, "softrdma[%d]: link to %d not up in time (%s)\n", rv_.pid(), pid,
                       it == links_.end() ? "no link" : "link down");
        return -ETIMEDOUT;  // the peer lives: fi_connect asks again (prov/ep.cc)
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void serve() {
    std::unique_lock g(mu_, std::try_to_lock);
    if (g.owns_lock()) serve_locked();
  }

  int publish(uint16_t* port) {
    std::lock_guard g(mu_);
    return rv_.reserve_and_publish(port);
  }
  void withdraw(uint16_t port) {
    std::lock_guard g(mu_);
    rv_.withdraw(port);
  }

 private:
  static constexpr auto kLinkUpTimeout = std::chrono::seconds(10);
  static constexpr auto kGoodbyeTimeout = std::chrono::milliseconds(500);
  static constexpr auto kReapInterval = std::chrono::milliseconds(500);
  // 256 descriptors per memif ring instead of DPDK's 1024: a link's shared
  // region (a jumbo buffer per descriptor) shrinks from 18.6 to 4.7 MB, and
  // populating it at link-up was most of a new connection's set-up (first
  // round trip of an ofi_rxm pair 44-57 -> 33-36 ms; tcp;ofi_rxm 20 ms).
  // 1 MiB transfers were no slower (fi_pingpong -e msg/rdm, srdma_perf).
  static constexpr int kRingLog2 = 8;

  struct Link {
    std::shared_ptr<FrameLink> port;  // polled by lwIP through a KeptLink
    int id;
  };
  static inline Mesh* instance_ = nullptr;

  explicit Mesh(uint32_t mtu) : mtu_(mtu) {
    if (!rv_.ok()) {
      std::fprintf(stderr, "softrdma: no rendezvous socket for the memif mesh\n");
      return;
    }
    int id = LwipStack::get().add_link(std::make_unique<SelfLink>(rv_.pid()), rv_.self(),
                                       in_addr{htonl(~uint32_t{0})}, in_addr{});
    ok_ = id >= 0;
    // DPDK now, not when a peer is waiting for the first link.
    PortOptions o;
    o.mtu = mtu_;
    std::string err;
    if (ok_ && !dpdk_prepare(o, &err)) std::fprintf(stderr, "softrdma: DPDK: %s\n", err.c_str());
    if (ok_) open_anchor();  // now too: its listener is part of the baseline
  }

  void serve_locked() {
    Rendezvous::Request r;
    while (rv_.next_request(&r)) {
      if (r.kind == Rendezvous::Request::Kind::kBye) {
        forget(r.peer);
        rv_.send_bye_ack(r.peer);
        continue;
      }
      if (r.kind == Rendezvous::Request::Kind::kByeAck) {
        awaiting_bye_ack_.erase(r.peer);
        continue;
      }
      if (exiting_) continue;
      if (auto it = links_.find(r.peer); it != links_.end()) {
        // Asked again while our server end waits: the peer's attach failed
        // (a slow start on a loaded host). Tell it where to attach again.
        if (r.kind == Rendezvous::Request::Kind::kServe && r.peer > rv_.pid() &&
            !it->second.port->link_up())
          rv_.send_link(r.peer, rv_.link_name(r.peer));
        continue;
      }
      if (r.kind == Rendezvous::Request::Kind::kServe) {
        if (r.peer > rv_.pid()) open_server(r.peer);
      } else {
        attach(r.peer, r.name);
      }
    }
    if (!parked_.empty()) close_parked();
    reap_dead_peers();
  }

  // A peer killed outright says no BYE and its TCP sends no RST: its links
  // would stay open (descriptors, shared memory) and its connections would
  // wait out TCP's timeouts. Twice a second, a link that is down to a
  // process that no longer exists is forgotten and closed.
  void reap_dead_peers() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_reap_) return;
    next_reap_ = now + kReapInterval;
    std::vector<pid_t> dead;
    for (const auto& [peer, link] : links_) {
      if (!link.port->link_up() && !Rendezvous::alive(peer)) dead.push_back(peer);
    }
    for (pid_t peer : dead) forget(peer);
    if (!dead.empty()) close_parked();
  }

  // A peer that exits (BYE) or died: what it left open is reset, as the
  // kernel resets a dead local process's sockets, and its link retired.
  void forget(pid_t peer) {
    const int n = LwipStack::get().reset_connections_to(Rendezvous::address_of(peer));
    if (debug())
      std::fprintf(stderr, "softrdma[%d]: peer %d is gone: %d connections reset\n", rv_.pid(), peer,
                   n);
    retire(peer);
  }

  // Stops polling the link to peer; its port stays open, parked, until the
  // peer has closed its end (or is gone), so the peer never races our bursts.
  void retire(pid_t peer) {
    auto it = links_.find(peer);
    if (it == links_.end()) return;
    LwipStack::get().remove_link(it->second.id);
    parked_.emplace_back(peer, std::move(it->second.port));
    links_.erase(it);
  }
  void close_parked() {
    std::erase_if(parked_, [](const auto& p) {
      return !p.second->link_up() || !Rendezvous::alive(p.first);
    });
  }

  // At exit: BYE to every peer, and a bounded wait for their BYEACKs (a
  // peer that does not poll does not burst either).
  void say_goodbye() {
    std::unique_lock g(mu_, std::defer_lock);
    const auto end = std::chrono::steady_clock::now() + kGoodbyeTimeout;
    while (!g.try_lock()) {
      if (std::chrono::steady_clock::now() > end) return;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    exiting_ = true;
    for (const auto& [peer, link] : links_) {
      if (rv_.send_bye(peer) == 0) awaiting_bye_ack_.insert(peer);
    }
    while (!awaiting_bye_ack_.empty() && std::chrono::steady_clock::now() < end) {
      serve_locked();
      std::erase_if(awaiting_bye_ack_, [](pid_t p) { return !Rendezvous::alive(p); });
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  // memif devargs for our end of the link with peer: the socket is a file in
  // the private run directory, which only this user's processes can reach.
  std::string devargs(pid_t peer, bool server) {
    return memif_devargs(rv_.link_socket(peer), rv_.link_id(peer), server);
  }
  std::string memif_devargs(const std::string& socket, uint32_t id, bool server) {
    uint8_t mac[6];
    Rendezvous::mac_of(rv_.pid(), mac);
    return "net_memif" + std::to_string(next_vdev_++) + ",role=" + (server ? "server" : "client") +
           ",socket=" + socket + ",socket-abstract=no,id=" + std::to_string(id) +
           ",mac=" + mac_string(mac) + ",rsize=" + std::to_string(kRingLog2);
  }

  // The lower pid of a pair serves the memif; the peer attaches as client.
  int open_server(pid_t peer) {
    if (int rc = add(peer, devargs(peer, true)); rc < 0) return rc;
    return rv_.send_link(peer, rv_.link_name(peer));
  }

  // All our server ends share one memif socket. DPDK 22.11 frees a socket's
  // state with its last device but leaves the listener registered with the
  // interrupt thread, which costs a descriptor per socket ever closed
  // (memif_quirks.cc, retire_memif_listener): one per peer process for a long-lived
  // server. An idle device with id 0 (pids are never 0), never connected or
  // polled, keeps the socket for the process's lifetime instead.
  void open_anchor() {
    PortOptions o;
    o.devargs = memif_devargs(rv_.link_socket(rv_.pid()), 0, true);
    o.mtu = mtu_;
    std::string err;
    anchor_ = open_dpdk_port(o, &err);
    if (!anchor_) std::fprintf(stderr, "softrdma: memif socket anchor: %s\n", err.c_str());
  }

  int attach(pid_t peer, const std::string& name) {
    if (name != rv_.link_name(peer)) return -EINVAL;  // not a link of ours
    return add(peer, devargs(peer, false));
  }

  // Opens the port and routes the peer's address over it, with a static ARP
  // entry: the peer answers ARP only for its link address.
  int add(pid_t peer, const std::string& args) {
    if (debug()) std::fprintf(stderr, "softrdma[%d]: link to %d: %s\n", rv_.pid(), peer, args.c_str());
    PortOptions o;
    o.devargs = args;
    o.mtu = mtu_;
    // The peer drains our ring only when it reads, and it may be waiting on
    // its own full ring to us: leave refused frames queued, never spin.
    o.tx_retry_us = 0;
    std::string err;
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<FrameLink> port = open_dpdk_port(o, &err);
    if (!port) {
      std::fprintf(stderr, "softrdma: memif link to %d: %s\n", peer, err.c_str());
      return -EHOSTUNREACH;
    }
    if (debug())
      std::fprintf(stderr, "softrdma[%d]: link to %d opened in %.1f ms\n", rv_.pid(), peer,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::shared_ptr<FrameLink> shared = with_env_decorators(std::move(port));
    // Link addresses only need to differ within this process (100.64/10).
    in_addr link_ip{htonl(0x64400000u + ++link_seq_)};
    LwipLinkOptions lo;
    // memif is shared memory between two SoftRDMA stacks: checksums only
    // when a fault link corrupts frames on purpose (kAuto asks the link).
    lo.checksums = LinkChecksums::kAuto;
    int id = LwipStack::get().add_link(std::make_unique<KeptLink>(shared), link_ip,
                                       in_addr{htonl(~uint32_t{0})}, in_addr{}, lo);
    if (id < 0) return id;
    in_addr dest = Rendezvous::address_of(peer);
    uint8_t mac[6];
    Rendezvous::mac_of(peer, mac);
    if (int rc = LwipStack::get().add_route(dest, 32, id); rc < 0) return rc;
    if (int rc = LwipStack::get().add_neighbor(dest, mac); rc < 0) return rc;
    links_[peer] = Link{std::move(shared), id};
    return 0;
  }

  std::mutex mu_;
  Rendezvous rv_;
  uint32_t mtu_;
  bool ok_ = false;
  std::map<pid_t, Link> links_;
  std::unique_ptr<FrameLink> anchor_;  // see open_anchor
  std::vector<std::pair<pid_t, std::shared_ptr<FrameLink>>> parked_;  // retired, still open
  std::set<pid_t> awaiting_bye_ack_;
  bool exiting_ = false;
  std::chrono::steady_clock::time_point next_reap_{};
  uint32_t link_seq_ = 0;
  int next_vdev_ = 0;
};

// Port mode: one configured device, added once per process.
bool open_configured_port(const DpdkTransportConfig& cfg) {
  static const bool ok = [&cfg] {
    PortOptions o;
    o.devargs = cfg.devargs;
    o.mtu = cfg.mtu ? cfg.mtu : 1500;
    o.netns = cfg.netns;
    std::string err;
    auto port = open_dpdk_port(o, &err);
    if (!port) {
      std::fprintf(stderr, "softrdma: cannot open %s: %s\n", cfg.devargs.c_str(), err.c_str());
      return false;
    }
    LwipLinkOptions lo;
    lo.default_link = true;
    int id = LwipStack::get().add_link(with_env_decorators(std::move(port)), cfg.addr,
                                       netmask_of(cfg.prefix), cfg.gateway, lo);
    return id >= 0;
  }();
  return ok;
}

// The engine's transport: lwIP's, plus the mesh's addressing where needed.
class DpdkTransport : public Transport {
 public:
  DpdkTransport(std::unique_ptr<Transport> inner, Mesh* mesh, in_addr self)
      : inner_(std::move(inner)), mesh_(mesh), self_(self) {}
  // A port the user configured: its settings, for unreachable_why.
  DpdkTransport(std::unique_ptr<Transport> inner, const DpdkTransportConfig& port)
      : DpdkTransport(std::move(inner), nullptr, port.addr) {
    port_ = port;
  }
  ~DpdkTransport() override {
    if (mesh_)
      for (auto& [l, port] : published_) mesh_->withdraw(port);
  }

  const char* name() const override { return "dpdk"; }

  // Listeners bind this process's own address; in the mesh their port is
  // reserved host-wide and published, so 127.0.0.1:port finds them. A mesh
  // listener also answers on the host's own address of the interfaces it
  // names (host_listen_ifaces): lwIP then listens on every address.
  int listen(const sockaddr_in& addr, int backlog, Listener** out) override {
    sockaddr_in a = addr;
    a.sin_addr = self_;
    uint16_t port = ntohs(addr.sin_port);
    std::vector<HostClaim> claims;
    if (mesh_) {
      if (int rc = mesh_->publish(&port); rc < 0) return rc;
      a.sin_port = htons(port);
      if (int rc = claim_host_ports(addr.sin_addr, port, &claims); rc < 0) {
        mesh_->withdraw(port);
        return rc;
      }
      if (!claims.empty()) a.sin_addr.s_addr = htonl(INADDR_ANY);
    }
    int rc = inner_->listen(a, backlog, out);
    if (mesh_) {
      if (rc < 0) {
        mesh_->withdraw(port);
        for (const HostClaim& c : claims) HostPath::release(c);
      } else {
        published_[*out] = port;
        if (!claims.empty()) host_listeners_[*out] = std::move(claims);
      }
    }
    return rc;
  }

  sockaddr_in listen_addr(Listener* l) const override {
    sockaddr_in a = l->addr();
    if (auto it = host_listeners_.find(l); it != host_listeners_.end())
      a.sin_addr = it->second.front().addr;  // the host's address, as peers name it
    return a;
  }

  void close_listener(Listener* l) override {
    if (auto it = published_.find(l); it != published_.end()) {
      mesh_->withdraw(it->second);
      published_.erase(it);
    }
    if (auto it = host_listeners_.find(l); it != host_listeners_.end()) {
      for (const HostClaim& c : it->second) HostPath::release(c);
      host_listeners_.erase(it);
    }
    inner_->close_listener(l);
  }

  // On the mesh a peer on this host is reached over its memif link; one
  // elsewhere over the host path on the interface the kernel's route picks.
  int connect(const sockaddr_in& peer, StreamConn** out) override {
    sockaddr_in a = peer;
    if (mesh_) {
      int rc = mesh_->resolve(peer.sin_addr, ntohs(peer.sin_port), &a.sin_addr);
      if (rc == -ENETUNREACH) return host_connect(peer, out);
      if (rc < 0) {
        if (debug()) {
          char ip[INET_ADDRSTRLEN];
          ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
          std::fprintf(stderr, "softrdma: connect to %s:%u: %s\n", ip, ntohs(peer.sin_port),
                       std::strerror(-rc));
        }
        return rc;
      }
      if (rc = mesh_->ensure_link(Rendezvous::pid_of(a.sin_addr)); rc < 0) return rc;
    }
    return inner_->connect(a, out);
  }

  void release(StreamConn* c) override {
    if (auto it = host_conns_.find(c); it != host_conns_.end()) {
      HostPath::release(it->second);
      host_conns_.erase(it);
    }
    inner_->release(c);
  }


  int poll(TransportEvents& ev, int timeout_us) override {
    // Peers asking for links: a recv() on the rendezvous socket, so once a
    // millisecond, not on every poll (that syscall would sit in ping-pong
    // round trips; at 50 us it still ran 20,000 times a second).
    if (mesh_) {
      const int64_t now = pass_clock::now_ns();  // the inner poll refreshes it
      if (now - last_serve_ >= kServeIntervalNs) {
        last_serve_ = now;
        mesh_->serve();
      }
      if (now - last_sweep_ >= kSweepIntervalNs) {
        last_sweep_ = now;
        HostPath::sweep();  // host ports lwIP has finished with
      }
    }
    return inner_->poll(ev, timeout_us);
  }

  void wake() override { inner_->wake(); }
  void add_counters(Counters* c) const override {
    const LwipCounters l = LwipStack::get().counters();
    c->rx_packets = l.rx_frames;
    c->rx_bytes = l.rx_bytes;
    c->tx_packets = l.tx_frames;
    c->tx_bytes = l.tx_bytes;
    c->tx_lent = l.tx_lent;
    c->rx_dropped = l.port_rx_dropped;
    c->tx_dropped = l.port_tx_dropped;
    c->rx_errors = l.rx_input_errors;
    c->tcp_retransmits = l.tcp_retransmits;
    c->tcp_retransmit_bytes = l.tcp_retransmit_bytes;
    c->rx_frames_held = l.rx_frames_held;
    const FaultCounters f = fault_totals();
    c->faults_dropped = f.dropped;
    c->faults_duplicated = f.duplicated;
    c->faults_reordered = f.reordered;
    c->faults_corrupted = f.corrupted;
    c->faults_reset = f.reset;
    const MbufPoolInfo pool = dpdk_mbuf_pool_info();
    c->mbufs_total = pool.size;
    c->mbufs_in_use = pool.size - pool.available;
  }
  int wait_fd() const override { return inner_->wait_fd(); }
  void set_receiver(TransportEvents* owner) override { inner_->set_receiver(owner); }

 private:
  // The interfaces a mesh listener on ip also answers on, among those marked
  // for softrdma (host_path_ifaces): all of them for a wildcard or loopback
  // listener (what a user who names nothing gets), the one that has ip for
  // a listener on a host address. Unmarked, a host keeps the mesh alone.
  static std::vector<HostIface> host_listen_ifaces(in_addr ip, bool* named) {
    *named = ip.s_addr != htonl(INADDR_ANY) && (ntohl(ip.s_addr) >> 24) != 127;
    std::vector<HostIface> out = host_path_ifaces();
    if (*named) std::erase_if(out, [ip](const HostIface& h) { return h.addr.s_addr != ip.s_addr; });
    return out;
  }

  // Opens the host path on those interfaces and holds port there. A named
  // address fails the listen when its interface cannot be served; marked
  // interfaces that cannot are reported and skipped.
  int claim_host_ports(in_addr ip, uint16_t port, std::vector<HostClaim>* claims) {
    bool named = false;
    for (const HostIface& h : host_listen_ifaces(ip, &named)) {
      std::string err;
      HostClaim c;
      int rc = HostPath::open(h, &err);
      if (rc == 0) rc = HostPath::claim(h, port, &c, &err);
      if (rc == 0) {
        claims->push_back(c);
        continue;
      }
      std::fprintf(stderr, "softrdma: listening on %s port %u: %s\n", h.name.c_str(), port,
                   err.c_str());
      if (named) {
        for (const HostClaim& k : *claims) HostPath::release(k);
        claims->clear();
        return rc;
      }
    }
    return 0;
  }

  // A peer on another host: over the host path on the kernel's route to it,
  // from a port held in the kernel on that interface's address.
  int host_connect(const sockaddr_in& peer, StreamConn** out) {
    std::string err;
    std::optional<HostIface> h = host_route_to(peer.sin_addr, &err);
    if (h && !host_path_allowed(h->name)) {
      err = h->name + " is not marked for softrdma's host path (ip link set dev " + h->name +
            " alias softrdma)";
      h.reset();
    }
    HostClaim c;
    int rc = h ? HostPath::open(*h, &err) : -ENETUNREACH;
    if (rc == 0) rc = HostPath::claim(*h, 0, &c, &err);
    if (rc == 0 && h->gateway.s_addr != 0) rc = host_route(*h, peer.sin_addr, &err);
    if (rc < 0) {
      char ip[INET_ADDRSTRLEN];
      ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
      std::fprintf(stderr, "softrdma: connect to %s:%u: %s\n", ip, ntohs(peer.sin_port),
                   err.c_str());
      if (c.port) HostPath::release(c);
      return rc;
    }
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr = c.addr;
    local.sin_port = htons(c.port);
    rc = inner_->connect_from(local, peer, out);
    if (rc < 0) {
      HostPath::release(c);
      return rc;
    }
    host_conns_[*out] = c;
    return 0;
  }

  // On a configured port, routing is the user's settings alone: the
  // address's network, the gateway, and the neighbours on the link.
  std::string unreachable_why(int err) const override {
    if (!port_) return {};
    using settings::Id;
    char addr[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &port_->addr, addr, sizeof(addr));
    ::inet_ntop(AF_INET, &port_->gateway, gw, sizeof(gw));
    const std::string own = settings::env_name(settings::setting(Id::kAddr)) + "=" + addr + "/" +
                            std::to_string(port_->prefix);
    const std::string gw_name = settings::env_name(settings::setting(Id::kGateway));
    if (err == -ENETUNREACH) {
      return "the address is outside " + own + " and " +
             (port_->gateway.s_addr ? gw_name + "=" + gw + " is not on it"
                                    : gw_name + " is not set");
    }
    if (err == -EHOSTUNREACH) {
      return "no neighbour answered on the port " +
             settings::env_name(settings::setting(Id::kDevargs)) + "=" + port_->devargs +
             " (" + own + ")";
    }
    return {};
  }

  static int host_route(const HostIface& h, in_addr dest, std::string* err) {
    int rc = HostPath::route_via_gateway(h, dest);
    if (rc < 0) *err = "route via the gateway of " + h.name + ": " + std::strerror(-rc);
    return rc;
  }

  static constexpr int64_t kServeIntervalNs = 1'000'000;
  static constexpr int64_t kSweepIntervalNs = 100'000'000;
  int64_t last_serve_ = 0;
  int64_t last_sweep_ = 0;
  std::unique_ptr<Transport> inner_;
  Mesh* mesh_;
  in_addr self_;
  std::map<Listener*, uint16_t> published_;
  std::map<Listener*, std::vector<HostClaim>> host_listeners_;
  std::map<StreamConn*, HostClaim> host_conns_;
  std::optional<DpdkTransportConfig> port_;
};

}  // namespace

DpdkTransportConfig DpdkTransportConfig::from_env() {
  using settings::Id;
  DpdkTransportConfig c;
  c.devargs = settings::get_string(Id::kDevargs);
  const settings::Ipv4 addr = settings::get_ipv4(Id::kAddr);
  c.addr = addr.addr;
  if (addr.prefix >= 0) c.prefix = addr.prefix;
  c.gateway = settings::get_ipv4(Id::kGateway).addr;
  c.netns = settings::get_string(Id::kNetns);
  c.mtu = static_cast<uint32_t>(settings::get_int(Id::kMtu));  // 0 unless set
  return c;
}

std::unique_ptr<Transport> make_dpdk_transport(const DpdkTransportConfig& cfg) {
  if (!cfg.devargs.empty()) {
    if (!open_configured_port(cfg)) return nullptr;
    return std::make_unique<DpdkTransport>(make_lwip_transport({.source = cfg.addr}), cfg);
  }
  Mesh* mesh = Mesh::get(cfg.mtu ? cfg.mtu : 9000);
  if (!mesh) return nullptr;
  return std::make_unique<DpdkTransport>(make_lwip_transport({.source = mesh->self()}), mesh,
                                         mesh->self());
}

}  // namespace softrdma::net
