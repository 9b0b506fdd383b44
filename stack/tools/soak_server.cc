// srdma_soak's server: accepts data connections, checks them, survives
// lost clients with --serve-until-idle, and answers the bye with its account.
#include <memory>
#include <thread>
#include <unordered_map>

#include "stack/tools/addresses.h"
#include "stack/tools/soak_options.h"
#include "stack/tools/soak_roles.h"
#include "stack/tools/soak_server_conn.h"
#include "stack/tools/soak_step_plan.h"

namespace softrdma::soak {
namespace {

class Server {
 public:
  explicit Server(const Options& o) : o_(o) {
    if (o.timeout_s > 0)
      deadline_ = tools::deadline_after(o.timeout_s);
  }

  int run() {
    listen();
    while (!bye_ && !idle_over()) {
      pass();
      report_due();
      check_alive();
    }
    return farewell();
  }

 private:
  void listen() {
    const sockaddr_in any = tools::any_address(o_.port);
    if (int rc = node_.eng().listen(any, 1024, &listener_); rc < 0)
      die(kExitError, "listen on port %u: %s", o_.port, std::strerror(-rc));
    std::printf("# srdma_soak server: listening on port %u (transport %s)\n", o_.port,
                node_.eng().transport_name());
    std::fflush(stdout);
    t0_ = last_progress_ = last_activity_ = Clock::now();
    baseline_ = Resources::now(node_.eng());
  }

  void pass() {
    node_.pump([&](const CmEvent& ev) { on_cm(ev); }, [&](const Wc& wc) { on_wc(wc); });
    bool moved = false;
    const Clock::time_point now = Clock::now();
    // A sweep steps the connections whose client wrote a notice or its end
    // since (every one on each eighth sweep: a credit or done word the send
    // queue refused waits for a step).
    plan_.run(
        [&] {
          if (++sweeps_ % 8 == 0) {
            for (auto& [qp, c] : conns_) moved |= c->step(rss_kb_, now);
            return;
          }
          ctrls_.scan([&](uint32_t slot, const ServerCtrl& b) {
            ServerConn* c = by_slot_.at(slot);
            if (c != nullptr && by_slot_.changed(slot, Seen{load(b.notify), load(b.end)}))
              moved |= c->step(rss_kb_, now);
          });
        },
        [&](uint32_t n) {
          if (auto it = by_num_.find(n); it != by_num_.end())
            moved |= it->second->step(rss_kb_, now);
        });
    if (moved) last_progress_ = now;
  }

  void on_cm(const CmEvent& ev) {
    last_progress_ = last_activity_ = Clock::now();
    switch (ev.type) {
      case CmEventType::kConnectRequest: return on_request(ev);
      case CmEventType::kEstablished:
        if (auto it = conns_.find(ev.qp); it != conns_.end()) it->second->set_established();
        return;
      case CmEventType::kDisconnected: return on_disconnect(ev);
      default: return;
    }
  }

  void on_request(const CmEvent& ev) {
    Hello h;
    const char* why = nullptr;
    if (!decode(ev.private_data, &h)) why = "not an srdma_soak client";
    else if (h.kind == static_cast<uint8_t>(HelloKind::kBye)) return bye(ev.req);
    else if (h.kind != static_cast<uint8_t>(HelloKind::kData) || h.depth == 0 ||
             h.depth > kMaxDepth || h.max_size < 8 || h.max_size > kMaxSize)
      why = "bad parameters";
    if (why) {
      node_.eng().reject(ev.req, why, std::strlen(why));
      return;
    }
    auto c = std::make_unique<ServerConn>(node_, ctrls_, h, &mism_);
    const Welcome w = c->welcome();
    if (int rc = node_.eng().accept(ev.req, c->qp(), &w, sizeof(w)); rc < 0) {
      std::fprintf(stderr, "srdma_soak server: accept: %s\n", std::strerror(-rc));
      return;
    }
    ++served_;
    by_num_[c->qp()->num()] = c.get();
    by_slot_.put(c->slot(), c.get(), ctrls_.slots());
    conns_[c->qp()] = std::move(c);
  }

  void on_disconnect(const CmEvent& ev) {
    auto it = conns_.find(ev.qp);
    if (it == conns_.end()) return;
    if (!it->second->finished()) return lose(it->second.get(), describe_status(ev.status, ev.term));
    drop(it->second.get());
  }

  void on_wc(const Wc& wc) {
    auto it = by_num_.find(wc.qp_num);
    if (it == by_num_.end()) return;  // flushed work of a QP already destroyed
    plan_.touch(wc.qp_num);
    if (it->second->on_wc(wc)) return;
    lose(it->second, "a completion failed");
  }

  bool surviving() const { return o_.serve_until_idle_s > 0; }

  // A connection that ended before its checks were done. With
  // --serve-until-idle it is an error event the server survives. The line
  // says how long the client had been silent (for a killed client: its time
  // to detection) and when (epoch seconds, to match a kill's time stamp).
  void lose(ServerConn* c, const std::string& why) {
    ++lost_;
    const double silent = seconds_since(c->last_moved());
    const double epoch = std::chrono::duration<double>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
    std::fprintf(stderr, "srdma_soak server: %s: lost before the end after %.3f s silent (at "
                 "%.3f): %s%s\n", c->describe().c_str(), silent, epoch, why.c_str(),
                 surviving() ? "; survived" : "");
    drop(c);
  }

  // Forgets a connection, keeping its figures.
  void drop(ServerConn* c) {
    closed_ops_ += c->credit().ops_checked;
    closed_bytes_ += c->credit().bytes_checked;
    by_num_.erase(c->qp()->num());
    by_slot_.drop(c->slot());
    conns_.erase(c->qp());
    last_activity_ = Clock::now();
    if (conns_.empty() && surviving() && idle_rss_kb_ == 0) idle_rss_kb_ = live_rss_kb();
  }

  // --serve-until-idle: nothing open and nothing asked for in that long.
  bool idle_over() const {
    return surviving() && conns_.empty() &&
           seconds_since(last_activity_) > o_.serve_until_idle_s;
  }

  // The client's last word: reject it with our account, then stop.
  void bye(ConnReq* req) {
    const uint64_t live_kb = live_rss_kb();
    const MemFigures m = read_mem();
    Farewell f;
    f.mismatches = mism_.count();
    f.lost = lost_;
    f.ops = ops();
    f.bytes = bytes();
    f.conns = served_;
    f.peak_rss_kb = m.hwm_kb;
    f.final_rss_kb = live_kb;
    f.open_conns = conns_.size();
    node_.eng().reject(req, &f, sizeof(f));
    bye_ = true;
    farewell_ = f;
  }

  int farewell() {
    // Keep the engine running briefly so that the reject leaves.
    const Clock::time_point until = Clock::now() + std::chrono::milliseconds(500);
    while (Clock::now() < until) {
      node_.pump([](const CmEvent&) {}, [](const Wc&) {});
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // Checked with the listener still open, as it was for the baseline.
    const bool back = !surviving() || resources_back();
    node_.eng().close_listener(listener_);
    if (!back) return summary(nullptr, "resources not back");
    return summary(nullptr);
  }

  // With --serve-until-idle: the engine's objects, held frames and mbufs back
  // to what they were before the first client, descriptors too, and live RSS
  // within --flat-mib of what it was when the server first fell idle (the
  // first clients touch the buffer pools for good). Prints both.
  bool resources_back() {
    Resources now = Resources::now(node_.eng());
    Resources want = baseline_;
    want.rss_kb = idle_rss_kb_ ? idle_rss_kb_ : now.rss_kb;
    const uint64_t slack_kb = static_cast<uint64_t>(o_.flat_mib * 1024);
    // Lingering closes drain over a few more polls: up to 2 s of them.
    for (int i = 0; i < 200 && !now.back_to(want, slack_kb); ++i) {
      node_.pump([](const CmEvent&) {}, [](const Wc&) {});
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      now = Resources::now(node_.eng());
    }
    const bool ok = now.back_to(want, slack_kb);
    std::printf("# server resources: baseline %s; first idle rss %.1f MiB\n"
                "SERVER RESOURCES %s (rss bound +%.1f MiB) %s\n",
                baseline_.describe().c_str(), mib(want.rss_kb), now.describe().c_str(),
                o_.flat_mib, ok ? "back" : "NOT BACK");
    return ok;
  }

  // failure: an error (exit 2); leak: resources not back (exit 1).
  int summary(const char* failure, const char* leak = nullptr) {
    const MemFigures m = read_mem();
    const bool lost_fails = lost_ && !surviving();
    const int code = failure || lost_fails ? kExitError : mism_.count() || leak ? kExitMismatch : 0;
    if (leak) failure = leak;
    std::printf("SERVER SUMMARY duration %.1f s conns %" PRIu64 " ops %" PRIu64
                " bytes_verified %" PRIu64 " mismatches %" PRIu64 " lost %" PRIu64
                " rss peak %.1f final %.1f MiB exit %d%s%s\n",
                seconds_since(t0_), served_, ops(), bytes(), mism_.count(), lost_,
                mib(m.hwm_kb), mib(m.rss_kb), code, failure ? ": " : "", failure ? failure : "");
    std::fflush(stdout);
    return code;
  }

  uint64_t ops() const {
    uint64_t n = closed_ops_;
    for (const auto& [qp, c] : conns_) n += c->credit().ops_checked;
    return n;
  }
  uint64_t bytes() const {
    uint64_t n = closed_bytes_;
    for (const auto& [qp, c] : conns_) n += c->credit().bytes_checked;
    return n;
  }

  void report_due() {
    const Clock::time_point now = Clock::now();
    if (now < next_report_) return;
    next_report_ = tools::deadline_after(o_.report_s);
    rss_kb_ = read_mem().rss_kb;
    std::printf("[%7.1f s] server conns %4zu ops %11" PRIu64 " verified %9.3f GiB errors %" PRIu64
                " lost %" PRIu64 " | rss %.1f MiB | %s\n",
                seconds_since(t0_), conns_.size(), ops(), gib(bytes()), mism_.count(), lost_,
                mib(rss_kb_), node_.counters().c_str());
    std::fflush(stdout);
  }

  // A client that died (or a wedged engine) must not keep us forever.
  void check_alive() {
    const Clock::time_point now = Clock::now();
    const char* why = nullptr;
    if (deadline_ != Clock::time_point{} && now > deadline_) why = "timeout";
    if (!why && surviving()) {
      // Stalls are seconds long: a walk over every connection each 100 ms.
      if (now < next_stall_walk_) return;
      next_stall_walk_ = now + std::chrono::milliseconds(100);
      return drop_stalled(now);
    }
    // Before the first client there is no peer to be dead yet.
    const bool waiting_first = served_ == 0;
    if (!waiting_first && now - last_progress_ > std::chrono::duration<double>(o_.stall_s))
      why = "stalled: no progress for the --stall time (client dead or engine wedged)";
    if (!why) return;
    for (const auto& [qp, c] : conns_) std::fprintf(stderr, "  %s\n", c->describe().c_str());
    std::fprintf(stderr, "srdma_soak server: %s\n", why);
    std::exit(summary(why));
  }

  // --serve-until-idle: a connection whose client has been silent for
  // --stall (a dead peer lwIP has not given up on yet) is lost; the server
  // goes on.
  void drop_stalled(Clock::time_point now) {
    const auto stall = std::chrono::duration<double>(o_.stall_s);
    for (auto it = conns_.begin(); it != conns_.end();) {
      ServerConn* c = (it++)->second.get();  // lose() erases c's entry
      if (now - c->last_moved() > stall) lose(c, "stalled: no progress for the --stall time");
    }
  }

  const Options& o_;
  Node node_;
  CtrlPool<ServerCtrl> ctrls_{node_};  // before conns_: they give their blocks back
  Listener* listener_ = nullptr;
  std::unordered_map<Qp*, std::unique_ptr<ServerConn>> conns_;
  std::unordered_map<uint32_t, ServerConn*> by_num_;  // completions name QPs by number
  StepPlan plan_;
  // By control block slot: the connection, and its client's notice and end
  // words as its last sweep saw them.
  struct Seen {
    uint64_t notify = 0, end = 0;
    bool operator==(const Seen&) const = default;
  };
  SlotTable<ServerConn, Seen> by_slot_;
  uint64_t sweeps_ = 0;
  Mismatches mism_;
  Clock::time_point deadline_{}, t0_, last_progress_, next_report_{}, next_stall_walk_{};
  Clock::time_point last_activity_;  // a request, an event or a connection gone
  Resources baseline_;               // before the first client
  uint64_t idle_rss_kb_ = 0;         // live RSS when the server first fell idle
  uint64_t served_ = 0, lost_ = 0, closed_ops_ = 0, closed_bytes_ = 0, rss_kb_ = 0;
  bool bye_ = false;
  Farewell farewell_;
};

}  // namespace

int run_server(const Options& o) { return Server(o).run(); }

}  // namespace softrdma::soak
