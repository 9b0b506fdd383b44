// What a soak process holds: memory figures from /proc, descriptors, and
// the engine's objects, compared before and after (soak_resources.cc).
#pragma once

#include <cstdint>
#include <string>

#include "stack/engine.h"

namespace softrdma::soak {

// Under AddressSanitizer freed memory sits in a quarantine (256 MiB by
// default) by design, so RSS says nothing about leaks there: LeakSanitizer
// judges them at exit instead, and the RSS bounds are reported, not applied.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRssJudged = false;
#else
inline constexpr bool kRssJudged = true;
#endif

inline double mib(uint64_t kb) { return static_cast<double>(kb) / 1024.0; }
inline double gib(uint64_t bytes) {
  return static_cast<double>(bytes) / double(uint64_t{1} << 30);
}

struct MemFigures {
  uint64_t rss_kb = 0;  // VmRSS: resident now
  uint64_t hwm_kb = 0;  // VmHWM: the peak resident size so far
};

MemFigures read_mem();

// Resident memory that is live: glibc keeps freed heap memory (and raises its
// mmap threshold after freeing a large block, so later mid-sized buffers come
// from the heap); malloc_trim gives free memory back first, so what stays
// resident is what the process still holds. Used for before/after figures,
// never inside the steady-state watch.
uint64_t live_rss_kb();

int count_fds();

// What a connection holds while open and must give back when closed.
struct Resources {
  uint64_t fds = 0, rss_kb = 0;
  Counters c{};

  static Resources now(Engine& eng);
  // Everything back to `before` (memory within slack_kb: allocators keep some).
  bool back_to(const Resources& before, uint64_t slack_kb) const;
  std::string describe() const;
};

}  // namespace softrdma::soak
