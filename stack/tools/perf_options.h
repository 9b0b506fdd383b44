// srdma_perf's command line (usage in perf_options.cc) and what follows from
// it: the sizes a client runs and each size's plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stack/engine.h"
#include "stack/tools/rdma_ops.h"
#include "stack/tools/run_options.h"

namespace softrdma::perf {

inline constexpr uint16_t kDefaultPort = 18515;

struct Options : tools::RunOptions {
  Options() { port = kDefaultPort; }

  tools::Op op = tools::Op::kSend;
  uint32_t depth = 128;
  EngineConfig engine = EngineConfig::from_env();
  bool crc_set = false;
  double linger_s = 0;
};

Options parse_args(int argc, char** argv);

// The message sizes the client runs, in order.
std::vector<uint64_t> resolve_sizes(const Options& o);

// Per-size plan: how many iterations, how many of them warm-up.
struct SizeRun {
  uint64_t size = 0;
  uint64_t total = 0;
  uint64_t warm = 0;
  uint64_t base = 0;  // flow-controlled messages of earlier sizes
  uint64_t measured() const { return total - warm; }
};

SizeRun plan_for(const Options& o, uint64_t size);

}  // namespace softrdma::perf
