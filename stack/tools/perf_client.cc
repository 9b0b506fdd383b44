// srdma_perf's client: chooses the test, runs every size, prints the table.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stack/tools/addresses.h"
#include "stack/tools/message_check.h"
#include "stack/tools/perf_atomics.h"
#include "stack/tools/perf_endpoint.h"
#include "stack/tools/perf_roles.h"
#include "stack/tools/result_table.h"

namespace softrdma::perf {
namespace {

// The table's head and rows for this run.
class Report {
 public:
  Report(const Options& o, const Geometry& g, const iwarp::MpaResult& mpa)
      : o_(o),
        tags_{.csv = o.csv, .tool = "srdma_perf", .op = op_name(o.op), .depth = g.window(),
              .crc = mpa.crc, .markers = mpa.rx_markers || mpa.tx_markers, .verify = o.verify,
              .lat_kind = full_rtt(o.op) ? "rtt" : "half_rtt"} {}

  void header(const char* transport) const {
    if (o_.csv) {
      print_csv_header();
      return;
    }
    std::printf("# srdma_perf: %s %s to %s:%u | transport %s | crc %s | markers %s | check %s\n",
                op_name(o_.op), o_.kind == Kind::kLat ? "latency" : "bandwidth", o_.host.c_str(),
                o_.port, transport, tags_.crc ? "on" : "off", tags_.markers ? "on" : "off",
                o_.verify ? "on (timings include it)" : "off");
    const std::string how = " with " + std::to_string(tags_.depth) + " in flight";
    print_table_head(o_.kind,
                     full_rtt(o_.op) ? "full round trip (one operation and its response)"
                                     : "half round trip (ping-pong)",
                     how.c_str(), "confirms");
  }
  void lat(uint64_t size, uint64_t n, const LatSummary& s) const {
    print_lat_row(tags_, size, n, s);
  }
  void bw(uint64_t size, uint64_t n, double secs) const { print_bw_row(tags_, size, n, secs); }

 private:
  const Options& o_;
  RowTags tags_;
};

class Client {
 public:
  Client(const Options& o, Clock::time_point deadline)
      : o_(o), sizes_(resolve_sizes(o)), ep_(o.engine, deadline),
        mism_("client") {}

  int run() {
    ep_.setup(geometry_for(o_.op, o_.kind, o_.verify, o_.depth,
                           *std::max_element(sizes_.begin(), sizes_.end())));
    connect();
    report_ = std::make_unique<Report>(o_, ep_.geometry(), ep_.qp()->mpa());
    report_->header(ep_.engine().transport_name());
    for (uint64_t size : sizes_) run_size(size);
    ep_.close_active();
    ep_.linger(o_.linger_s);
    return 0;
  }

 private:
  // Connects, retrying while the server is not listening yet.
  void connect() {
    const sockaddr_in peer = resolve_or_die(o_.host, o_.port);
    const Geometry& g = ep_.geometry();
    Hello h;
    h.op = static_cast<uint8_t>(o_.op);
    h.kind = static_cast<uint8_t>(o_.kind);
    h.verify = o_.verify;
    h.depth = g.depth;
    h.slots = g.slots;
    h.n_sizes = static_cast<uint32_t>(sizes_.size());
    h.stride = g.stride;
    h.data = ep_.data_region();
    h.ctrl = ep_.ctrl_region();
    Engine& eng = ep_.engine();
    for (;;) {
      if (int rc = eng.connect(ep_.qp(), peer, &h, sizeof(h)); rc < 0)
        die(kExitError, "connect: %s", std::strerror(-rc));
      CmEvent ev;
      for (;;) {
        eng.progress(1000);
        if (eng.poll_cm(&ev)) break;
        ep_.check_deadline("the connection");
      }
      if (ev.type == CmEventType::kEstablished) {
        Welcome w;
        if (!decode_exact(ev.private_data, &w) || w.magic != kMagic || w.version != kProtoVersion)
          die(kExitError, "the peer is not a matching srdma_perf server");
        if (!ep_.set_peer(w.data, w.ctrl)) die(kExitError, "the server's buffers are too small");
        warn_crc(o_.crc_set, o_.engine.crc, ep_.qp()->mpa(), "server");
        return;
      }
      if (ev.type == CmEventType::kRejected) {
        std::string why(ev.private_data.begin(), ev.private_data.end());
        die(kExitError, "rejected by the server: %s", why.c_str());
      }
      if (ev.type != CmEventType::kUnreachable || ev.status != -ECONNREFUSED) {
        die(kExitError, "cannot connect to %s:%u: %s (%s)", o_.host.c_str(), o_.port,
            to_string(ev.type), describe_status(ev.status, 0).c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // not listening yet
      ep_.check_deadline("the server to listen");
    }
  }

  void run_size(uint64_t size) {
    SizeRun r = plan_for(o_, size);
    r.base = base_;
    if (o_.op == Op::kWrite && o_.kind == Kind::kLat) ep_.rx(0)[size - 1] = 0;
    post_seq_ = done_seq_ = AtomicSeq(o_.op, size, r.base);
    const uint64_t mism0 = mism_.count();
    ep_.send_ctrl({.type = MsgType::kBegin, .size = size, .total = r.total, .warm = r.warm,
                   .base = r.base});
    ep_.wait_ctrl(MsgType::kReady);
    uint64_t server_errors = 0;
    if (o_.kind == Kind::kLat) {
      std::vector<double> samples = run_lat(r);
      server_errors = finish_size();
      report_->lat(size, r.measured(), summarize(samples, full_rtt(o_.op) ? 1.0 : 0.5));
    } else {
      double secs = run_bw(r, &server_errors);
      report_->bw(size, r.measured(), secs);
    }
    base_ += r.total;
    const uint64_t ours = mism_.count() - mism0;
    if (ours || server_errors) {
      ep_.set_lost_code(kExitMismatch);
      die(kExitMismatch, "DATA VERIFICATION FAILED at size %" PRIu64 ": %" PRIu64
          " bad at the client, %" PRIu64 " at the server", size, ours, server_errors);
    }
  }

  // END → DONE; returns the server's mismatch count.
  uint64_t finish_size() {
    ep_.send_ctrl({.type = MsgType::kEnd});
    return ep_.wait_ctrl(MsgType::kDone).errors;
  }

  std::vector<double> run_lat(const SizeRun& r) {
    std::vector<double> samples;
    samples.reserve(r.measured());
    for (uint64_t k = 0; k < r.total; ++k) {
      double ns = lat_once(r, k);
      if (k >= r.warm) samples.push_back(ns);
    }
    return samples;
  }

  // One timed operation (and its answer); returns the round trip in ns.
  double lat_once(const SizeRun& r, uint64_t k) {
    const uint64_t n = r.size;
    const bool check = o_.verify;
    uint8_t* const in = ep_.rx(0);
    uint8_t* const out = ep_.tx(0);
    Clock::time_point t0, t1;
    switch (o_.op) {
      case Op::kSend: {
        ep_.post_recv(in, n, k);
        const Expect e{seed_of(n, k, Dir::kToServer)};
        if (check) fill(out, n, e);
        const SendWr wr = ep_.data_wr(WrOpcode::kSend, k, out, n, 0);
        t0 = Clock::now();
        ep_.post(wr);
        const Wc wc = ep_.wait_wc(WcOpcode::kRecv, "the echoed send");
        t1 = Clock::now();
        if (check && wc.byte_len != n)
          mism_.report("echo %" PRIu64 " has %u bytes, sent %" PRIu64, k, wc.byte_len, n);
        if (check) mism_.check("send echo", n, k, in, e);
        break;
      }
      case Op::kWrite: {
        const uint8_t tag = tag_of(k);
        if (check) {
          fill(out, n, {seed_of(n, k, Dir::kToServer), tag});
        } else {
          out[n - 1] = tag;
        }
        const SendWr wr = ep_.data_wr(WrOpcode::kWrite, k, out, n, ep_.peer_rx(0));
        const uint8_t& flag = in[n - 1];
        t0 = Clock::now();
        ep_.post(wr);
        ep_.wait("the server's write", [&] { return load(flag) == tag; });
        t1 = Clock::now();
        if (check)
          mism_.check("write from the server", n, k, in, {seed_of(n, k, Dir::kToClient), tag});
        in[n - 1] = 0;
        ep_.wcs().clear();
        break;
      }
      case Op::kWriteImm: {
        ep_.post_recv(nullptr, 0, k);
        if (check) fill(out, n, {seed_of(n, k, Dir::kToServer)});
        SendWr wr = ep_.data_wr(WrOpcode::kWriteWithImm, k, out, n, ep_.peer_rx(0));
        wr.imm_data = k;
        t0 = Clock::now();
        ep_.post(wr);
        const Wc wc = ep_.wait_wc(WcOpcode::kRecvRdmaImm, "the server's write_imm");
        t1 = Clock::now();
        if (check && wc.imm_data != k)
          mism_.report("immediate data %" PRIu64 ", expected %" PRIu64, wc.imm_data, k);
        if (check)
          mism_.check("write_imm from the server", n, k, in, {seed_of(n, k, Dir::kToClient)});
        break;
      }
      case Op::kRead: {
        if (check) std::memset(in, static_cast<int>(mix64(k)), n);  // stale data must not pass
        const SendWr wr = ep_.data_wr(WrOpcode::kRead, k, in, n, ep_.peer_tx(0));
        t0 = Clock::now();
        ep_.post(wr);
        ep_.wait_wc(WcOpcode::kRead, "the read response");
        t1 = Clock::now();
        if (check) mism_.check("read", n, k, in, {seed_of(n, 0, Dir::kReadSource)});
        break;
      }
      case Op::kFetchAdd:
      case Op::kCmpSwap: {
        const AtomicSeq::Step s = post_seq_.next();
        const uint64_t poison = ~s.expect;
        std::memcpy(in, &poison, 8);
        const SendWr wr = atomic_wr(k, in, s);
        t0 = Clock::now();
        ep_.post(wr);
        ep_.wait_wc(o_.op == Op::kFetchAdd ? WcOpcode::kFetchAdd : WcOpcode::kCmpSwap,
                    "the atomic response");
        t1 = Clock::now();
        if (check) check_atomic(k, in, s.expect);
        break;
      }
    }
    return std::chrono::duration<double, std::nano>(t1 - t0).count();
  }

  SendWr atomic_wr(uint64_t k, const uint8_t* result, const AtomicSeq::Step& s) const {
    SendWr wr = ep_.data_wr(
        o_.op == Op::kFetchAdd ? WrOpcode::kAtomicFetchAdd : WrOpcode::kAtomicCmpSwap, k,
        result, 8, ep_.peer_rx(0));
    wr.compare_add = s.compare_add;
    wr.swap = s.swap;
    return wr;
  }

  void check_atomic(uint64_t k, const uint8_t* result, uint64_t expect) {
    uint64_t got;
    std::memcpy(&got, result, 8);
    if (got != expect) {
      mism_.report("%s %" PRIu64 " returned 0x%016" PRIx64 ", expected 0x%016" PRIx64,
                   op_name(o_.op), k, got, expect);
    }
  }

  // Keeps the window full; returns the seconds from the end of warm-up until
  // the server confirmed the last message.
  double run_bw(const SizeRun& r, uint64_t* server_errors) {
    const Geometry& g = ep_.geometry();
    const uint32_t window = g.window();
    const bool flow = uses_recv(o_.op) || (o_.op == Op::kWrite && o_.verify);
    notify_batch_ = std::max<uint32_t>(1, g.slots / 2);
    uint64_t posted = 0, done = 0;
    Clock::time_point t_start = Clock::now();
    while (done < r.total) {
      // Warm-up drains before the clock starts: no measured operation is
      // posted before it (with fewer operations than the window, all of
      // them would otherwise be in flight, or done, by then).
      const uint64_t limit = done < r.warm ? r.warm : r.total;
      while (posted < limit && posted - done < window &&
             (!flow || r.base + posted < ep_.credit())) {
        issue_bw(r, posted++);
      }
      ep_.pump();
      ep_.check_deadline("the bandwidth run");
      ep_.take(&batch_);
      for (const Wc& wc : batch_) {
        complete_bw(r, done, wc);
        if (++done == r.warm) t_start = Clock::now();
      }
    }
    *server_errors = finish_size();
    return seconds_since(t_start);
  }

  void issue_bw(const SizeRun& r, uint64_t k) {
    const uint64_t n = r.size;
    const uint64_t slot = k % ep_.geometry().slots;
    const bool check = o_.verify;
    switch (o_.op) {
      case Op::kSend:
        if (check) fill(ep_.tx(slot), n, {seed_of(n, k, Dir::kToServer)});
        ep_.post(ep_.data_wr(WrOpcode::kSend, k, ep_.tx(slot), n, 0));
        return;
      case Op::kWrite:
      case Op::kWriteImm: {
        if (check) fill(ep_.tx(slot), n, {seed_of(n, k, Dir::kToServer)});
        const bool imm = o_.op == Op::kWriteImm;
        SendWr wr = ep_.data_wr(imm ? WrOpcode::kWriteWithImm : WrOpcode::kWrite, k, ep_.tx(slot),
                                n, ep_.peer_rx(slot));
        wr.imm_data = k;
        ep_.post(wr);
        // Plain Writes tell the server nothing: say how far we got, in
        // batches, so it can check slots before they are reused.
        if (!imm && check && ((k + 1) % notify_batch_ == 0 || k + 1 == r.total))
          ep_.write_notify(r.base + k + 1, notifies_++);
        return;
      }
      case Op::kRead:
        if (check) std::memset(ep_.rx(slot), static_cast<int>(mix64(k)), n);
        ep_.post(ep_.data_wr(WrOpcode::kRead, k, ep_.rx(slot), n, ep_.peer_tx(slot)));
        return;
      case Op::kFetchAdd:
      case Op::kCmpSwap:
        ep_.post(atomic_wr(k, ep_.rx(slot), post_seq_.next()));
        return;
    }
  }

  // Completions arrive in posting order (one QP, one send queue).
  void complete_bw(const SizeRun& r, uint64_t k, const Wc& wc) {
    if (!o_.verify) return;
    const uint64_t slot = k % ep_.geometry().slots;
    if (o_.op == Op::kRead) {
      if (wc.byte_len != r.size)
        mism_.report("read %" PRIu64 " completed %u bytes, expected %" PRIu64, k, wc.byte_len,
                     r.size);
      mism_.check("read", r.size, k, ep_.rx(slot), {seed_of(r.size, slot, Dir::kReadSource)});
    } else if (is_atomic(o_.op)) {
      check_atomic(k, ep_.rx(slot), done_seq_.next().expect);
    }
  }

  const Options& o_;
  std::vector<uint64_t> sizes_;
  Endpoint ep_;
  Mismatches mism_;
  std::unique_ptr<Report> report_;
  AtomicSeq post_seq_, done_seq_;
  std::vector<Wc> batch_;
  uint64_t base_ = 0;  // flow-controlled messages of earlier sizes
  uint32_t notify_batch_ = 1;
  uint64_t notifies_ = 0;
};

}  // namespace

int run_client(const Options& o, Clock::time_point deadline) { return Client(o, deadline).run(); }

}  // namespace softrdma::perf
