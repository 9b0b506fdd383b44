// The lwIP transport's classes, shared by its pieces (private to this folder).
//
// Layout:
//  - Stack: the process-wide singleton. Owns lwIP, the links (netifs over
//    FrameLinks), the route table and the counters. run_io()
//    is the engine of the whole thing: one RX burst per link into lwIP,
//    lwIP's timers, the loopback queues, and deferred per-connection work.
//  - TransportImpl: one per Engine. Owns its listeners and connections and a
//    FIFO of events that lwIP callbacks (run by any transport's poll, on any
//    thread) queue for it; only its own poll() delivers them, one at a time,
//    so a callback may release anything.
//  - Conn: a connection. Received pbuf chains are kept as lwIP hands them
//    over (frames stay in the link's buffers) and offered to the owner's
//    receive entry (TransportEvents::on_data) at the end of the pass that
//    received them, whichever engine's pass it is (set_receiver; the one
//    process lock covers them all); before the owner has seen the
//    connection, a readable event offers them from the owner's poll.
//    rx_peek lends them too.
//
// The pieces: lwip_transport.cc (events, poll, the public API),
// lwip_conn.cc (connection and listener state), lwip_datapath.cc (receive
// callback, transmit), lwip_links.cc (netifs and routes), lwip_frames.cc
// (pbufs over link frames, frame lending), lwip_retransmits.cc, lwip_wait.cc
// (epoll/eventfd/timerfd), lwip_isn.cc.
//
// Every lwIP call and every field below is guarded by the process lock
// (stack/common/big_lock.h), taken through Locked; its outermost release
// pushes the frames the critical section queued on links (tx_flush), so
// batching lasts exactly one critical section. An engine's pass or post
// holds it already, so what the owner's receive entry does (send a reply,
// close) joins the pass's critical section.
#pragma once

#include <netinet/in.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "stack/common/big_lock.h"
#include "stack/common/ring.h"
#include "stack/net/lwip/lwip_transport.h"

namespace softrdma::net::lwip_impl {

constexpr int kRxBurst = 32;
// How long lwIP's timers may wait for a receive backlog to drain (run_io).
constexpr uint32_t kTimerDeferMs = 20;
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
extern Stack* g_stack;  // set once by Stack's constructor; the hooks use it

inline sockaddr_in make_sockaddr(uint32_t ip_be, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = ip_be;
  return a;
}

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

struct Route {
  uint32_t net = 0, mask = 0;  // network byte order
  int prefix = 0;
  Link* link = nullptr;
  ip4_addr_t via{};  // 0: the destination itself is on the link
};

inline uint32_t prefix_mask(int prefix) {
  return prefix == 0 ? 0 : htonl(~uint32_t{0} << (32 - prefix));
}

// Error mapping (lwip_conn.cc).
int errno_of_connect(err_t e);
int errno_of_callback(err_t e, bool connecting);

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
  // rx_peek's and rx_consume's work, with the process lock held; views_locked
  // also adds up the bytes it shows in *shown.
  size_t views_locked(RxView* views, size_t max, size_t* shown) const;
  void consume_locked(size_t n);
  int tx_send(const iovec* iov, int cnt, size_t total) override;
  void tx_flush() override;
  int write_locked(const iovec* iov, int cnt);
  size_t max_segment() const override { return max_segment_; }
  void close() override;
  void abort() override;
  sockaddr_in local_addr() const override { return local_; }
  sockaddr_in peer_addr() const override { return peer_; }

  // Everything below runs with the process lock held.
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
  bool retry_output_ = false;  // a segment met a full link: run_work outputs again
  bool in_stalled_ = false;    // in Stack::stalled_ (parked bytes or a refused segment)
  bool in_acks_ = false;
  // The owner's poll from which a delayed ACK for the bytes received last
  // may go out alone (Stack::flush_acks): the one after the poll that
  // returned with them delivered.
  uint64_t ack_from_poll_ = 0;
  // In-order octets received since lwIP last sent an ACK, and whether the
  // ACK is due at the end of this pass (lwip_acks.cc).
  uint32_t unacked_ = 0;
  bool ack_burst_ = false;
  bool in_offers_ = false;
  bool announced_ = false;  // the owner has had on_accept / on_connected

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
  bool lossless_ = false;     // its route's link loses no frame (softrdma_lwip_rto)
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

class Stack {
 public:
  static Stack& get() {
    // Leaked on purpose: lwIP cannot be torn down, and links may still be
    // lending frames to pbufs when static destructors would run.
    static Stack* s = new Stack;
    return *s;
  }


  int add_link(std::unique_ptr<FrameLink> port, in_addr ip, in_addr mask, in_addr gw,
               const LwipLinkOptions& opt);
  int remove_link(int id);
  int reset_connections_to(in_addr peer);
  bool local_port_in_use(uint16_t port) const;
  int add_route(in_addr dest, int prefix, int link_id, in_addr via);
  int remove_route(in_addr dest, int prefix);
  LwipCounters counters() const;
  int link_counters(int id, LinkCounters* out) const;

  int run_io(TransportImpl* runner);
  void flush_links();
  void flush_acks(TransportImpl* owner);
  bool acks_pending() const { return acks_hint_.load(std::memory_order_relaxed); }
  // A connection took a burst of segments in this pass: its ACK goes out at
  // the pass's end (lwip_acks.cc).
  void want_burst_ack() { burst_acks_ = true; }
  void ack_bursts();
  void want_work(Conn* c);
  void want_retry(Conn* c);
  void want_ack(Conn* c);
  void want_offer(Conn* c);
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
  // The Conn whose pcb is outputting, from the netif's hint (lwIP points it
  // at the pcb's own netif_hints); null for listeners and handshakes.
  static Conn* conn_of(struct netif_hint* hint);
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
  void retry_later(struct netif_hint* hint);
  void retry_stalled();
  bool work_on(Conn* c);
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
  // Connections whose output met dry pools or a full link, oldest first.
  // Kept apart from work_ so a pass looks at a few of thousands waiting.
  std::deque<Conn*> stalled_;
  std::vector<Conn*> acks_;
  std::vector<Conn*> offers_;  // received into this pass, for the runner's owner
  std::atomic<bool> acks_hint_{false};
  bool burst_acks_ = false;  // some connection of acks_ wants its ACK at this pass's end
  std::unordered_map<Conn*, std::unique_ptr<Conn>> lingering_;
  std::atomic<bool> fd_mode_{false};
  TransportImpl* io_runner_ = nullptr;
  bool tx_blocked_ = false;  // a pcb without a Conn met a full link: walk them all
  bool links_dirty_ = false;  // some link has frames committed, not flushed
  uint32_t last_tick_ms_ = 0;  // run_io's once-a-millisecond work
  bool in_backlog_ = false;  // the last pass found a ring holding a full burst
  uint32_t backlog_since_ms_ = 0;  // since when, or now when it did not
  int next_link_id_ = 0;
};

// Holds the process lock (big_lock.h) for a scope: joins the caller's
// critical section when it already has one (an engine's pass or post); the
// outermost release pushes the frames queued meanwhile (flush_links).
class Locked {
 public:
  Locked() { big_lock::lock(); }
  ~Locked() { big_lock::unlock(); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
};

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
  int connect_from(const sockaddr_in& local, const sockaddr_in& peer, StreamConn** out) override;
  void release(StreamConn* c) override;
  int poll(TransportEvents& ev, int timeout_us) override;
  void wake() override;
  int wait_fd() const override { return Stack::get().fd_mode() ? epfd_ : -1; }

  // With the process lock held.
  void queue(const Event& e);
  void set_receiver(TransportEvents* owner) override { receiver_ = owner; }
  // Where c's bytes go from the pass running now: the bound receiver from
  // any pass, else the events of this transport's own poll; null: nowhere
  // yet (a readable event offers them later).
  TransportEvents* push_target(const Conn* c) const {
    if (!c->announced_) return nullptr;
    if (receiver_ != nullptr) return receiver_;
    return g_stack->io_runner() == this ? sink_ : nullptr;
  }
  // Offers c's received bytes to ev's receive entry and releases what it
  // consumed (frames freed, window opened).
  void offer(Conn* c, TransportEvents& ev);
  void wake_waiter() { signal(); }
  uint64_t polls() const { return polls_; }
  void offer_pushed(Conn* c) {
    if (TransportEvents* t = push_target(c)) offer(c, *t);
  }
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
  TransportEvents* receiver_ = nullptr;  // set_receiver's owner
  TransportEvents* sink_ = nullptr;      // during poll(): its events
  Conn* offering_ = nullptr;         // whose bytes offer() has out; cleared if released
  uint64_t polls_ = 0;               // poll() calls so far
  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;
  std::unordered_map<Listener*, std::unique_ptr<ListenerImpl>> listeners_;
  Ring<Event> fifo_;
  // fifo_.size() after its last change (all under the lock): deliver()
  // runs every pass and skips the lock when nothing is queued.
  std::atomic<size_t> fifo_held_{0};
  void fifo_changed() { fifo_held_.store(fifo_.size(), std::memory_order_release); }
  std::atomic<bool> wake_pending_{false};
  std::atomic<bool> signaled_{false};
  bool timer_armed_ = false;
  int epfd_ = -1;
  int evfd_ = -1;  // wake() and events queued by other transports' polls
  int tfd_ = -1;   // lwIP's next timeout, while waiting
};

}  // namespace softrdma::net::lwip_impl
