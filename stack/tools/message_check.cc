#include "stack/tools/message_check.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

#include "stack/tools/tool_die.h"

namespace softrdma::tools {
namespace {
constexpr uint64_t kMaxReports = 8;  // mismatches printed in detail
}  // namespace

uint64_t first_bad(const uint8_t* p, uint64_t n, const Expect& e) {
  if (e.tag < 0 || n == 0) return pattern_mismatch(p, n, e.seed);
  const uint64_t off = pattern_mismatch(p, n - 1, e.seed);
  if (off < n - 1) return off;
  return p[n - 1] == static_cast<uint8_t>(e.tag) ? n : n - 1;
}

bool Mismatches::check(const char* what, uint64_t size, uint64_t iter, const uint8_t* p,
                       const Expect& e) {
  const uint64_t off = first_bad(p, size, e);
  if (off == size) return true;
  if (count_ < kMaxReports) {
    std::fprintf(stderr,
                 "%s: %s: DATA MISMATCH in %s: size %" PRIu64 ", iteration %" PRIu64
                 ": byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
                 tool_name(), side_, what, size, iter, off, p[off], e.byte(off, size));
  }
  ++count_;
  return false;
}

void Mismatches::report(const char* fmt, ...) {
  if (count_ < kMaxReports) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "%s: %s: MISMATCH: ", tool_name(), side_);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
  }
  ++count_;
}

}  // namespace softrdma::tools
