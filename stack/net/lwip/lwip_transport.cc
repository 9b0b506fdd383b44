// lwIP raw-API transport (see lwip_transport.h for the contract).
//
// Layout:
//  - Stack: the process-wide singleton. Owns lwIP, the links (netifs over
//    FrameLinks), the route table, the counters and the one mutex. run_io()
//    is the engine of the whole thing: one RX burst per link into lwIP,
//    lwIP's timers, the loopback queues, and deferred per-connection work.
//  - TransportImpl: one per Engine. Owns its listeners and connections and a
//    FIFO of events that lwIP callbacks (run by any transport's poll, on any
//    thread) queue for it; only its own poll() delivers them, one at a time
//    and without the mutex, so a callback may release anything.
//  - Conn: a connection. Received pbuf chains are kept as lwIP hands them
//    over (frames stay in the link's buffers) and lent out by rx_peek.
//
// Every lwIP call and every field below is guarded by Stack::mu; the Locked
// guard also pushes frames the critical section queued on links (tx_flush)
// before it unlocks, so batching lasts exactly one critical section.
#include "stack/net/lwip/lwip_transport.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "lwip/etharp.h"
#include "lwip/init.h"
#include "lwip/ip4.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/stats.h"
#include "lwip/sys.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "lwip_hooks.h"
#include "netif/ethernet.h"

#include "stack/common/pass_clock.h"
#include "stack/common/ring.h"

namespace softrdma::net {
namespace {

constexpr int kRxBurst = 32;
// tcp_write takes a u16 length.
constexpr size_t kMaxWrite = 0xFFFF;
// Gather lists up to this size are joined into one tcp_write.
constexpr size_t kJoinMax = 256;
// Queue slots kept back in tx_space(): a send may start a partial segment
// and chain a pbuf per gather piece before the byte count runs out.
constexpr size_t kQueueSlack = 8;
// SYN retransmission timeout (RFC 6298's 1 s) instead of lwIP's fixed 3 s;
// set on active opens before the SYN goes out.
constexpr int kInitialRtoMs = 1000;
// lwIP 2.1.3's tcp_write walks the whole unsent queue to find its tail (its
// own "@todo: keep last_unsent"), so a long unsent queue makes every small
// send cost O(queue). Segments leave that queue for the wire as soon as the
// peer's window allows, at the next tcp_output: once kUnsentFlush bytes
// wait, push them at once, and never let more than kLwipMaxTxSpace wait
// (only a full peer window keeps them there, and then the receiver is the
// bottleneck anyway).
constexpr size_t kUnsentFlush = 64 << 10;
constexpr size_t kUnsentCap = kLwipMaxTxSpace;
// Below this much space a send may have to wait: the next ACK then reports
// on_writable.
constexpr size_t kWritableMark = kUnsentCap / 2;

class Stack;
class TransportImpl;
class ListenerImpl;
Stack* g_stack = nullptr;  // set once by Stack's constructor; the hooks use it

sockaddr_in make_sockaddr(uint32_t ip_be, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = ip_be;
  return a;
}

// ---------------------------------------------------------------------------
// Links and routes
// ---------------------------------------------------------------------------

struct Link {
  int id = 0;
  std::unique_ptr<FrameLink> port;
  struct netif nif {};
  uint32_t ip = 0;  // network byte order
  uint16_t checksum_flags = NETIF_CHECKSUM_ENABLE_ALL;
  int wait_fd = -1;
  bool dirty = false;    // frames committed since the last tx_flush
  bool removed = false;  // netif gone; waiting for lent frames to return
  uint64_t held = 0;     // RX frames lent to lwIP or to an application
};

// Lives in RxFrame::priv, inside the frame's own buffer: wrapping a frame as
// a pbuf allocates nothing, and freeing the pbuf gives the frame back.
struct RxPbuf {
  struct pbuf_custom pc;
  Link* link;
  void* handle;
};
static_assert(sizeof(RxPbuf) <= kFramePrivSize, "pbuf_custom must fit the frame's scratch area");

// lwippools.h's size classes must hold one full segment of each MSS with
// its headroom (a PBUF_TRANSPORT pbuf), else every segment falls through to
// the next class or fails.
constexpr size_t kPbufOverhead =
    LWIP_MEM_ALIGN_SIZE(LWIP_MEM_ALIGN_SIZE(sizeof(struct pbuf)) + PBUF_TRANSPORT_HLEN +
                        PBUF_IP_HLEN + PBUF_LINK_HLEN + PBUF_LINK_ENCAPSULATION_HLEN);
static_assert(kPbufOverhead + LWIP_MEM_ALIGN_SIZE(1460) <= 1544, "lwippools.h: 1544 class");
static_assert(kPbufOverhead + LWIP_MEM_ALIGN_SIZE(TCP_MSS) <= 9040, "lwippools.h: 9040 class");
// tcp_init() seeds the last ephemeral port from LWIP_RAND(); every seed must
// leave tcp_new_port() a first increment that stays in range (lwipopts.h).
static_assert(TCP_ENSURE_LOCAL_PORT_RANGE(0xffffffffu) < TCP_LOCAL_PORT_RANGE_END &&
                  TCP_ENSURE_LOCAL_PORT_RANGE(0xffffu) < TCP_LOCAL_PORT_RANGE_END &&
                  TCP_ENSURE_LOCAL_PORT_RANGE(0u) >= TCP_LOCAL_PORT_RANGE_START,
              "ephemeral port seed range");

struct Route {
  uint32_t net = 0, mask = 0;  // network byte order
  int prefix = 0;
  Link* link = nullptr;
  ip4_addr_t via{};  // 0: the destination itself is on the link
};

uint32_t prefix_mask(int prefix) { return prefix == 0 ? 0 : htonl(~uint32_t{0} << (32 - prefix)); }

// ---------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------

enum class EvKind : uint8_t { kAccept, kConnected, kReadable, kWritable, kClosed };

struct Event {
  EvKind kind;
  class Conn* conn;
  ListenerImpl* listener;
  int err;
};

class Conn final : public StreamConn {
 public:
  Conn(TransportImpl* transport, tcp_pcb* pcb, bool connecting);
  ~Conn() override;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  size_t rx_peek(RxView* views, size_t max) override;
  void rx_consume(size_t n) override;
  size_t tx_space() const override;
  int tx_send(const iovec* iov, int cnt, size_t total) override;
  void tx_flush() override;
  int write_locked(const iovec* iov, int cnt);
  size_t max_segment() const override { return max_segment_; }
  void close() override;
  void abort() override;
  sockaddr_in local_addr() const override { return local_; }
  sockaddr_in peer_addr() const override { return peer_; }

  // Everything below runs with the stack mutex held.
  void attach();  // arg and callbacks on pcb_
  void cache_endpoints();
  bool can_notify() const { return !released_ && !done_; }
  void notify(EvKind kind, int err = 0);
  void fail_now(int err);  // error found outside lwIP's callbacks
  size_t space_locked();
  void drain_parked();
  void try_shutdown();
  // Graceful end after release(); false: try again later (FIN not queued).
  bool try_finish();
  void free_rx();
  void detach_pcb();
  // Work the stack runs from poll: parked bytes, a deferred FIN, lingering.
  void run_work();

  static err_t lw_recv(void* arg, tcp_pcb* pcb, pbuf* p, err_t err);
  static err_t lw_sent(void* arg, tcp_pcb* pcb, u16_t len);
  static void lw_err(void* arg, err_t err);
  static err_t lw_connected(void* arg, tcp_pcb* pcb, err_t err);

  TransportImpl* transport_;
  tcp_pcb* pcb_;  // null once lwIP freed it or took it over
  bool connecting_;
  int err_ = 0;
  bool fin_rcvd_ = false;
  bool fin_sent_ = false;
  bool close_requested_ = false;
  bool done_ = false;  // terminal callback made, or aborted: no more callbacks
  bool released_ = false;
  bool aborted_ = false;
  bool want_writable_ = false;
  uint8_t queued_ = 0;  // kReadable/kWritable already in the owner's FIFO
  bool in_work_ = false;
  bool in_acks_ = false;

  // Received, unconsumed bytes: a singly linked list of pbufs (each owned
  // with refcount 1), rx_off_ bytes into the first one.
  pbuf* rx_head_ = nullptr;
  pbuf* rx_tail_ = nullptr;
  size_t rx_off_ = 0;
  size_t rx_bytes_ = 0;

  // Bytes tx_send accepted but lwIP could not take (pools dry).
  std::vector<uint8_t> parked_;
  size_t parked_off_ = 0;

  uint32_t snd_max_ = 0;  // highest sequence sent + 1 (retransmit counter)
  bool snd_max_valid_ = false;

  size_t max_segment_ = 536;  // TCP's default MSS, until lwIP settles on one
  sockaddr_in local_{};
  sockaddr_in peer_{};
};

class ListenerImpl final : public Listener {
 public:
  ListenerImpl(TransportImpl* transport, tcp_pcb* pcb, const sockaddr_in& addr)
      : transport_(transport), pcb_(pcb), addr_(addr) {}
  ~ListenerImpl() override { shut(); }
  ListenerImpl(const ListenerImpl&) = delete;
  ListenerImpl& operator=(const ListenerImpl&) = delete;

  sockaddr_in addr() const override { return addr_; }
  void shut();
  static err_t lw_accept(void* arg, tcp_pcb* newpcb, err_t err);

  TransportImpl* transport_;
  tcp_pcb* pcb_;
  sockaddr_in addr_;
};

// ---------------------------------------------------------------------------
// The stack
// ---------------------------------------------------------------------------

class Stack {
 public:
  static Stack& get() {
    // Leaked on purpose: lwIP cannot be torn down, and links may still be
    // lending frames to pbufs when static destructors would run.
    static Stack* s = new Stack;
    return *s;
  }

  std::mutex mu;

  int add_link(std::unique_ptr<FrameLink> port, in_addr ip, in_addr mask, in_addr gw,
               const LwipLinkOptions& opt);
  int remove_link(int id);
  int reset_connections_to(in_addr peer);
  int add_route(in_addr dest, int prefix, int link_id, in_addr via);
  int remove_route(in_addr dest, int prefix);
  LwipCounters counters() const;
  int link_counters(int id, LinkCounters* out) const;

  void run_io(TransportImpl* runner);
  void flush_links();
  void flush_acks(TransportImpl* owner);
  bool acks_pending() const { return acks_hint_.load(std::memory_order_relaxed); }
  void want_work(Conn* c);
  void want_ack(Conn* c);
  void forget(Conn* c);
  void linger(std::unique_ptr<Conn> c);
  void finish_lingering(TransportImpl* owner);
  bool drain(TransportImpl* owner, std::chrono::milliseconds bound);
  bool is_local(uint32_t ip) const;
  void register_transport(TransportImpl* t);
  void unregister_transport(TransportImpl* t);
  bool fd_mode() const { return fd_mode_.load(std::memory_order_relaxed); }
  void arm_links();
  TransportImpl* io_runner() const { return io_runner_; }

  // lwIP glue.
  struct netif* route(const ip4_addr_t* src, const ip4_addr_t* dest);
  void check_link_states();
  // While set, routes ignore link state: a static neighbour can be entered
  // on a link that is not up yet (a memif server before its client).
  bool route_any_link_state = false;
  const ip4_addr_t* next_hop(struct netif* nif, const ip4_addr_t* dest);
  void note_tcp_tx(struct netif_hint* hint, const uint8_t* frame, uint32_t len);
  static err_t link_output(struct netif* nif, pbuf* p);
  static void lent_done(void* frame, void* p);
  int lend(Link* l, pbuf* p);
  int copy_out(Link* l, pbuf* p);
  static err_t link_netif_init(struct netif* nif);
  static void rx_free(pbuf* p);

  bool removing_link = false;  // errors during remove_link are -ENETDOWN
  bool resetting = false;      // aborts by reset_connections_to are resets
  LwipCounters ctr;            // the fields Stack counts itself

 private:
  Stack();
  Link* find_link(int id) const;
  const Route* lookup(uint32_t dest) const;
  void input(Link* l, const RxFrame& f);
  void retry_blocked();
  void sweep_retired();
  void update_fd_mode();

  std::vector<std::unique_ptr<Link>> links_;
  std::vector<std::unique_ptr<Link>> retired_;
  std::unordered_map<uint32_t, Route> host_routes_;  // /32, by destination
  std::vector<Route> net_routes_;                    // longest prefix first
  // The last lookup: a connection's segments all go to one destination, and
  // every segment asks twice (route and next hop). Cleared on any change.
  mutable uint32_t last_dest_ = 0;
  mutable const Route* last_route_ = nullptr;
  void routes_changed() { last_route_ = nullptr; }
  std::vector<TransportImpl*> transports_;
  std::vector<Conn*> work_, work_spare_;
  std::vector<Conn*> acks_, acks_spare_;
  std::atomic<bool> acks_hint_{false};
  std::unordered_map<Conn*, std::unique_ptr<Conn>> lingering_;
  std::atomic<bool> fd_mode_{false};
  TransportImpl* io_runner_ = nullptr;
  bool tx_blocked_ = false;
  uint32_t last_link_check_ms_ = 0;
  int next_link_id_ = 0;
};

// Holds the stack mutex; pushes out frames queued meanwhile before unlocking.
class Locked {
 public:
  Locked() : s_(Stack::get()), lk_(s_.mu) {}
  ~Locked() { s_.flush_links(); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  Stack& s_;
  std::unique_lock<std::mutex> lk_;
};

// ---------------------------------------------------------------------------
// Transport
// ---------------------------------------------------------------------------

class TransportImpl final : public Transport {
 public:
  explicit TransportImpl(const LwipTransportOptions& options);
  ~TransportImpl() override;
  TransportImpl(const TransportImpl&) = delete;
  TransportImpl& operator=(const TransportImpl&) = delete;

  bool ok() const { return epfd_ >= 0 && evfd_ >= 0 && tfd_ >= 0; }

  const char* name() const override { return "lwip"; }
  int listen(const sockaddr_in& addr, int backlog, Listener** out) override;
  void close_listener(Listener* l) override;
  int connect(const sockaddr_in& peer, StreamConn** out) override;
  void release(StreamConn* c) override;
  int poll(TransportEvents& ev, int timeout_us) override;
  void wake() override;
  int wait_fd() const override { return Stack::get().fd_mode() ? epfd_ : -1; }

  // With the stack mutex held.
  void queue(const Event& e);
  Conn* adopt(tcp_pcb* newpcb, ListenerImpl* l);
  void destroy(Conn* c);
  void link_fd(int fd, bool add);

 private:
  int deliver(TransportEvents& ev);
  bool prepare(const Event& e);
  void signal();
  void drain_signals();
  void arm_wait();
  void wait(int timeout_ms);

  LwipTransportOptions options_;
  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;
  std::unordered_map<Listener*, std::unique_ptr<ListenerImpl>> listeners_;
  Ring<Event> fifo_;
  // fifo_.size() after its last change (all under the mutex): deliver()
  // runs every pass and skips the mutex when nothing is queued.
  std::atomic<size_t> fifo_held_{0};
  void fifo_changed() { fifo_held_.store(fifo_.size(), std::memory_order_release); }
  std::atomic<bool> wake_pending_{false};
  std::atomic<bool> signaled_{false};
  bool timer_armed_ = false;
  int epfd_ = -1;
  int evfd_ = -1;  // wake() and events queued by other transports' polls
  int tfd_ = -1;   // lwIP's next timeout, while waiting
};

// ---------------------------------------------------------------------------
// Error mapping
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Conn
// ---------------------------------------------------------------------------

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

size_t Conn::rx_peek(RxView* views, size_t max) {
  Locked g;
  size_t n = 0;
  size_t off = rx_off_;
  for (pbuf* p = rx_head_; p != nullptr && n < max; p = p->next) {
    if (p->len > off) {
      views[n++] = RxView{static_cast<const uint8_t*>(p->payload) + off, p->len - off};
    }
    off = 0;
  }
  return n;
}

// Frees the pbufs (frames) consumed in full and opens the window by n.
// Views of the remaining bytes stay valid: their pbufs are untouched.
void Conn::rx_consume(size_t n) {
  Locked g;
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

// tx_send's writes, under the stack mutex, the room already checked.
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
    g_stack->want_work(this);
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

void Conn::run_work() {
  if (pcb_ == nullptr) return;
  bool had_parked = !parked_.empty();
  drain_parked();
  if (pcb_ == nullptr) return;
  if (had_parked) tcp_output(pcb_);
  if (!parked_.empty()) {
    g_stack->want_work(this);
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
  c->notify(EvKind::kReadable);
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

err_t Conn::lw_connected(void* arg, tcp_pcb* /*pcb*/, err_t /*err*/) {
  auto* c = static_cast<Conn*>(arg);
  if (c == nullptr) return ERR_OK;
  c->connecting_ = false;
  c->cache_endpoints();
  ++g_stack->ctr.conns_opened;
  c->notify(EvKind::kConnected, 0);
  if (c->close_requested_ || c->released_) g_stack->want_work(c);
  return ERR_OK;
}

// ---------------------------------------------------------------------------
// ListenerImpl
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Stack
// ---------------------------------------------------------------------------

Stack::Stack() {
  g_stack = this;
  lwip_init();  // also brings up the 127.0.0.1 loopback netif
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

void Stack::register_transport(TransportImpl* t) {
  transports_.push_back(t);
  for (const auto& l : links_) {
    if (l->wait_fd >= 0) t->link_fd(l->wait_fd, true);
  }
}

void Stack::unregister_transport(TransportImpl* t) { std::erase(transports_, t); }

void Stack::input(Link* l, const RxFrame& f) {
  if (f.len < SIZEOF_ETH_HDR || f.len > 0xFFFF || f.priv == nullptr ||
      reinterpret_cast<uintptr_t>(f.priv) % alignof(RxPbuf) != 0) {
    l->port->rx_release(f.handle);
    ++ctr.rx_input_errors;
    return;
  }
  auto* r = new (f.priv) RxPbuf;
  r->pc.custom_free_function = &Stack::rx_free;
  r->link = l;
  r->handle = f.handle;
  auto len = static_cast<u16_t>(f.len);
  pbuf* p = pbuf_alloced_custom(PBUF_RAW, len, PBUF_REF, &r->pc, const_cast<uint8_t*>(f.data), len);
  ++l->held;
  ++ctr.rx_frames;
  ctr.rx_bytes += f.len;
  if (l->nif.input(p, &l->nif) != ERR_OK) {
    pbuf_free(p);
    ++ctr.rx_input_errors;
  }
}

void Stack::rx_free(pbuf* p) {
  auto* r = reinterpret_cast<RxPbuf*>(p);
  Link* l = r->link;
  void* handle = r->handle;  // r lives in the frame: read it before release
  --l->held;
  l->port->rx_release(handle);
}

err_t Stack::link_output(struct netif* nif, pbuf* p) {
  auto* l = static_cast<Link*>(nif->state);
  Stack& s = *g_stack;
  const uint32_t len = p->tot_len;
  int rc = s.lend(l, p);
  if (rc == 0) rc = s.copy_out(l, p);
  if (rc < 0) {
    // lwIP keeps a TCP segment it could not send at the head of unsent;
    // run_io pushes such pcbs again (the RTO would, much later).
    ++s.ctr.tx_no_buffer;
    s.tx_blocked_ = true;
    return ERR_MEM;
  }
  l->dirty = true;
  ++s.ctr.tx_frames;
  s.ctr.tx_bytes += len;
  return ERR_OK;
}

// A frame in one pbuf (every TCP segment: TCP_OVERSIZE gives each its own
// MSS-sized pbuf, headers in front) is lent to ports that can take it, not
// copied. lwIP rewrites a segment's headers only when it outputs it again,
// i.e. in link_output, and never its payload. Returns tx_lend's answer.
int Stack::lend(Link* l, pbuf* p) {
  constexpr int kMaxLentRefs = 64;  // pbuf refs are a u8: stay well below
  if (p->next != nullptr || p->ref >= kMaxLentRefs) return 0;
  const auto* frame = static_cast<const uint8_t*>(p->payload);
  pbuf_ref(p);  // first: the port may call lent_done before returning
  int rc = l->port->tx_lend(frame, p->len, &Stack::lent_done, p);
  if (rc <= 0) {
    pbuf_free(p);  // drops only our reference
    return rc;
  }
  // lwIP's own reference keeps the frame readable here.
  if (l->nif.hints != nullptr) note_tcp_tx(l->nif.hints, frame, p->len);
  ++ctr.tx_lent;
  return 1;
}

// A lent frame holds its own reference on the pbuf (lwIP's, for
// retransmission, is separate) until the port is done reading it. Ports
// call this with the stack mutex held: from tx calls, rx_burst's flush and
// their destruction, all made under it.
void Stack::lent_done(void* /*frame*/, void* p) { pbuf_free(static_cast<pbuf*>(p)); }

int Stack::copy_out(Link* l, pbuf* p) {
  void* handle = nullptr;
  uint8_t* buf = l->port->tx_begin(p->tot_len, &handle);
  if (buf == nullptr) return -ENOBUFS;
  pbuf_copy_partial(p, buf, p->tot_len, 0);
  if (l->nif.hints != nullptr) note_tcp_tx(l->nif.hints, buf, p->tot_len);
  l->port->tx_commit(handle, p->tot_len);
  return 1;
}

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

// lwIP counts no retransmissions (its RTO path has no statistic at all), so
// count them here: while a pcb outputs a segment, lwIP points the netif's
// hint at the pcb's own netif_hints, which finds the pcb and so our Conn.
// A data segment that starts below the highest sequence already sent is a
// retransmission.
void Stack::note_tcp_tx(struct netif_hint* hint, const uint8_t* frame, uint32_t len) {
  if (len < SIZEOF_ETH_HDR + IP_HLEN + TCP_HLEN || be16(frame + 12) != ETHTYPE_IP) return;
  const uint8_t* ip = frame + SIZEOF_ETH_HDR;
  size_t ihl = static_cast<size_t>(ip[0] & 0x0F) * 4;
  if (ip[9] != IP_PROTO_TCP || SIZEOF_ETH_HDR + ihl + TCP_HLEN > len) return;
  const uint8_t* th = ip + ihl;
  size_t doff = static_cast<size_t>(th[12] >> 4) * 4;
  size_t tot = be16(ip + 2);
  if (tot < ihl + doff) return;
  uint32_t seg = static_cast<uint32_t>(tot - ihl - doff) + ((th[13] & (TCP_SYN | TCP_FIN)) ? 1 : 0);
  if (seg == 0) return;  // pure ACK or RST: no sequence space
  auto* pcb = reinterpret_cast<tcp_pcb*>(reinterpret_cast<char*>(hint) -
                                         offsetof(struct tcp_pcb, netif_hints));
  // A listener's RST, or a SYN-ACK from a pcb that still carries its
  // listener's arg until lwIP calls accept: not a Conn.
  if (pcb->state == LISTEN || pcb->state == SYN_RCVD) return;
  auto* c = static_cast<Conn*>(pcb->callback_arg);
  if (c == nullptr) return;
  uint32_t seq = be32(th + 4);
  uint32_t end = seq + seg;
  if (!c->snd_max_valid_) {
    c->snd_max_valid_ = true;
    c->snd_max_ = end;
    return;
  }
  if (TCP_SEQ_LT(seq, c->snd_max_)) {
    ++ctr.tcp_retransmits;
    ctr.tcp_retransmit_bytes += (TCP_SEQ_LT(end, c->snd_max_) ? end : c->snd_max_) - seq;
  }
  if (TCP_SEQ_GT(end, c->snd_max_)) c->snd_max_ = end;
}

void Stack::flush_links() {
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

void Stack::retry_blocked() {
  tx_blocked_ = false;
  for (tcp_pcb* pcb = tcp_active_pcbs; pcb != nullptr; pcb = pcb->next) {
    if (pcb->unsent != nullptr) tcp_output(pcb);
  }
}

void Stack::want_work(Conn* c) {
  if (c->in_work_) return;
  c->in_work_ = true;
  work_.push_back(c);
}

void Stack::want_ack(Conn* c) {
  if (c->in_acks_) return;
  c->in_acks_ = true;
  acks_.push_back(c);
  acks_hint_.store(true, std::memory_order_relaxed);
}

void Stack::forget(Conn* c) {
  if (c->in_work_) std::erase(work_, c);
  if (c->in_acks_) std::erase(acks_, c);
  c->in_work_ = c->in_acks_ = false;
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

void Stack::run_io(TransportImpl* runner) {
  io_runner_ = runner;
  RxFrame frames[kRxBurst];
  for (size_t i = 0; i < links_.size(); ++i) {
    Link* l = links_[i].get();
    int n = l->port->rx_burst(frames, kRxBurst);
    for (int k = 0; k < n; ++k) input(l, frames[k]);
  }
  uint32_t now = sys_now();
  if (now != last_link_check_ms_) {  // link state at most once a millisecond
    last_link_check_ms_ = now;
    check_link_states();
  }
  sys_check_timeouts();
  netif_poll_all();  // loopback queues (traffic to our own addresses)
  if (tx_blocked_) retry_blocked();
  if (!work_.empty()) {
    const PassBatch batch(work_, work_spare_);
    for (Conn* c : batch) c->in_work_ = false;
    for (Conn* c : batch) {
      if (c->in_work_) continue;  // queued again by an earlier entry's work
      if (c->released_) {
        if (c->try_finish()) {
          lingering_.erase(c);
        } else {
          want_work(c);
        }
      } else {
        c->run_work();
      }
    }
  }
  if (!retired_.empty()) sweep_retired();
  io_runner_ = nullptr;
}

// Delayed ACKs still pending when the owner polls again after seeing the
// data (its on_readable was delivered) go out now instead of on the next
// fast-timer tick, up to TCP_TMR_INTERVAL later. Until then the owner may
// piggyback them on a reply, from its callback or right after poll()
// returns; flushing at the end of the poll that received the data instead
// cost a pure ACK per round trip (+0.45 us on the 64 B ping-pong over the
// pipe) and gained nothing in bulk transfers (lwIP ACKs every 2nd segment).
void Stack::flush_acks(TransportImpl* owner) {
  const PassBatch batch(acks_, acks_spare_);
  for (Conn* c : batch) {
    c->in_acks_ = false;
    if (c->released_) continue;
    if (c->transport_ != owner || (c->queued_ & 1)) {
      want_ack(c);
      continue;
    }
    if (c->pcb_ != nullptr && (c->pcb_->flags & TF_ACK_DELAY)) {
      tcp_ack_now(c->pcb_);
      tcp_output(c->pcb_);
    }
  }
  acks_hint_.store(!acks_.empty(), std::memory_order_relaxed);
}

void Stack::arm_links() {
  for (const auto& l : links_) l->port->rx_wait_arm();
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

// ---------------------------------------------------------------------------
// TransportImpl
// ---------------------------------------------------------------------------

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

void TransportImpl::link_fd(int fd, bool add) {
  epoll_event e{};
  e.events = EPOLLIN;
  ::epoll_ctl(epfd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &e);
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
  // The source address applies to destinations reached over links; 127/8
  // is answered from 127.0.0.1 (lwIP's loopback interface), as on Linux.
  if (options_.source.s_addr != 0 && (ntohl(peer.sin_addr.s_addr) >> 24) != 127) {
    ip_addr_t src;
    ip_addr_set_ip4_u32(&src, options_.source.s_addr);
    e = tcp_bind(pcb, &src, 0);
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
  }
  *out = c;
  return 0;
}

void TransportImpl::destroy(Conn* c) {
  fifo_.erase_if([&](const Event& e) { return e.conn == c; });
  fifo_changed();
  conns_.erase(c);  // ~Conn aborts a pcb still attached
}

void TransportImpl::release(StreamConn* sc) {
  Locked g;
  auto it = conns_.find(static_cast<Conn*>(sc));
  if (it == conns_.end()) return;
  Conn* c = it->second.get();
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

// Checks an event against the state now, with the mutex held.
bool TransportImpl::prepare(const Event& e) {
  Conn* c = e.conn;
  switch (e.kind) {
    case EvKind::kAccept:
      if (c->pcb_ != nullptr) tcp_backlog_accepted(c->pcb_);
      return true;
    case EvKind::kConnected:
      if (!c->can_notify()) return false;
      if (e.err != 0) c->done_ = true;
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

// One event at a time, popped under the mutex and delivered without it:
// nothing of the batch is held across a callback, so callbacks may release
// or close anything.
int TransportImpl::deliver(TransportEvents& ev) {
  if (fifo_held_.load(std::memory_order_acquire) == 0) return 0;
  size_t budget;
  {
    Locked g;
    budget = fifo_.size();
  }
  int handled = 0;
  while (budget-- > 0) {
    Event e;
    {
      Locked g;
      if (fifo_.empty()) break;
      e = fifo_.front();
      fifo_.pop_front();
      fifo_changed();
      if (!prepare(e)) continue;
    }
    switch (e.kind) {
      case EvKind::kAccept: ev.on_accept(e.listener, e.conn); break;
      case EvKind::kConnected: ev.on_connected(e.conn, e.err); break;
      case EvKind::kReadable: ev.on_readable(e.conn); break;
      case EvKind::kWritable: ev.on_writable(e.conn); break;
      case EvKind::kClosed: ev.on_closed(e.conn, e.err); break;
    }
    ++handled;
  }
  return handled;
}

void TransportImpl::signal() {
  signaled_.store(true, std::memory_order_relaxed);
  uint64_t one = 1;
  while (::write(evfd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void TransportImpl::drain_signals() {
  // Read first: every pass comes here, and a plain load costs no bus lock.
  if (signaled_.load(std::memory_order_relaxed) &&
      signaled_.exchange(false, std::memory_order_relaxed)) {
    uint64_t v;
    while (::read(evfd_, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
  }
  if (timer_armed_) {
    timer_armed_ = false;
    uint64_t v;
    while (::read(tfd_, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
  }
}

// Before the caller sleeps on wait_fd(): links raise their fds on the next
// frame, and the timerfd fires when lwIP's next timer is due.
void TransportImpl::arm_wait() {
  Locked g;
  Stack& s = Stack::get();
  s.arm_links();
  u32_t ms = sys_timeouts_sleeptime();
  itimerspec its{};
  if (ms != SYS_TIMEOUTS_SLEEPTIME_INFINITE) {
    its.it_value.tv_sec = ms / 1000;
    its.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1000000L + 1000;  // never 0: disarms
  }
  ::timerfd_settime(tfd_, 0, &its, nullptr);
  timer_armed_ = ms != SYS_TIMEOUTS_SLEEPTIME_INFINITE;
  if (!fifo_.empty()) signal();
}

void TransportImpl::wait(int timeout_ms) {
  arm_wait();
  epoll_event evs[8];
  ::epoll_wait(epfd_, evs, 8, timeout_ms);
}

int TransportImpl::poll(TransportEvents& ev, int timeout_us) {
  Stack& s = Stack::get();
  const int64_t start_ns = pass_clock::refresh();
  int handled = 0;
  for (bool first = true;; first = false) {
    if (!first) pass_clock::refresh();
    {
      Locked g;
      drain_signals();
      if (s.acks_pending()) s.flush_acks(this);
      s.run_io(this);
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
  if (handled == 0 && s.fd_mode()) arm_wait();
  return handled;
}

void TransportImpl::wake() {
  wake_pending_.store(true);
  signal();
}

// SipHash-2-4 (Aumasson & Bernstein), the keyed PRF for RFC 6528 ISNs.
uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t siphash24(const uint8_t* in, size_t len, uint64_t k0, uint64_t k1) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
  // clang-format off
  auto round = [&] {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  };
  // clang-format on
  size_t full = len & ~size_t{7};
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m;
    std::memcpy(&m, in + i, 8);
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  uint64_t b = uint64_t{len} << 56;
  for (size_t i = 0; i < (len & 7); ++i) b |= uint64_t{in[full + i]} << (8 * i);
  v3 ^= b;
  round();
  round();
  v0 ^= b;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// lwIP hooks (lwip_hooks.h), called inside lwIP with the stack mutex held
// ---------------------------------------------------------------------------

extern "C" struct netif* softrdma_lwip_route(const ip4_addr_t* src, const ip4_addr_t* dest) {
  return softrdma::net::g_stack->route(src, dest);
}

extern "C" const ip4_addr_t* softrdma_lwip_next_hop(struct netif* netif, const ip4_addr_t* dest) {
  return softrdma::net::g_stack->next_hop(netif, dest);
}

// RFC 6528: ISN = M + F(4-tuple, secret), M a 4 us clock, F keyed SipHash.
extern "C" u32_t softrdma_lwip_isn(const ip_addr_t* local_ip, u16_t local_port,
                                   const ip_addr_t* remote_ip, u16_t remote_port) {
  static const uint64_t k0 = (uint64_t{softrdma_lwip_rand()} << 32) | softrdma_lwip_rand();
  static const uint64_t k1 = (uint64_t{softrdma_lwip_rand()} << 32) | softrdma_lwip_rand();
  uint8_t in[12];
  uint32_t lip = ip4_addr_get_u32(ip_2_ip4(local_ip));
  uint32_t rip = ip4_addr_get_u32(ip_2_ip4(remote_ip));
  std::memcpy(in, &lip, 4);
  std::memcpy(in + 4, &rip, 4);
  std::memcpy(in + 8, &local_port, 2);
  std::memcpy(in + 10, &remote_port, 2);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  auto m =
      static_cast<uint32_t>((uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec)) / 4000);
  return m + static_cast<uint32_t>(softrdma::net::siphash24(in, sizeof(in), k0, k1));
}
