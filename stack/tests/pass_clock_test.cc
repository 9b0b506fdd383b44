// The pass clock against CLOCK_MONOTONIC: where it extrapolates from the TSC
// it must neither drift nor run backwards on a thread.
#include "stack/common/pass_clock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>
#include <thread>

namespace softrdma {
namespace {

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// 300 ms of refreshes (past the calibration and many re-anchors), each
// bracketed by two real reads: the pass time must lie between them, give or
// take the TSC's rate error over a re-anchor interval.
TEST(PassClock, FollowsMonotonic) {
  constexpr int64_t kSlackNs = 20'000;
  int64_t prev = 0;
  const int64_t end = mono_ns() + 300'000'000;
  int64_t worst = 0;
  for (int64_t before = mono_ns(); before < end; before = mono_ns()) {
    const int64_t t = pass_clock::refresh();
    const int64_t after = mono_ns();
    EXPECT_GE(t, prev) << "ran backwards";
    prev = t;
    const int64_t off = t < before ? before - t : (t > after ? t - after : 0);
    if (off > worst) worst = off;
    ASSERT_LE(off, kSlackNs) << "pass time " << t << " outside [" << before << ", " << after << "]";
    EXPECT_EQ(pass_clock::now_ns(), t);
  }
  std::printf("[ metric ] pass clock: worst distance from CLOCK_MONOTONIC %lld ns\n",
              static_cast<long long>(worst));
}

// A thread's first read, and reads after a sleep longer than the re-anchor
// interval, are real reads.
TEST(PassClock, AfterASleep) {
  std::thread([] {
    for (int i = 0; i < 5; ++i) {
      const int64_t before = mono_ns();
      const int64_t t = pass_clock::refresh();
      EXPECT_GE(t, before);
      EXPECT_LE(t, mono_ns());
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  }).join();
  EXPECT_EQ(softrdma_pass_clock_ms(), static_cast<uint32_t>(pass_clock::now_ns() / 1'000'000));
}

}  // namespace
}  // namespace softrdma
