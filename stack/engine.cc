// Engine lifetime, verbs calls and progress. The CM lives in engine_cm.cc.
#include "stack/engine.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <utility>

#include "stack/common/pass_clock.h"
#include "stack/common/settings.h"
#include "stack/engine_conn.h"
#include "stack/net/dpdk_transport.h"

namespace softrdma {

EngineConfig EngineConfig::from_env() {
  using settings::Id;
  EngineConfig c;
  c.error = settings::check_env();
  c.transport = settings::get_string(Id::kTransport);  // "dpdk" unless set: the product path
  c.crc = settings::get_bool(Id::kCrc);
  c.markers = settings::get_bool(Id::kMarkers);
  c.mpa_rev = static_cast<uint8_t>(settings::get_int(Id::kMpaRev));
  // In the order of each setting's choices.
  static constexpr Threading kThreadings[] = {Threading::kC1, Threading::kC2, Threading::kC3};
  c.threading = kThreadings[settings::get_choice(Id::kThreading)];
  c.watchdog_us = static_cast<int>(settings::get_int(Id::kWatchdogUs));
  c.stats_to = settings::get_string(Id::kStats);
  c.unexpected_bytes = static_cast<uint64_t>(settings::get_int(Id::kUnexpectedBytes));
  c.unexpected_msgs = static_cast<uint32_t>(settings::get_int(Id::kUnexpectedMsgs));
  static constexpr iwarp::Rtr kRtrs[] = {iwarp::Rtr::kWrite, iwarp::Rtr::kRead, iwarp::Rtr::kSend,
                                         iwarp::Rtr::kNone};
  c.rtr = kRtrs[settings::get_choice(Id::kRtr)];
  return c;
}

// "dpdk": lwIP on DPDK (the product path); "kernel": kernel TCP sockets.
static std::unique_ptr<net::Transport> make_transport(const EngineConfig& cfg) {
  if (!cfg.error.empty()) return nullptr;  // the engine says why
  const std::string& name = cfg.transport;
  if (name == "kernel") return net::make_kernel_tcp_transport();
  if (name != "dpdk") {
    std::fprintf(stderr, "softrdma: unknown transport '%s' (dpdk|kernel)\n", name.c_str());
    return nullptr;
  }
  return net::make_dpdk_transport(net::DpdkTransportConfig::from_env());
}

Engine::Engine(const EngineConfig& cfg) : Engine(cfg, make_transport(cfg)) {}

Engine::Engine(const EngineConfig& cfg, std::unique_ptr<net::Transport> transport)
    : cfg_(cfg), transport_(cfg.error.empty() ? std::move(transport) : nullptr) {
  if (!cfg_.error.empty()) std::fprintf(stderr, "%s\n", cfg_.error.c_str());
  if (transport_) transport_->set_receiver(this);  // received bytes go to the QPs at once
  if (transport_ && cfg_.threading != Threading::kC2) io_thread_ = std::thread([this] { io_loop(); });
  if (transport_ && cfg_.threading == Threading::kC2 && cfg_.watchdog_us > 0)
    watchdog_ = std::thread([this] { watchdog_loop(); });
}

// FI_SOFTRDMA_STATS: one line per engine, "softrdma: pid N counters: ...".
static void report_counters(const std::string& to, const Counters& c) {
  FILE* f = to == "stderr" ? stderr : std::fopen(to.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "softrdma: FI_SOFTRDMA_STATS: cannot open %s: %s\n", to.c_str(),
                 std::strerror(errno));
    return;
  }
  std::fprintf(f, "softrdma: pid %d counters: %s\n", static_cast<int>(getpid()),
               format_counters(c).c_str());
  if (f != stderr) std::fclose(f);
}

Engine::~Engine() {
  {
    std::lock_guard lk(watchdog_mu_);  // the watchdog checks stop_ under it
    stop_ = true;
  }
  watchdog_cv_.notify_one();
  if (io_thread_.joinable()) io_thread_.join();
  if (watchdog_.joinable()) watchdog_.join();
  if (!cfg_.stats_to.empty()) report_counters(cfg_.stats_to, counters());
  ApiLock g(this);
  if (transport_) transport_->set_receiver(nullptr);  // no pass may offer to a going engine
  for (auto& [c, owned] : conns_) {
    if (c->sc) {
      c->sc->abort();
      transport_->release(c->sc);
    }
  }
  conns_.clear();
  qps_.clear();
}

Pd* Engine::alloc_pd() {
  ApiLock g(this);
  pds_.push_back(std::make_unique<Pd>(Pd{static_cast<uint32_t>(pds_.size() + 1)}));
  return pds_.back().get();
}

Mr* Engine::reg_mr(Pd* pd, void* addr, uint64_t len, uint32_t access) {
  ApiLock g(this);
  return mrs_.reg(pd, addr, len, access);
}

int Engine::dereg_mr(uint32_t stag) {
  ApiLock g(this);
  return mrs_.dereg(stag);
}

Cq* Engine::create_cq(uint32_t depth) {
  ApiLock g(this);
  cqs_.push_back(std::make_unique<Cq>(depth));
  return cqs_.back().get();
}

void Engine::destroy_cq(Cq* cq) {
  ApiLock g(this);
  std::erase_if(cqs_, [cq](const auto& p) { return p.get() == cq; });
}

Srq* Engine::create_srq(Pd* pd, uint32_t depth) {
  ApiLock g(this);
  srqs_.push_back(std::make_unique<Srq>(Srq{pd, depth, {}}));
  return srqs_.back().get();
}

int Engine::post_srq_recv(Srq* srq, const RecvWr& wr) {
  ApiLock g(this);
  if (wr.num_sge < 0 || wr.num_sge > kMaxSge) return -EINVAL;
  for (int i = 0; i < wr.num_sge; ++i) {
    uint8_t* p;
    const Sge& s = wr.sg_list[i];
    if (s.lkey && s.length &&
        mrs_.check(s.lkey, srq->pd, s.addr, s.length, kAccessLocalWrite, &p) !=
            iwarp::AccessResult::kOk)
      return -EACCES;
  }
  if (srq->q.size() >= srq->depth) return -EAGAIN;
  srq->q.push_back(wr);
  // A Send held by one of the SRQ's QPs takes it now.
  for (auto& [qp, owned] : qps_) {
    if (srq->q.empty()) break;
    if (qp->init().srq == srq) qp->rx_deliver_unexpected();
  }
  return 0;
}

void Engine::destroy_srq(Srq* srq) {
  ApiLock g(this);
  std::erase_if(srqs_, [srq](const auto& p) { return p.get() == srq; });
}

Qp* Engine::create_qp(const QpInit& init) {
  ApiLock g(this);
  if (!init.pd || !init.send_cq || !init.recv_cq) return nullptr;
  iwarp::QpOwner* owner = this;
  QpInit qi = init;
  qi.unexpected_bytes = cfg_.unexpected_bytes;
  qi.unexpected_msgs = cfg_.unexpected_msgs;
  auto qp = std::make_unique<Qp>(next_qp_++, qi, &mrs_, &stats_, owner);
  qp->set_defer_tx(cfg_.threading == Threading::kC1);  // c1: the I/O thread transmits
  Qp* raw = qp.get();
  qps_.emplace(raw, std::move(qp));
  return raw;
}

void Engine::destroy_qp(Qp* qp) {
  ApiLock g(this);
  for (auto it = conns_.begin(); it != conns_.end(); ++it) {
    if (it->first->qp != qp) continue;
    // Like closing a socket: a connection in RDMA mode ends with a FIN behind
    // the bytes already handed to the stream (Sends the application saw
    // complete must arrive); the transport keeps flushing after release.
    // If the QP already failed, its stream was closed (after our Terminate)
    // or reset then. A connection still in its MPA exchange is reset.
    const bool rdma_mode = it->first->stage == ConnReq::Stage::kRdma;
    if (rdma_mode) qp->close();
    qp->detach_conn();
    if (it->first->sc) {
      if (!rdma_mode) it->first->sc->abort();
      transport_->release(it->first->sc);
    }
    setting_up_.erase(it->first);
    conns_.erase(it);
    break;
  }
  std::erase_if(events_, [qp](const CmEvent& e) { return e.qp == qp; });
  qp->close();  // outstanding work completes, flushed, before the QP goes
  qps_.erase(qp);
}

int Engine::post_send(Qp* qp, const SendWr& wr) {
  ApiLock g(this);
  return qp->post_send(wr);
}

int Engine::post_recv(Qp* qp, const RecvWr& wr) {
  ApiLock g(this);
  return qp->post_recv(wr);
}

// The process lock only when there is something to pop (see cq.h).
int Engine::poll_cq(Cq* cq, Wc* wc, int n) {
  if (cq->size() == 0) return 0;  // the common empty poll takes no lock
  ApiLock g(this);
  return cq->poll(wc, n);
}

Stats Engine::stats() {
  ApiLock g(this);
  return stats_;
}

Counters Engine::counters() {
  ApiLock g(this);
  Counters c{};
  if (transport_) transport_->add_counters(&c);
  c.fpdus_tx = stats_.fpdus_tx;
  c.fpdus_rx = stats_.fpdus_rx;
  c.payload_tx = stats_.payload_tx;
  c.payload_rx = stats_.payload_rx;
  c.rx_copy_bytes = stats_.rx_copy_bytes;
  c.markers_tx = stats_.markers_tx;
  c.markers_rx = stats_.markers_rx;
  c.crc_errors = stats_.crc_errors;
  c.terminates_tx = stats_.terminates_tx;
  c.terminates_rx = stats_.terminates_rx;
  c.unexpected_msgs = stats_.unexpected_msgs;
  c.unexpected_bytes = stats_.unexpected_bytes;
  c.unexpected_bytes_hwm = stats_.unexpected_bytes_hwm;
  c.unexpected_overruns = stats_.unexpected_overruns;
  c.sends_tx = stats_.sends_tx;
  c.writes_tx = stats_.writes_tx;
  c.read_requests_tx = stats_.read_requests_tx;
  c.atomic_requests_tx = stats_.atomic_requests_tx;
  c.qps = qps_.size();
  c.cqs = cqs_.size();
  c.mrs = mrs_.live();
  c.connections = conns_.size();
  return c;
}

// All transport calls happen under the process lock (transports are not
// thread-safe); waiting happens outside it, on the transport's wait fd, so
// other threads can post meanwhile. Transports without one are busy-polled.
static int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Engine::progress_once() {
  big_lock::Guard g;
  return pass_locked();
}

int Engine::pass_locked() {
  int n = transport_->poll(*this, 0);  // refreshes the pass clock
  const int64_t now = pass_clock::now_ns();
  last_progress_ns_.store(now, std::memory_order_relaxed);
  // CM deadlines are seconds long: a look per millisecond is plenty, and
  // the walk over every connection stays out of most passes.
  if (now - last_timeout_check_ns_ >= 1'000'000) {
    last_timeout_check_ns_ = now;
    check_timeouts();
  }
  if (cfg_.threading == Threading::kC1) {
    for (auto& [qp, owned] : qps_) {
      if (qp->tx_pending()) qp->tx_progress();
    }
  }
  return n;
}

int Engine::progress(int timeout_us) {
  if (!transport_) return -ENODEV;
  if (io_thread_.joinable() && std::this_thread::get_id() != io_thread_.get_id()) {
    // c1/c3: the engine's thread makes progress; callers only give it time
    // (a yield at least: with fewer cores than busy threads, a polling
    // application would otherwise hold the CPU its I/O thread needs). A
    // caller holding the lock gives it time by letting go of the lock.
    if (big_lock::held()) return 0;
    if (timeout_us == 0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(
          std::chrono::microseconds(timeout_us < 0 ? 1000 : std::min(timeout_us, 1000)));
    }
    return 0;
  }
  int n = progress_once();
  if (n > 0 || timeout_us == 0) return n;
  // Wait in slices so MPA timeouts are noticed even when blocking forever.
  constexpr int kSliceMs = 100;
  int ms = timeout_us < 0 ? kSliceMs : std::min(kSliceMs, (timeout_us + 999) / 1000);
  if (int fd = transport_->wait_fd(); fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, ms);
    return progress_once();
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while ((n = progress_once()) == 0 && std::chrono::steady_clock::now() < until) {
  }
  return n;
}

// c2's safety net: progress only when the application has not made any for
// watchdog_us, so it costs nothing while the application polls but its own
// wake-ups. Those preempt a polling thread when pollers fill the CPUs (two
// ranks or fi_pingpong's two processes on two cores): at one per period the
// 8 B ping-pong's p99 went from 4-5 us to 18-28 us. So while the application
// is active the watchdog backs off, doubling its nap up to 16 periods.
void Engine::watchdog_loop() {
  const int64_t period = int64_t{cfg_.watchdog_us} * 1000;
  constexpr int64_t kMaxBackoff = 16;
  int64_t nap = period;
  std::unique_lock lk(watchdog_mu_);
  while (!stop_.load(std::memory_order_relaxed)) {
    watchdog_cv_.wait_for(lk, std::chrono::nanoseconds(nap), [this] {
      return watchdog_attend_ || stop_.load(std::memory_order_relaxed);
    });
    const bool asked = std::exchange(watchdog_attend_, false);
    lk.unlock();
    // A thread holding the lock is making progress: waiting for it would
    // only take turns with that thread (a wake-up at each of its passes).
    const bool stale = now_ns() - last_progress_ns_.load(std::memory_order_relaxed) >= period;
    if (stale && big_lock::try_lock()) {
      pass_locked();
      big_lock::unlock();
      nap = period;
    } else if (stale) {
      nap = period;  // the holder may be a thread that only posts: look again soon
    } else {
      nap = asked ? period : std::min(nap * 2, kMaxBackoff * period);
    }
    lk.lock();
  }
}

void Engine::expect_idle() {
  if (!watchdog_.joinable()) return;
  {
    std::lock_guard lk(watchdog_mu_);
    watchdog_attend_ = true;
  }
  watchdog_cv_.notify_one();
}

// The c1/c3 engine thread: poll the port, run TCP/IP, place, complete (and
// under c1 transmit): the paper's busy-polling I/O thread, which gives its
// core away only after a run of idle passes.
void Engine::io_loop() {
  constexpr int kIdlePassesBeforeYield = 64;
  int idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    // Let a posting thread in first (bounded, so it cannot starve us).
    for (int i = 0; i < 2000 && waiters_.load(std::memory_order_relaxed) > 0; ++i)
      __builtin_ia32_pause();
    if (progress_once() > 0) {
      idle = 0;
    } else if (++idle == kIdlePassesBeforeYield) {
      // With more polling threads than cores (c1/c3 beside a polling
      // application, two processes on two cores), a thread that never
      // yields keeps its core for a whole scheduler slice (4 ms per half
      // round trip here); on a core of its own the yield returns at once.
      idle = 0;
      std::this_thread::yield();
    }
  }
}

}  // namespace softrdma
