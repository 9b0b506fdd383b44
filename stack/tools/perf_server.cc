// srdma_perf's server: takes the test from the client's request, answers,
// checks, and reports what it found.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "stack/tools/addresses.h"
#include "stack/tools/message_check.h"
#include "stack/tools/perf_atomics.h"
#include "stack/tools/perf_endpoint.h"
#include "stack/tools/perf_roles.h"

namespace softrdma::perf {
namespace {

class Server {
 public:
  Server(const Options& o, Clock::time_point deadline)
      : o_(o), ep_(o.engine, deadline), mism_("server") {}

  int run() {
    accept_client();
    for (uint32_t i = 0; i < hello_.n_sizes; ++i) run_size();
    ep_.await_close();
    ep_.linger(o_.linger_s);
    if (!o_.csv) std::printf("# srdma_perf server: done, %" PRIu64 " mismatches\n", mism_.count());
    return mism_.count() ? kExitMismatch : 0;
  }

 private:
  // Listens, and takes the first client whose Hello is within the
  // protocol's limits (perf_protocol.h): nothing is allocated for a client
  // before its Hello has passed, and a rejected client does not end the
  // server.
  void accept_client() {
    Engine& eng = ep_.engine();
    const sockaddr_in any = any_address(o_.port);
    Listener* l = nullptr;
    if (int rc = eng.listen(any, 16, &l); rc < 0)
      die(kExitError, "listen on port %u: %s", o_.port, std::strerror(-rc));
    if (!o_.csv) {
      std::printf("# srdma_perf server: listening on port %u (transport %s)\n", o_.port,
                  eng.transport_name());
      std::fflush(stdout);
    }
    ConnReq* req = nullptr;
    while (!req) {
      eng.progress(10000);  // idle until a client comes: nothing is timed yet
      ep_.check_deadline("a client");
      CmEvent ev;
      while (!req && eng.poll_cm(&ev)) {
        if (ev.type != CmEventType::kConnectRequest) continue;
        const std::string why = decode_exact(ev.private_data, &hello_)
                                    ? hello_problem(hello_)
                                    : "not a matching srdma_perf client";
        if (!why.empty()) {
          std::fprintf(stderr, "srdma_perf: rejected a client: %s\n", why.c_str());
          eng.reject(ev.req, why.data(), why.size());
          continue;
        }
        req = ev.req;
      }
    }
    const Geometry g = geometry_of(hello_);
    ep_.setup(g);
    if (!ep_.set_peer(hello_.data, hello_.ctrl))  // hello_problem has checked them
      die(kExitError, "protocol: client buffers too small");
    Welcome w;
    w.data = ep_.data_region();
    w.ctrl = ep_.ctrl_region();
    if (int rc = eng.accept(req, ep_.qp(), &w, sizeof(w)); rc < 0)
      die(kExitError, "accept: %s", std::strerror(-rc));
    eng.close_listener(l);
    ep_.wait("the client's RTR", [&] { return ep_.established(); });
    const iwarp::MpaResult& mpa = ep_.qp()->mpa();
    warn_crc(o_.crc_set, o_.engine.crc, mpa, "client");
    if (!o_.csv) {
      std::printf("# srdma_perf server: client: %s %s, %u sizes, check %s, crc %s, markers %s\n",
                  op_name(g.op), g.kind == Kind::kLat ? "lat" : "bw", hello_.n_sizes,
                  g.verify ? "on" : "off", mpa.crc ? "on" : "off",
                  mpa.rx_markers || mpa.tx_markers ? "on" : "off");
      std::fflush(stdout);
    }
  }

  void run_size() {
    const CtrlMsg b = ep_.wait_ctrl(MsgType::kBegin);
    const Geometry& g = ep_.geometry();
    if (b.size > g.stride || !size_meaningful(g.op, g.kind, b.size) || b.total == 0 ||
        b.warm >= b.total || b.base != base_)
      die(kExitError, "protocol: bad BEGIN (size %" PRIu64 ")", b.size);
    const SizeRun r{.size = b.size, .total = b.total, .warm = b.warm, .base = b.base};
    const uint64_t mism0 = mism_.count();
    prepare(r);
    ep_.send_ctrl({.type = MsgType::kReady});
    serve(r);
    ep_.wait_ctrl(MsgType::kEnd);
    finish(r);
    const uint64_t errors = mism_.count() - mism0;
    if (errors) ep_.set_lost_code(kExitMismatch);
    ep_.send_ctrl({.type = MsgType::kDone, .errors = errors});
    base_ += r.total;
  }

  bool lat() const { return ep_.geometry().kind == Kind::kLat; }
  Op op() const { return ep_.geometry().op; }
  bool check() const { return ep_.geometry().verify; }

  // Before READY: receives, sources, flags, and the first credit.
  void prepare(const SizeRun& r) {
    const Geometry& g = ep_.geometry();
    ep_.wcs().clear();
    switch (op()) {
      case Op::kSend:
      case Op::kWriteImm:
        if (lat()) {
          post_data_recv(r, 0);
          return;
        }
        posted_ = 0;
        while (posted_ < std::min<uint64_t>(g.recv_window(), r.total)) post_data_recv(r, posted_++);
        ep_.write_credit(r.base + posted_);
        return;
      case Op::kWrite:
        if (lat()) {
          ep_.rx(0)[r.size - 1] = 0;
        } else if (check()) {
          verified_ = r.base;
          ep_.write_credit(r.base + g.slots);
        }
        return;
      case Op::kRead:
        if (check())
          for (uint32_t s = 0; s < g.slots; ++s)
            fill(ep_.tx(s), r.size, {seed_of(r.size, s, Dir::kReadSource)});
        return;
      case Op::kFetchAdd:
      case Op::kCmpSwap: {
        const uint64_t v = AtomicSeq(op(), r.size, r.base).value();
        std::memcpy(ep_.rx(0), &v, 8);
        return;
      }
    }
  }

  void post_data_recv(const SizeRun& r, uint64_t j) {
    if (op() == Op::kSend) {
      ep_.post_recv(ep_.rx(j % ep_.geometry().slots), r.size, j);
    } else {
      ep_.post_recv(nullptr, 0, j);  // Immediate Data takes a receive, no buffer
    }
  }

  // The server's part of the measured phase; returns with END due next.
  void serve(const SizeRun& r) {
    if (lat()) {
      if (op() == Op::kSend || op() == Op::kWrite || op() == Op::kWriteImm)
        for (uint64_t k = 0; k < r.total; ++k) pong(r, k);
      return;
    }
    if (uses_recv(op())) return receive_bw(r);
    if (op() == Op::kWrite && check()) {
      while (!ep_.ctrl_arrived()) {
        ep_.pump();
        ep_.check_deadline("END");
        verify_notified(r);
      }
      verify_notified(r);  // END follows every Write and notify on the stream
      if (verified_ != r.base + r.total) {
        mism_.report("writes notified up to %" PRIu64 " of %" PRIu64, verified_ - r.base,
                     r.total);
      }
    }
  }

  // Answers ping k of a latency run.
  void pong(const SizeRun& r, uint64_t k) {
    const uint64_t n = r.size;
    uint8_t* const in = ep_.rx(0);
    uint8_t* const out = ep_.tx(0);
    switch (op()) {
      case Op::kSend: {
        const Wc wc = ep_.wait_wc(WcOpcode::kRecv, "the client's send");
        if (check() && wc.byte_len != n)
          mism_.report("send %" PRIu64 " has %u bytes, expected %" PRIu64, k, wc.byte_len, n);
        if (check()) mism_.check("send", n, k, in, {seed_of(n, k, Dir::kToServer)});
        if (k + 1 < r.total) post_data_recv(r, k + 1);  // before the echo frees the client
        ep_.post(ep_.data_wr(WrOpcode::kSend, k, in, n, 0));
        return;
      }
      case Op::kWrite: {
        const uint8_t tag = tag_of(k);
        const uint8_t& flag = in[n - 1];
        ep_.wait("the client's write", [&] { return load(flag) == tag; });
        if (check()) mism_.check("write", n, k, in, {seed_of(n, k, Dir::kToServer), tag});
        in[n - 1] = 0;
        if (check()) {
          fill(out, n, {seed_of(n, k, Dir::kToClient), tag});
        } else {
          out[n - 1] = tag;
        }
        ep_.wcs().clear();
        ep_.post(ep_.data_wr(WrOpcode::kWrite, k, out, n, ep_.peer_rx(0)));
        return;
      }
      case Op::kWriteImm: {
        const Wc wc = ep_.wait_wc(WcOpcode::kRecvRdmaImm, "the client's write_imm");
        if (check() && wc.imm_data != k)
          mism_.report("immediate data %" PRIu64 ", expected %" PRIu64, wc.imm_data, k);
        if (check()) mism_.check("write_imm", n, k, in, {seed_of(n, k, Dir::kToServer)});
        if (k + 1 < r.total) post_data_recv(r, k + 1);
        if (check()) fill(out, n, {seed_of(n, k, Dir::kToClient)});
        SendWr wr = ep_.data_wr(WrOpcode::kWriteWithImm, k, out, n, ep_.peer_rx(0));
        wr.imm_data = k;
        ep_.post(wr);
        return;
      }
      default:
        return;
    }
  }

  // Bandwidth Sends / Write-with-Immediate: check, repost, return credit.
  void receive_bw(const SizeRun& r) {
    const Geometry& g = ep_.geometry();
    const uint64_t batch = std::max<uint64_t>(1, g.recv_window() / 4);
    const WcOpcode want = op() == Op::kSend ? WcOpcode::kRecv : WcOpcode::kRecvRdmaImm;
    uint64_t received = 0, unreported = 0;
    while (received < r.total) {
      ep_.pump();
      ep_.check_deadline("the client's messages");
      ep_.take(&batch_);
      for (const Wc& wc : batch_) {
        if (wc.opcode != want) continue;
        const uint64_t k = received++;
        if (check()) {
          const uint64_t slot = k % g.slots;
          if (want == WcOpcode::kRecv && wc.byte_len != r.size)
            mism_.report("send %" PRIu64 " has %u bytes, expected %" PRIu64, k, wc.byte_len,
                         r.size);
          if (want == WcOpcode::kRecvRdmaImm && wc.imm_data != k)
            mism_.report("immediate data %" PRIu64 ", expected %" PRIu64, wc.imm_data, k);
          mism_.check(op_name(op()), r.size, k, ep_.rx(slot), {seed_of(r.size, k, Dir::kToServer)});
        }
        if (posted_ < r.total) {  // the slot just checked is the one reposted
          post_data_recv(r, posted_++);
          ++unreported;
        }
      }
      if (unreported >= batch || (unreported > 0 && posted_ == r.total)) {
        ep_.write_credit(r.base + posted_);
        unreported = 0;
      }
    }
  }

  // Verified bandwidth Writes: check what the client says it has written,
  // then release those slots.
  void verify_notified(const SizeRun& r) {
    const uint64_t upto = ep_.notify();
    if (upto <= verified_) return;
    if (upto > r.base + r.total) die(kExitError, "protocol: notify past the end of the run");
    const uint32_t slots = ep_.geometry().slots;
    for (uint64_t m = verified_; m < upto; ++m) {
      const uint64_t k = m - r.base;
      mism_.check("write", r.size, k, ep_.rx(k % slots), {seed_of(r.size, k, Dir::kToServer)});
    }
    verified_ = upto;
    ep_.write_credit(verified_ + slots);
  }

  // After END: what can only be checked once all operations are done.
  void finish(const SizeRun& r) {
    if (!is_atomic(op()) || !check()) return;
    AtomicSeq seq(op(), r.size, r.base);
    for (uint64_t k = 0; k < r.total; ++k) seq.next();
    uint64_t word;
    std::memcpy(&word, ep_.rx(0), 8);
    if (word != seq.value()) {
      mism_.report("%s target word is 0x%016" PRIx64 " after %" PRIu64
                   " ops, expected 0x%016" PRIx64,
                   op_name(op()), word, r.total, seq.value());
    }
  }

  const Options& o_;
  Endpoint ep_;
  Mismatches mism_;
  Hello hello_;
  uint64_t base_ = 0;
  uint64_t posted_ = 0;    // receive_bw: receives posted this size
  uint64_t verified_ = 0;  // verified Writes: messages checked (cumulative)
  std::vector<Wc> batch_;
};


}  // namespace

int run_server(const Options& o, Clock::time_point deadline) { return Server(o, deadline).run(); }

}  // namespace softrdma::perf
