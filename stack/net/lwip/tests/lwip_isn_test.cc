// RFC 6528 initial sequence numbers: ISN = M + F(4-tuple, secret), with M a
// 4 us clock and F keyed SipHash-2-4 whose secret is the process's own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "lwip/ip_addr.h"
#include "lwip_hooks.h"

namespace {

uint32_t isn(uint32_t lip, uint16_t lport, uint32_t rip, uint16_t rport) {
  ip_addr_t l, r;
  ip_addr_set_ip4_u32(&l, lip);
  ip_addr_set_ip4_u32(&r, rip);
  return softrdma_lwip_isn(&l, lport, &r, rport);
}

// F's part of an ISN: what is left once the clock M is taken out, read as
// the difference from a reference tuple's ISN taken at the same moment.
int64_t offset(uint16_t port) {
  const uint32_t ref = isn(0x0a000001, 1000, 0x0a000002, 2000);
  const uint32_t x = isn(0x0a000001, port, 0x0a000002, 2000);
  return static_cast<int32_t>(x - ref);
}

TEST(LwipIsn, SameTupleAdvancesWithTheFourMicrosecondClock) {
  const uint32_t a = isn(0x0a000001, 4791, 0x0a000002, 9229);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint32_t b = isn(0x0a000001, 4791, 0x0a000002, 9229);
  const uint32_t ticks = b - a;  // 20 ms = 5000 ticks of 4 us, plus scheduling slack
  EXPECT_GE(ticks, 5000u);
  EXPECT_LT(ticks, 5000u + 250000u);
}

TEST(LwipIsn, TuplesGetUnrelatedOffsets) {
  std::vector<int64_t> seen;
  for (uint16_t p = 1; p <= 256; ++p) {
    const int64_t o = offset(p);
    // Another tuple's sequence space starts far away, not near the clock.
    EXPECT_GT(o > 0 ? o : -o, 1000) << "port " << p;
    seen.push_back(o);
  }
  // The clock may tick between the two reads inside offset(), so an offset
  // is known to within a tick or two; distinct tuples must be further apart.
  // Uniform 32-bit offsets meet that by chance about once in 25,000 runs.
  std::sort(seen.begin(), seen.end());
  for (size_t i = 1; i < seen.size(); ++i)
    EXPECT_GT(seen[i] - seen[i - 1], 2) << "offsets must not collide";
}

// Run as a child with kPrintEnv set, the binary prints its offset and exits
// before any test runs: a second process, with a secret of its own.
constexpr const char* kPrintEnv = "LWIP_ISN_TEST_PRINT_OFFSET";
const bool kPrintMode = [] {
  if (!std::getenv(kPrintEnv)) return false;
  std::printf("%lld\n", static_cast<long long>(offset(7)));
  std::fflush(stdout);
  _exit(0);
}();

int64_t offset_in_new_process() {
  const std::string cmd = std::string(kPrintEnv) + "=1 /proc/" + std::to_string(getpid()) + "/exe";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return 0;
  long long v = 0;
  const int n = std::fscanf(p, "%lld", &v);
  pclose(p);
  return n == 1 ? v : 0;
}

TEST(LwipIsn, EachProcessHasItsOwnSecret) {
  ASSERT_FALSE(kPrintMode);
  const int64_t mine = offset(7), again = offset(7);
  EXPECT_LT(std::abs(again - mine), 2) << "the offset is stable within a process";
  const int64_t a = offset_in_new_process(), b = offset_in_new_process();
  ASSERT_NE(a, 0);
  ASSERT_NE(b, 0);
  EXPECT_GT(std::abs(a - mine), 1000) << "a second process keys F with another secret";
  EXPECT_GT(std::abs(b - a), 1000);
}

}  // namespace
