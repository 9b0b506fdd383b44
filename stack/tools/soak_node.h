// One engine shared by all connections of a soak process, the mismatch
// count, and the memory watch.
#pragma once

#include <cstdarg>

#include "stack/tools/engine_pump.h"
#include "stack/tools/soak_protocol.h"
#include "stack/tools/soak_resources.h"

namespace softrdma::soak {

inline constexpr uint32_t kCqDepth = 4096;   // shared by all QPs (the CQ spills beyond)
inline constexpr uint64_t kMaxReports = 10;  // mismatches printed in detail

// The engine, a PD and one CQ for all QPs; completions are routed by QP
// number, CM events by QP (or, for requests, handed over as they are).
class Node {
 public:
  Node() : eng_(EngineConfig::from_env()) {
    if (!eng_.ok()) die(kExitError, "the engine's transport did not start");
    pd_ = eng_.alloc_pd();
    cq_ = eng_.create_cq(kCqDepth);
  }
  Engine& eng() { return eng_; }
  Pd* pd() const { return pd_; }
  Cq* cq() const { return cq_; }

  uint32_t reg(void* p, uint64_t len, uint32_t access) {
    const Mr* mr = eng_.reg_mr(pd_, p, len, access);
    if (!mr) die(kExitError, "registering %" PRIu64 " bytes failed", len);
    return mr->stag;
  }
  Qp* make_qp(uint32_t sq, uint32_t rq, uint16_t rd) {
    Qp* qp = eng_.create_qp({.pd = pd_, .send_cq = cq_, .recv_cq = cq_, .sq_depth = sq,
                             .rq_depth = rq, .ord = rd, .ird = rd});
    if (!qp) die(kExitError, "create_qp failed");
    return qp;
  }

  // One pass: I/O, then CM events and completions handed to the callbacks.
  template <class OnCm, class OnWc>
  void pump(OnCm on_cm, OnWc on_wc) {
    tools::pump_engine<64>(eng_, cq_, on_cm, on_wc);
  }

  // The engine's counters for a report line (stack/counters.h).
  std::string counters() {
    const Counters c = eng_.counters();
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "fpdu tx %" PRIu64 " rx %" PRIu64 " crc_err %" PRIu64 " term %" PRIu64 "/%" PRIu64
                  " retx %" PRIu64 " drop %" PRIu64 "/%" PRIu64 " | qps %" PRIu64 " mrs %" PRIu64
                  " conns %" PRIu64 " held %" PRIu64 " mbufs %" PRIu64,
                  c.fpdus_tx, c.fpdus_rx, c.crc_errors, c.terminates_tx, c.terminates_rx,
                  c.tcp_retransmits, c.rx_dropped, c.tx_dropped, c.qps, c.mrs, c.connections,
                  c.rx_frames_held, c.mbufs_in_use);
    return buf;
  }

 private:
  Engine eng_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
};

// Counts mismatches; the first few are printed in detail.
class Mismatches {
 public:
  __attribute__((format(printf, 2, 3))) void report(const char* fmt, ...) {
    if (count_++ >= kMaxReports) return;
    std::fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "%s: MISMATCH: ", tools::tool_name());
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
  }
  // Checks p[0, n) against pattern bytes [start, start+n) of seed.
  bool check(const char* what, uint32_t conn, uint64_t k, const uint8_t* p, uint64_t n,
             uint64_t seed, uint64_t start = 0) {
    const uint64_t off = pattern_mismatch(p, n, seed, start);
    if (off == n) return true;
    report("conn %u op %" PRIu64 " %s of %" PRIu64 " bytes: byte %" PRIu64
           " is 0x%02x, expected 0x%02x",
           conn, k, what, n, off, p[off], pattern_byte(seed, start + off));
    return false;
  }
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
};

// RSS samples of a phase: the value at the end of warm-up and the largest
// after it, so growth = peak after warm-up - value at warm-up.
struct MemWatch {
  uint64_t at_warm_kb = 0;
  uint64_t peak_after_kb = 0;
  bool warm = false;

  void sample(uint64_t kb, bool after_warmup) {
    if (!after_warmup || kb == 0) return;
    if (!warm) {
      warm = true;
      at_warm_kb = kb;
    }
    peak_after_kb = std::max(peak_after_kb, kb);
  }
  double growth_mib() const { return warm ? mib(peak_after_kb - at_warm_kb) : 0; }
};

}  // namespace softrdma::soak
