// Pieces the tools (srdma_perf, srdma_soak, tcp_baseline) share: the clock,
// verification patterns, number parsing, buffers, status text.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace softrdma::tools {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline Clock::time_point deadline_after(double secs) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs));
}

// Words the peer writes while we poll them (control blocks, flags).
inline uint64_t load(const uint64_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
inline uint8_t load(const uint8_t& v) { return __atomic_load_n(&v, __ATOMIC_ACQUIRE); }
inline uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// --- data patterns ---------------------------------------------------------

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Word i of a pattern depends on the seed and i, so bytes that land at the
// wrong offset or come from another message are caught. One multiply a word
// keeps checking cheap enough for messages of many MiB.
inline uint64_t pattern_word(uint64_t seed, uint64_t i) {
  uint64_t w = (seed + i) * kGolden;
  return w ^ (w >> 29);
}

// Byte `off` of the pattern (little-endian words, as fill_pattern lays them).
inline uint8_t pattern_byte(uint64_t seed, uint64_t off) {
  return static_cast<uint8_t>(pattern_word(seed, off / 8) >> (8 * (off % 8)));
}

// Writes pattern bytes [start, start+n) to p.
inline void fill_pattern(uint8_t* p, uint64_t n, uint64_t seed, uint64_t start = 0) {
  uint64_t i = 0;
  for (; i < n && (start + i) % 8; ++i) p[i] = pattern_byte(seed, start + i);
  for (; i + 8 <= n; i += 8) {
    const uint64_t w = pattern_word(seed, (start + i) / 8);
    std::memcpy(p + i, &w, 8);
  }
  for (; i < n; ++i) p[i] = pattern_byte(seed, start + i);
}

// Index of the first byte of p[0, n) that is not pattern byte start+i, or n.
inline uint64_t pattern_mismatch(const uint8_t* p, uint64_t n, uint64_t seed,
                                 uint64_t start = 0) {
  uint64_t i = 0;
  for (; i < n && (start + i) % 8; ++i)
    if (p[i] != pattern_byte(seed, start + i)) return i;
  for (; i + 8 <= n; i += 8) {  // word compare; a bad word is located below
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w != pattern_word(seed, (start + i) / 8)) break;
  }
  for (; i < n; ++i)
    if (p[i] != pattern_byte(seed, start + i)) return i;
  return n;
}

// --- parsing ---------------------------------------------------------------

// A count with an optional binary K/M/G suffix.
inline bool parse_u64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t mult = 1;
  switch (s.back()) {
    case 'k': case 'K': mult = uint64_t{1} << 10; break;
    case 'm': case 'M': mult = uint64_t{1} << 20; break;
    case 'g': case 'G': mult = uint64_t{1} << 30; break;
    default: break;
  }
  if (mult != 1) s.remove_suffix(1);
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

// A CM event's status and Terminate cause, for messages.
inline std::string describe_status(int status, uint32_t term) {
  std::string s = status == 0 ? "the peer closed the stream" : std::strerror(-status);
  if (term) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), ", Terminate layer %u etype %u ecode 0x%02x", term >> 12,
                  (term >> 8) & 0xf, term & 0xff);
    s += buf;
  }
  return s;
}

// --- buffers ---------------------------------------------------------------

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t[], AlignedFree>;

// Page-aligned, zeroed and so already resident: nothing is faulted in later
// (during a timed phase, or while memory growth is being watched). Null if
// out of memory.
inline Buffer alloc_touched(uint64_t n) {
  n = (n + 4095) & ~uint64_t{4095};
  void* p = std::aligned_alloc(4096, n);
  if (p) std::memset(p, 0, n);
  return Buffer(static_cast<uint8_t*>(p));
}

}  // namespace softrdma::tools
