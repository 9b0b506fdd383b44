// The command line srdma_perf and tcp_baseline share (-p -t -s -a -n -w -c
// --csv --timeout --max-bytes) and the per-size plan it implies, so the two
// run the same sizes and iteration counts for the same arguments.
#pragma once

#include <getopt.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "stack/tools/result_table.h"

namespace softrdma::tools {

inline constexpr uint64_t kMaxMsgSize = uint64_t{1} << 30;
inline constexpr uint64_t kAllSizesMax = uint64_t{8} << 20;  // -a: up to 8 MiB
inline constexpr uint64_t kLatIters = 1000;
inline constexpr uint64_t kBwIters = 5000;
inline constexpr uint64_t kMaxWarmup = 100;
inline constexpr uint64_t kMinIters = 2;

struct RunOptions {
  std::string host;  // empty: server
  uint16_t port = 0;
  Kind kind = Kind::kLat;
  std::vector<uint64_t> sizes;
  bool all_sizes = false;
  int64_t iters = -1;  // -1: the default for the test kind
  int64_t warmup = -1;
  uint64_t max_bytes = uint64_t{1} << 30;
  bool verify = false;
  bool csv = false;
  double timeout_s = 60;
};

// How a tool's command line differs in the shared options.
struct RunOptionRules {
  const char* program;      // for messages
  void (*usage)(FILE*);     // printed after a bad option
  uint64_t min_size;        // smallest -s size
  const char* size_error;   // the message for a bad -s size
};

// Codes of the shared long-only options; a tool's own start at kToolOptions.
enum RunLongOption { kOptCsv = 256, kOptTimeout, kOptMaxBytes, kToolOptions = 300 };
// The shared options' short letters and long entries (no terminator).
inline constexpr const char kRunShortOptions[] = "p:t:s:an:w:ch";
std::vector<option> run_long_options();

// Applies shared option c; false if c is not one of them. Exits on a bad
// value (bad_usage).
bool parse_run_option(int c, const char* arg, const RunOptionRules& rules, RunOptions* o);
// The positional arguments: [server-ip].
void parse_run_operands(int argc, char** argv, const RunOptionRules& rules, RunOptions* o);

// -n/-w/--max-bytes applied to one size: iterations in all and of warm-up.
struct IterPlan {
  uint64_t total = 0;  // including warm-up
  uint64_t warm = 0;
};
IterPlan plan_iterations(const RunOptions& o, uint64_t size);

}  // namespace softrdma::tools
