// srdma_soak's client: the main phase, the churn phase, the bye, and the
// summary.
#include <deque>
#include <memory>
#include <thread>
#include <unordered_map>

#include "stack/common/settings.h"
#include "stack/tools/addresses.h"
#include "stack/tools/soak_client_conn.h"
#include "stack/tools/soak_roles.h"
#include "stack/tools/soak_step_plan.h"

namespace softrdma::soak {
namespace {

// The figures of one phase, for the summary.
struct PhaseResult {
  double secs = 0;
  uint64_t ops = 0;
  MemWatch client_mem, server_mem;
};

class Client {
 public:
  explicit Client(const Options& o) : o_(o), peer_(tools::resolve_or_die(o.host, o.port)) {
    const double churn_s = 10 + 0.05 * double(o.churn);
    const double limit = o.timeout_s > 0 ? o.timeout_s : o.duration_s * 1.2 + churn_s + 120;
    deadline_ = tools::deadline_after(limit);
  }

  int run() {
    std::printf("# srdma_soak: seed %" PRIu64 " | transport %s | threading %s | %u conns x %u in "
                "flight, 0..%u B | %.0f s | churn %" PRIu64 " x %" PRIu64 " ops (%u at a time)\n",
                o_.seed, node_.eng().transport_name(), threading_name().c_str(), o_.conns, o_.depth,
                o_.max_size, o_.duration_s, o_.churn, o_.churn_ops, o_.churn_parallel);
    std::printf("# mix %%: send %u write %u read %u write_imm %u fadd %u cas %u\n", kOpWeights[0],
                kOpWeights[1], kOpWeights[2], kOpWeights[3], kOpWeights[4], kOpWeights[5]);
    std::fflush(stdout);
    t0_ = Clock::now();
    run_main();
    if (o_.churn > 0) run_churn();
    if (!o_.no_bye) farewell_ = say_bye();
    return summarize();
  }

 private:
  static std::string threading_name() { return settings::get_string(settings::Id::kThreading); }

  void run_main() {
    if (o_.conns == 0) return;
    phase_ = "main";
    // Opened in waves: lwIP's listen backlog holds at most 255 handshakes
    // (SYN received, not yet taken by the engine); SYNs beyond it are
    // dropped and retried a second later, as a kernel's full SYN queue does.
    auto connecting = [&] {
      return static_cast<uint32_t>(std::count_if(conns_.begin(), conns_.end(), [](const auto& c) {
        return c->state() == ClientConn::State::kConnecting;
      }));
    };
    for (uint32_t opened = 0; opened < o_.conns || connecting() > 0; pass(false)) {
      for (uint32_t n = connecting(); opened < o_.conns && n < kConnectWave; ++n)
        open(opened++, o_.max_size, UINT64_MAX);
      report_due();
    }
    // Warm-up counts from when every connection carries traffic.
    const Clock::time_point start = Clock::now();
    const uint64_t ops0 = totals_.ops;
    const auto run_for = std::chrono::duration<double>(o_.duration_s);
    while (!conns_.empty()) {
      const double t = seconds_since(start);
      const bool stop = t >= run_for.count();
      pass(stop);
      if (!stop && report_due()) {
        const bool warm = t >= warmup_secs(o_);
        main_.client_mem.sample(read_mem().rss_kb, warm);
        main_.server_mem.sample(server_rss_kb(), warm);
      }
    }
    main_.secs = seconds_since(start);
    main_.ops = totals_.ops - ops0;
  }

  static constexpr uint32_t kConnectWave = 128;  // connects outstanding at once

  void run_churn() {
    phase_ = "churn";
    churning_ = true;
    churn_before_ = Resources::now(node_.eng());
    const Clock::time_point start = Clock::now();
    uint64_t opened = 0;
    while (opened < o_.churn || !conns_.empty()) {
      while (opened < o_.churn && conns_.size() < o_.churn_parallel)
        open(static_cast<uint32_t>(o_.conns + opened++), o_.churn_max_size, o_.churn_ops);
      pass(false);
      report_due();
    }
    churn_secs_ = seconds_since(start);
    churn_done_ = opened;
    // What churn must give back: descriptors, memory, engine objects,
    // frames. Closing streams drain over a few more polls: up to 2 s of them.
    for (int i = 0; i < 200; ++i) {
      churn_after_ = Resources::now(node_.eng());
      if (churn_after_.back_to(churn_before_, flat_kb())) break;
      pass(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  uint64_t flat_kb() const { return static_cast<uint64_t>(o_.flat_mib * 1024); }

  void open(uint32_t id, uint32_t max_size, uint64_t limit) {
    auto c = std::make_unique<ClientConn>(node_, ctrls_, o_, id, max_size, limit, &mism_,
                                          &totals_);
    c->connect(peer_, o_.seed);
    by_qp_[c->qp()] = c.get();
    by_num_[c->qp()->num()] = c.get();
    by_slot_.put(c->slot(), c.get(), ctrls_.slots());
    if (waits_.size() < ctrls_.slots()) waits_.resize(ctrls_.slots(), 0);
    waits_[c->slot()] = 0;
    conns_.push_back(std::move(c));
    last_progress_ = Clock::now();
  }

  // Drops closed connections (their QPs, MRs and buffers).
  void reap() {
    for (size_t i = 0; i < conns_.size();) {
      if (!conns_[i]->closed()) {
        ++i;
        continue;
      }
      by_qp_.erase(conns_[i]->qp());
      by_num_.erase(conns_[i]->qp()->num());
      by_slot_.drop(conns_[i]->slot());
      waits_[conns_[i]->slot()] = 0;
      conns_[i] = std::move(conns_.back());
      conns_.pop_back();
    }
  }

  // One round: engine I/O, events, completions, then the steps of the
  // connections that had one; on a sweep, of those waiting on the server
  // whose credits or done word changed (every waiting one on each eighth
  // sweep: a close waits on time); the first pass after stop steps all.
  void pass(bool stop) {
    const uint64_t ops0 = totals_.ops;
    node_.pump([&](const CmEvent& ev) { on_cm(ev); }, [&](const Wc& wc) { on_wc(wc); });
    if (stop && !stopped_) {
      stopped_ = true;
      for (auto& c : conns_) step(c.get(), true);
    }
    const bool swept = plan_.run(
        [&] {
          const bool all = ++sweeps_ % 8 == 0;
          ctrls_.scan([&](uint32_t slot, const ClientCtrl& b) {
            if (slot >= waits_.size() || !waits_[slot]) return;
            const Seen words{load(b.credit.recv_posted) + load(b.credit.writes_checked),
                             load(b.done)};
            if (by_slot_.changed(slot, words) || all) step(by_slot_.at(slot), stop);
          });
        },
        [&](uint32_t n) {
          if (auto it = by_num_.find(n); it != by_num_.end()) step(it->second, stop);
        });
    if (swept && (stopped_ || churning_)) reap();
    if (totals_.ops != ops0) last_progress_ = Clock::now();
    check_alive();
  }

  void step(ClientConn* c, bool stop) { waits_[c->slot()] = c->step(stop); }

  void on_cm(const CmEvent& ev) {
    last_progress_ = Clock::now();
    auto it = by_qp_.find(ev.qp);
    if (it == by_qp_.end()) return;  // a QP already destroyed
    plan_.touch(ev.qp->num());
    if (ev.type == CmEventType::kUnreachable && ev.status == -ECONNREFUSED &&
        it->second->state() == ClientConn::State::kConnecting) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // not listening yet
      it->second->connect(peer_, o_.seed);
      return;
    }
    if (!it->second->on_cm(ev)) fail(kExitError, "a connection was lost");
  }

  void on_wc(const Wc& wc) {
    auto it = by_num_.find(wc.qp_num);
    if (it == by_num_.end()) return;  // flushed work of a QP already destroyed
    plan_.touch(wc.qp_num);
    if (it->second->on_wc(wc)) return;
    // A lost stream flushes the QP and queues its kDisconnected in the same
    // engine pass; when c2's watchdog ran that pass between our CM and CQ
    // polls, the flush is seen first. The event says why: report it first.
    CmEvent ev;
    while (node_.eng().poll_cm(&ev)) on_cm(ev);
    fail(kExitError, "an operation failed");
  }

  // Stall and deadline: a dead or wedged peer must not hang us.
  void check_alive() {
    const Clock::time_point now = Clock::now();
    if (now > deadline_) fail(kExitError, "timeout");
    if (conns_.empty() || now - last_progress_ < std::chrono::duration<double>(o_.stall_s))
      return;
    for (const auto& c : conns_) std::fprintf(stderr, "  %s\n", c->describe().c_str());
    fail(kExitError, "stalled: no progress for the --stall time (peer dead or engine wedged)");
  }

  uint64_t server_rss_kb() const {
    uint64_t kb = 0;
    for (const auto& c : conns_) kb = std::max(kb, c->server_rss_kb());
    return kb;
  }

  // Prints a report line when one is due; true if it did.
  bool report_due() {
    const Clock::time_point now = Clock::now();
    if (now < next_report_) return false;
    next_report_ = tools::deadline_after(o_.report_s);
    const double t = seconds_since(t0_);
    uint64_t server_live = 0;
    for (const auto& c : conns_) server_live += c->server_bytes();
    const uint64_t verified = totals_.client_bytes + totals_.server_bytes + server_live;
    const double rate = t > last_report_t_ ? double(totals_.ops - last_report_ops_) /
                                                 (t - last_report_t_) : 0;
    last_report_t_ = t;
    last_report_ops_ = totals_.ops;
    std::printf("[%7.1f s] %-5s conns %4zu ops %11" PRIu64 " (%8.0f/s) verified %9.3f GiB "
                "errors %" PRIu64 " | rss %.1f MiB server %.1f MiB | %s\n",
                t, phase_, conns_.size(), totals_.ops, rate, gib(verified), errors(),
                mib(read_mem().rss_kb), mib(server_rss_kb()), node_.counters().c_str());
    std::fflush(stdout);
    return true;
  }

  uint64_t errors() const {
    return mism_.count() + totals_.server_mismatches + farewell_.mismatches;
  }

  // The bye request: the server answers with its account and exits.
  Farewell say_bye() {
    Farewell f;
    Qp* qp = node_.make_qp(4, 1, 1);
    Hello h;
    h.kind = static_cast<uint8_t>(HelloKind::kBye);
    if (int rc = node_.eng().connect(qp, peer_, &h, sizeof(h)); rc < 0)
      die(kExitError, "connect (bye): %s", std::strerror(-rc));
    const Clock::time_point until = std::min(deadline_, Clock::now() + std::chrono::seconds(10));
    bool answered = false;
    while (!answered && Clock::now() < until) {
      node_.pump([&](const CmEvent& ev) {
        if (ev.qp != qp) return;
        answered = true;
        if (ev.type != CmEventType::kRejected || !decode(ev.private_data, &f))
          std::fprintf(stderr, "srdma_soak client: the bye got %s, not the server's account\n",
                       to_string(ev.type));
      }, [](const Wc&) {});
    }
    node_.eng().destroy_qp(qp);
    if (!answered) std::fprintf(stderr, "srdma_soak client: the server did not answer the bye\n");
    bye_ok_ = answered && f.magic == kMagic;
    return f;
  }

  [[noreturn]] void fail(int code, const char* why) {
    std::fprintf(stderr, "srdma_soak client: %s\n", why);
    failure_ = why;
    std::exit(std::max(code, summarize()));
  }

  // The summary line(s); returns the exit code.
  int summarize() {
    const uint64_t final_kb = live_rss_kb();
    const MemFigures m = read_mem();
    const uint64_t verified = totals_.client_bytes + totals_.server_bytes;
    const double flat = o_.flat_mib;
    const bool client_flat = !kRssJudged || main_.client_mem.growth_mib() <= flat;
    const bool server_flat = !kRssJudged || main_.server_mem.growth_mib() <= flat;
    const bool churn_ok = churn_after_.back_to(churn_before_, flat_kb());
    int code = 0;
    if (errors() > 0 || !client_flat || !server_flat || (churn_done_ && !churn_ok))
      code = kExitMismatch;
    const bool bye_bad = !o_.no_bye && (!bye_ok_ || farewell_.lost > 0 || farewell_.open_conns > 0);
    if (failure_ || bye_bad) code = kExitError;
    // Connections that carried nothing checked nothing: a stall, not a pass.
    const bool idle = o_.conns > 0 && o_.duration_s > 0 && main_.secs > 0 && main_.ops == 0;
    if (idle) {
      std::printf("# main: no operation completed\n");
      code = kExitError;
    }
    if (main_.secs == 0) {
      std::printf("# main: did not finish\n");
    } else {
      std::printf("# main: %.1f s, %u conns, %" PRIu64 " ops (%.0f/s); client rss at warm-up "
                  "%.1f MiB, growth after %.2f MiB; server %.1f MiB, growth %.2f MiB (bound %.1f)\n",
                  main_.secs, o_.conns, main_.ops, double(main_.ops) / main_.secs,
                  mib(main_.client_mem.at_warm_kb), main_.client_mem.growth_mib(),
                  mib(main_.server_mem.at_warm_kb), main_.server_mem.growth_mib(), flat);
    }
    if (churn_done_) {
      std::printf("# churn: %" PRIu64 " connections in %.1f s: %s\n#   before: %s\n#   after:  "
                  "%s\n", churn_done_, churn_secs_, churn_ok ? "all back" : "NOT ALL BACK",
                  churn_before_.describe().c_str(), churn_after_.describe().c_str());
    }
    if (o_.no_bye)
      std::printf("# server: left running (--no-bye)\n");
    else
      std::printf("# server: %" PRIu64 " conns served, %" PRIu64 " ops, %" PRIu64 " mismatches, %"
                  PRIu64 " lost, %" PRIu64 " open at bye, peak rss %.1f MiB, final %.1f MiB%s\n",
                  farewell_.conns, farewell_.ops, farewell_.mismatches, farewell_.lost,
                  farewell_.open_conns, mib(farewell_.peak_rss_kb), mib(farewell_.final_rss_kb),
                  bye_ok_ ? "" : " (no answer)");
    std::printf("SUMMARY duration %.1f s ops %" PRIu64 " bytes_verified %" PRIu64 " (%.2f GiB) "
                "errors %" PRIu64 " out_of_order %" PRIu64 " slow_closes %" PRIu64 " client_rss peak %.1f final %.1f "
                "growth %.2f MiB server_rss peak %.1f final %.1f growth %.2f MiB flat %s "
                "(bound %.1f MiB after %.0f s) churn %" PRIu64 " %s exit %d%s%s\n",
                seconds_since(t0_), totals_.ops, verified, gib(verified), errors(), totals_.ooo, totals_.slow_closes,
                mib(m.hwm_kb), mib(final_kb), main_.client_mem.growth_mib(),
                mib(farewell_.peak_rss_kb), mib(farewell_.final_rss_kb),
                main_.server_mem.growth_mib(),
                !kRssJudged ? "n/a(asan)" : client_flat && server_flat ? "yes" : "NO", flat,
                warmup_secs(o_), churn_done_, churn_done_ ? (churn_ok ? "ok" : "LEAK") : "-",
                code, failure_ ? ": " : "", failure_ ? failure_ : "");
    std::fflush(stdout);
    return code;
  }

  const Options& o_;
  Node node_;
  CtrlPool<ClientCtrl> ctrls_{node_};  // before conns_: they give their blocks back
  const sockaddr_in peer_;
  Clock::time_point deadline_, t0_;
  Clock::time_point last_progress_ = Clock::now();
  Clock::time_point next_report_{};
  double last_report_t_ = 0;
  uint64_t last_report_ops_ = 0;
  const char* phase_ = "-";
  std::vector<std::unique_ptr<ClientConn>> conns_;
  std::unordered_map<Qp*, ClientConn*> by_qp_;
  std::unordered_map<uint32_t, ClientConn*> by_num_;
  StepPlan plan_;
  // By control block slot: the connection, whether it waits on the server
  // (ClientConn::step), and its credits and done word as its last sweep saw.
  struct Seen {
    uint64_t credits = 0, done = 0;
    bool operator==(const Seen&) const = default;
  };
  SlotTable<ClientConn, Seen> by_slot_;
  std::vector<uint8_t> waits_;
  uint64_t sweeps_ = 0;
  bool stopped_ = false;              // the main phase's stop reached every connection
  bool churning_ = false;             // connections close all the time: reap them
  Mismatches mism_;
  Totals totals_;
  PhaseResult main_;
  double churn_secs_ = 0;
  uint64_t churn_done_ = 0;
  Resources churn_before_, churn_after_;
  Farewell farewell_;
  bool bye_ok_ = false;
  const char* failure_ = nullptr;
};

}  // namespace

int run_client(const Options& o) { return Client(o).run(); }

}  // namespace softrdma::soak
