// Per-message verification of srdma_perf and tcp_baseline: each message of a
// run carries a pattern seeded by (size, iteration, direction), and the
// receiver counts the messages that differ, printing the first few.
#pragma once

#include <cstdint>

#include "stack/tools/tool_common.h"

namespace softrdma::tools {

// Which way a pattern travels, so that an echo cannot pass for an answer.
enum class Dir : uint64_t { kToServer = 1, kToClient = 2, kReadSource = 3 };

inline uint64_t seed_of(uint64_t size, uint64_t index, Dir dir) {
  return mix64(mix64(size) ^ (index * kGolden) ^ static_cast<uint64_t>(dir));
}

// A message's expected bytes: the pattern, and for polled Writes a last byte
// (the tag) that differs from the previous iteration's and is never 0.
struct Expect {
  uint64_t seed = 0;
  int tag = -1;

  uint8_t byte(uint64_t off, uint64_t n) const {
    if (tag >= 0 && off + 1 == n) return static_cast<uint8_t>(tag);
    return pattern_byte(seed, off);
  }
};

inline uint8_t tag_of(uint64_t k) { return static_cast<uint8_t>(1 + k % 255); }

inline void fill(uint8_t* p, uint64_t n, const Expect& e) {
  fill_pattern(p, n, e.seed);
  if (e.tag >= 0 && n > 0) p[n - 1] = static_cast<uint8_t>(e.tag);
}

// Offset of the first byte that differs from e, or n.
uint64_t first_bad(const uint8_t* p, uint64_t n, const Expect& e);

// Counts bad messages; the first few are printed in detail, under
// tool_name() and the side ("client", "server").
class Mismatches {
 public:
  explicit Mismatches(const char* side) : side_(side) {}

  bool check(const char* what, uint64_t size, uint64_t iter, const uint8_t* p, const Expect& e);
  __attribute__((format(printf, 2, 3))) void report(const char* fmt, ...);
  uint64_t count() const { return count_; }

 private:
  const char* side_;
  uint64_t count_ = 0;
};

}  // namespace softrdma::tools
