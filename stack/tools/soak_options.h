// srdma_soak's command line (usage in soak_options.cc).
#pragma once

#include <cstdint>
#include <string>

namespace softrdma::soak {

inline constexpr uint16_t kDefaultPort = 18616;

struct Options {
  bool server = false;
  std::string host;
  uint16_t port = kDefaultPort;
  double duration_s = 60;
  uint32_t conns = 8;
  uint32_t depth = 8;
  uint32_t max_size = 4u << 20;
  uint64_t seed = 0;
  bool seed_set = false;
  double report_s = 1;
  uint64_t churn = 0;
  uint32_t churn_parallel = 64;
  uint64_t churn_ops = 16;
  uint32_t churn_max_size = 64u << 10;
  double stall_s = 30;
  double timeout_s = 0;  // 0: derived from the phases
  double flat_mib = 8;
  double warmup_s = -1;  // -1: warmup_secs() decides
  // Server: keep serving across lost clients (each one an error event it
  // survives, not a failure), drop a connection stalled for --stall, and exit
  // once nothing was open or asked for during this many seconds. 0: off.
  double serve_until_idle_s = 0;
  bool no_bye = false;  // client: leave the server running (no bye request)
};

// Memory growth is judged after the warm-up: 20 % of the main phase, but at
// least 20 s (DPDK's and lwIP's buffer pools are touched progressively at
// first: RSS climbs for some 15 s on the memif path, then stays put) and at
// most half of it.
double warmup_secs(const Options& o);

Options parse_args(int argc, char** argv);

}  // namespace softrdma::soak
