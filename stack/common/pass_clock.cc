#include "stack/common/pass_clock.h"

#include <time.h>

#include <atomic>

namespace softrdma::pass_clock {
namespace {
// Relaxed: passes may run on another thread (c1/c3); a reader seeing an
// older value only sees a timer fire one pass later.
std::atomic<int64_t> g_now{0};
}  // namespace

int64_t refresh() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t ns = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
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
