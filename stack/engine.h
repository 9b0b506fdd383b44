// The SoftRDMA engine: the only header prov/, the tools and the tests need.
//
// An Engine owns one transport (kernel TCP or lwIP on DPDK), the memory
// region table, CQs, QPs and the connection manager. Every public method is
// thread-safe: they take the process's one lock (stack/common/big_lock.h),
// which also guards the TCP/IP stack, so a progress pass takes one lock for
// port receive, TCP, placement, completion and transmit. progress() may be
// called from the application's thread (run to completion) or a dedicated one.
//
//   Engine e;                         // transport from FI_SOFTRDMA_TRANSPORT
//   auto* pd = e.alloc_pd();
//   auto* mr = e.reg_mr(pd, buf, len, kAccessLocalWrite | kAccessRemoteWrite);
//   auto* cq = e.create_cq(256);
//   auto* qp = e.create_qp({.pd = pd, .send_cq = cq, .recv_cq = cq});
//   e.connect(qp, peer, pdata, n);    // CM events via poll_cm()
//   e.post_send(qp, wr);  e.progress(0);  e.poll_cq(cq, wc, 16);
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "stack/common/big_lock.h"
#include "stack/counters.h"
#include "stack/iwarp/cq.h"
#include "stack/iwarp/mem.h"
#include "stack/iwarp/mpa.h"
#include "stack/iwarp/qp.h"
#include "stack/net/transport.h"
#include "stack/verbs.h"

namespace softrdma {

using iwarp::Cq;
using iwarp::Mr;
using iwarp::Pd;
using iwarp::Qp;
using iwarp::QpInit;
using iwarp::Srq;
using iwarp::Stats;
using net::Listener;

// The SoftRDMA paper's threading models (FI_SOFTRDMA_THREADING):
//  c1: the application thread posts; an I/O thread receives AND transmits.
//  c2: run to completion: progress runs inside the application's calls.
//  c3: a receive thread polls the port, runs TCP/IP and placement; the
//      application thread transmits in its posting calls (the paper's choice).
enum class Threading : uint8_t { kC1, kC2, kC3 };

struct EngineConfig {
  // "dpdk" (lwIP on DPDK: from_env()'s default) or "kernel" (TCP sockets:
  // a plain EngineConfig{}, as the kernel-TCP tests use).
  std::string transport = "kernel";
  bool crc = true;          // ask for MPA CRCs (used if either side asks)
  bool markers = false;     // ask the peer to insert MPA markers
  uint8_t mpa_rev = iwarp::kMpaRev2;
  iwarp::Rtr rtr = iwarp::Rtr::kWrite;  // RTR kind we offer (rev 2); kNone: no p2p
  // An active open's TCP handshake gets connect_timeout_ms (SYNs are
  // retried 1, 2, 4, 8 s... apart: a lossy path must not fail a connect that
  // a kernel would complete), then the MPA exchange gets mpa_timeout_ms; a
  // passive side's MPA exchange gets mpa_timeout_ms from the accept. TCP
  // resends a lost MPA frame with a timeout doubling from 1 s at most (sent
  // at 0, 1, 3, 7, 15 s): 20 s lets four resends through where 5 s let two,
  // so at 10 % frame loss a frame fails set-up once in 10^5, not 10^3 (seen
  // in wire_fault_test's 5 % drop + 5 % corruption).
  int connect_timeout_ms = 30000;
  int mpa_timeout_ms = 20000;
  Threading threading = Threading::kC2;
  // c2: a watchdog thread runs progress when the application has not for
  // this long, so that queued frames, ACKs and timers move even while it
  // blocks elsewhere (a userspace stack has no kernel to do it). While the
  // application does call, the watchdog looks less often (up to 16 periods
  // apart) and is back at one period once it stands in, or at once when the
  // application announces a sleep (expect_idle). 0: none.
  int watchdog_us = 1000;
  // Where the engine writes its counters when it closes: "" nowhere,
  // "stderr", or a file it appends one line to (docs/counters.md).
  std::string stats_to;
  // Per QP: Sends held until a receive is posted (iwarp/unexpected.h).
  uint64_t unexpected_bytes = 256 * 1024;
  uint32_t unexpected_msgs = 256;
  // Bad FI_SOFTRDMA_* settings (settings::check_env), one a line: an engine
  // with any does not start (ok() is false) and prints them.
  std::string error;

  // Reads FI_SOFTRDMA_TRANSPORT, _CRC, _MARKERS, _MPA_REV, _RTR, _THREADING,
  // _WATCHDOG_US, _STATS, _UNEXPECTED_BYTES, _UNEXPECTED_MSGS, and checks
  // every other setting too.
  static EngineConfig from_env();
};

// The connection manager's events (rdma_cm's, reduced to what iWARP has).
enum class CmEventType : uint8_t {
  kConnectRequest,  // passive: a peer's MPA Request arrived; accept or reject it
  kEstablished,     // RDMA mode: both sides may post
  kRejected,        // active: the peer rejected (private_data is its reason)
  kUnreachable,     // active: no connection (refused, timed out, bad MPA reply)
  kDisconnected,    // the stream ended: peer closed, Terminate, or error
};
const char* to_string(CmEventType t);

struct ConnReq;  // a pending passive connection, named in kConnectRequest

struct CmEvent {
  CmEventType type{};
  Qp* qp = nullptr;              // the QP concerned (not for kConnectRequest)
  Listener* listener = nullptr;  // kConnectRequest: where it arrived
  ConnReq* req = nullptr;        // kConnectRequest: pass to accept()/reject()
  int status = 0;                // 0 or -errno
  uint32_t term = 0;             // kDisconnected by Terminate: TermCause::packed()
  sockaddr_in peer{};
  uint16_t peer_ird = 0, peer_ord = 0;
  std::vector<uint8_t> private_data;
};

class Engine : private net::TransportEvents, private iwarp::QpOwner {
 public:
  explicit Engine(const EngineConfig& cfg = EngineConfig::from_env());
  Engine(const EngineConfig& cfg, std::unique_ptr<net::Transport> transport);
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return cfg_; }
  // False when the transport could not start (DPDK, a port): every call that
  // needs it then fails with -ENODEV.
  bool ok() const { return transport_ != nullptr; }
  const char* transport_name() const { return transport_ ? transport_->name() : "none"; }
  // The settings behind a connect's -ENETUNREACH or -EHOSTUNREACH, for
  // its error text (net::Transport::unreachable_why); "" when none.
  std::string unreachable_why(int err) const {
    return transport_ ? transport_->unreachable_why(err) : std::string();
  }

  // --- verbs ---
  Pd* alloc_pd();
  Mr* reg_mr(Pd* pd, void* addr, uint64_t len, uint32_t access);
  int dereg_mr(uint32_t stag);
  Cq* create_cq(uint32_t depth);
  void destroy_cq(Cq* cq);
  Srq* create_srq(Pd* pd, uint32_t depth);
  int post_srq_recv(Srq* srq, const RecvWr& wr);
  void destroy_srq(Srq* srq);
  Qp* create_qp(const QpInit& init);
  void destroy_qp(Qp* qp);  // aborts its stream, drops its pending CM events
  int post_send(Qp* qp, const SendWr& wr);
  int post_recv(Qp* qp, const RecvWr& wr);
  int poll_cq(Cq* cq, Wc* wc, int n);

  // --- connection manager ---
  int listen(const sockaddr_in& addr, int backlog, Listener** out);
  sockaddr_in listen_addr(Listener* l);
  void close_listener(Listener* l);
  int connect(Qp* qp, const sockaddr_in& peer, const void* pdata, size_t len);
  int accept(ConnReq* req, Qp* qp, const void* pdata, size_t len);
  int reject(ConnReq* req, const void* pdata, size_t len);
  int disconnect(Qp* qp);
  bool poll_cm(CmEvent* ev);
  // Whether poll_cm may have an event: no lock, for progress loops.
  bool cm_pending() const { return events_held_.load() != 0; }
  static constexpr size_t kMaxPrivateData =
      iwarp::kMpaMaxPrivateData - sizeof(iwarp::MpaV2Params);

  // --- progress ---
  // Runs I/O and timers; waits up to timeout_us (-1: until something happens)
  // when there is nothing to do. Returns events handled. Under c1 and c3 the
  // engine's own thread does this and calls from other threads only wait.
  int progress(int timeout_us);
  // An fd that polls readable when progress() has I/O to do (-1: none, the
  // transport must be busy-polled). For wait objects built on top.
  int wait_fd() const { return transport_ ? transport_->wait_fd() : -1; }
  // The application is about to sleep (on a wait fd) instead of calling
  // progress(): c2's watchdog drops its back-off and stands in for it from
  // the next period on.
  void expect_idle();
  Stats stats();
  // Everything counted, link to iWARP, and what is in use now
  // (stack/counters.h, docs/counters.md).
  Counters counters();

  // --- for the libfabric provider (engine_api.cc) ---
  // The CQ's next completion writes 1 to the eventfd efd, once: a waiter
  // arms it before its last look at the CQ, then sleeps on efd.
  void arm_cq(Cq* cq, int efd);
  // The local and peer addresses of the QP's connection; false while it has
  // none.
  bool qp_addresses(Qp* qp, sockaddr_in* local, sockaddr_in* peer);
  // The process lock as every method above takes it (BasicLockable; it
  // nests): the provider guards its own state with it, so a post or a CQ
  // read with its bookkeeping takes one lock, not two.
  void lock() {
    if (cfg_.threading == Threading::kC2) {  // no engine thread to step aside
      big_lock::lock();
      return;
    }
    // Announced first, so that the c1/c3 thread, which otherwise retakes
    // the lock back to back, steps aside (the lock is not fair: it would
    // starve the application).
    waiters_.fetch_add(1, std::memory_order_relaxed);
    big_lock::lock();
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  void unlock() { big_lock::unlock(); }

 private:
  // net::TransportEvents
  void on_accept(Listener* l, net::StreamConn* c) override;
  void on_connected(net::StreamConn* c, int err) override;
  void on_readable(net::StreamConn* c) override;
  size_t on_data(net::StreamConn* c, const net::RxView* views, size_t n) override;
  void on_writable(net::StreamConn* c) override;
  void on_closed(net::StreamConn* c, int err) override;
  // iwarp::QpOwner
  void on_qp_error(Qp* qp) override;
  void on_qp_ready(Qp* qp) override;

  // engine_cm.cc internals
  iwarp::MpaParams our_params(const Qp* qp, const void* pdata, size_t len) const;
  void mpa_input(ConnReq* c);
  void drop_conn(ConnReq* c);
  void check_timeouts();
  void emit(CmEvent ev);
  // engine.cc: progress internals and the c1/c3 thread
  int progress_once();
  int pass_locked();  // progress_once's pass, the process lock held
  void io_loop();
  void watchdog_loop();

  struct ApiLock {  // lock() for a scope
    explicit ApiLock(Engine* e) : e_(e) { e_->lock(); }
    ~ApiLock() { e_->unlock(); }
    Engine* e_;
  };

  EngineConfig cfg_;
  std::unique_ptr<net::Transport> transport_;
  std::atomic<int> waiters_{0};
  iwarp::MrTable mrs_;
  Stats stats_;
  std::vector<std::unique_ptr<Pd>> pds_;
  std::vector<std::unique_ptr<Cq>> cqs_;
  std::vector<std::unique_ptr<Srq>> srqs_;
  std::unordered_map<Qp*, std::unique_ptr<Qp>> qps_;
  std::unordered_map<ConnReq*, std::unique_ptr<ConnReq>> conns_;
  // The connections still in their TCP or MPA set-up, whose deadlines
  // check_timeouts watches: established ones (thousands) are not walked.
  std::unordered_set<ConnReq*> setting_up_;
  std::deque<CmEvent> events_;
  // events_.size() as of its last push or pop (never below it): lets
  // poll_cm (and cm_pending) skip the lock on the common empty poll.
  std::atomic<size_t> events_held_{0};
  uint32_t next_qp_ = 1;
  std::atomic<bool> stop_{false};
  std::thread io_thread_;  // c1 and c3 only
  std::thread watchdog_;   // c2 only
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_attend_ = false;  // under watchdog_mu_: expect_idle() was called
  std::atomic<int64_t> last_progress_ns_{0};
  int64_t last_timeout_check_ns_ = 0;  // under the process lock
};

}  // namespace softrdma
