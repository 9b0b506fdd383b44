#include "stack/counters.h"

#include <cinttypes>
#include <cstdio>

namespace softrdma {

std::string format_counters(const Counters& c) {
  std::string out;
  char buf[64];
  auto add = [&](const char* name, uint64_t v) {
    std::snprintf(buf, sizeof(buf), "%s%s=%" PRIu64, out.empty() ? "" : " ", name, v);
    out += buf;
  };
#define SOFTRDMA_COUNTER_FORMAT(name) add(#name, c.name);
  SOFTRDMA_COUNTERS_FIELDS(SOFTRDMA_COUNTER_FORMAT)
#undef SOFTRDMA_COUNTER_FORMAT
  return out;
}

}  // namespace softrdma
