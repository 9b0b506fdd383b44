#include "stack/common/pass_clock.h"

#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include <atomic>

namespace softrdma::pass_clock {
namespace {

// Relaxed: passes may run on another thread (c1/c3); a reader seeing an
// older value only sees a timer fire one pass later.
std::atomic<int64_t> g_now{0};

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// CLOCK_MONOTONIC costs about 30 ns in a KVM guest (kvm-clock through the
// vDSO) and a round trip refreshes the pass clock four times, so where the
// TSC is invariant the pass time is extrapolated from it: one rdtsc, and a
// real clock read once a millisecond per thread to re-anchor, so the
// extrapolation never drifts from CLOCK_MONOTONIC by more than the TSC's
// rate error over one millisecond.
#if defined(__x86_64__)
bool invariant_tsc() {
  unsigned a, b, c, d;
  if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return false;
  __cpuid(0x80000007, a, b, c, d);
  return (d >> 8) & 1;  // CPUID.80000007H:EDX[8]
}
uint64_t read_tsc() { return __rdtsc(); }
#else
bool invariant_tsc() { return false; }
uint64_t read_tsc() { return 0; }
#endif
const bool g_tsc = invariant_tsc();

// Nanoseconds per tick in 32.32 fixed point, measured at every re-anchor
// over the whole time since the library loaded (so ever more exactly); 0
// for the first 20 ms, when every refresh reads the clock.
std::atomic<uint64_t> g_mult{0};
const int64_t g_cal_ns = monotonic_ns();
const uint64_t g_cal_tsc = read_tsc();
constexpr int64_t kCalibrateNs = 20'000'000;
constexpr int64_t kReanchorNs = 1'000'000;

// Per thread: the last real read and the ticks after which it is re-read.
// Initial-exec, as big_lock's depth (big_lock.h says why).
struct Anchor {
  int64_t ns;
  uint64_t tsc;
  uint64_t span;  // ticks in kReanchorNs; 0 forces a real read
  int64_t last;   // the thread's last pass time: it never runs backwards
};
thread_local Anchor t_anchor __attribute__((tls_model("initial-exec"))) = {0, 0, 0, 0};

// A real read and the ticks it happened at, read around it: a thread
// preempted between a tick read and the clock read would pair them wrongly
// and offset every extrapolation until the next re-anchor (by 32 us once,
// under load). A pair read over more than kPairNs is read again.
constexpr int64_t kPairNs = 2'000;
int64_t paired_read(uint64_t* tsc) {
  const uint64_t mult = g_mult.load(std::memory_order_relaxed);
  const uint64_t limit = mult == 0 ? ~uint64_t{0} : (uint64_t{kPairNs} << 32) / mult;
  int64_t real = 0;
  for (int i = 0; i < 4; ++i) {
    const uint64_t t0 = read_tsc();
    real = monotonic_ns();
    const uint64_t t1 = read_tsc();
    *tsc = t0 + (t1 - t0) / 2;
    if (t1 - t0 < limit) break;
  }
  return real;
}

int64_t reanchor() {
  uint64_t tsc;
  const int64_t real = paired_read(&tsc);
  uint64_t mult = 0;
  if (real - g_cal_ns >= kCalibrateNs && tsc > g_cal_tsc) {
    const double per_tick = static_cast<double>(real - g_cal_ns) / static_cast<double>(tsc - g_cal_tsc);
    mult = static_cast<uint64_t>(per_tick * 4294967296.0);
    g_mult.store(mult, std::memory_order_relaxed);
  }
  Anchor& a = t_anchor;
  // The extrapolation may have run a little ahead of the real clock.
  const int64_t ns = real > a.last ? real : a.last;
  a = {ns, tsc, mult == 0 ? 0 : (uint64_t{kReanchorNs} << 32) / mult, ns};
  return ns;
}

}  // namespace

int64_t refresh() {
  int64_t ns;
  if (g_tsc) {
    const uint64_t tsc = read_tsc();
    Anchor& a = t_anchor;
    const uint64_t ticks = tsc - a.tsc;
    // ticks < span bounds the product below 2^63 (span is a millisecond).
    if (ticks < a.span) {
      ns = a.ns + static_cast<int64_t>((ticks * g_mult.load(std::memory_order_relaxed)) >> 32);
      a.last = ns;
    } else {
      ns = reanchor();
    }
  } else {
    ns = monotonic_ns();
  }
  g_now.store(ns, std::memory_order_relaxed);
  return ns;
}

int64_t now_ns() {
  const int64_t ns = g_now.load(std::memory_order_relaxed);
  return ns != 0 ? ns : refresh();
}

}  // namespace softrdma::pass_clock

uint32_t softrdma_pass_clock_ms(void) {
  return static_cast<uint32_t>(softrdma::pass_clock::now_ns() / 1'000'000);
}
