#include "stack/tools/soak_options.h"

#include <getopt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "stack/tools/soak_protocol.h"

namespace softrdma::soak {

double warmup_secs(const Options& o) {
  if (o.warmup_s >= 0) return std::min(o.warmup_s, o.duration_s);
  return std::min(std::max(0.2 * o.duration_s, 20.0), 0.5 * o.duration_s);
}

namespace {

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: srdma_soak --server [-p port] [--stall S] [--timeout S] [--serve-until-idle S]\n"
      "       srdma_soak [options] <server-ip>\n"
      "  -p, --port N            TCP port (default %u)\n"
      "  -d, --duration S        main phase seconds (default 60)\n"
      "  -n, --conns N           main phase connections (default 8)\n"
      "  -q, --depth N           operations in flight per connection, 1..%u (default 8)\n"
      "  -s, --max-size N        largest message, K/M suffixes (default 4M)\n"
      "      --seed N            the mix's seed (default: from the clock; printed)\n"
      "  -r, --report S          seconds between report lines (default 1)\n"
      "      --churn N           then N short connections, opened and closed (default 0)\n"
      "      --churn-parallel N  churn connections open at once (default 64)\n"
      "      --churn-ops N       checked operations per churn connection (default 16)\n"
      "      --churn-max-size N  largest churn message (default 64K)\n"
      "      --stall S           give up after S seconds without progress (default 30)\n"
      "      --timeout S         give up after S seconds in all (default: phases + margin)\n"
      "      --flat-mib M        allowed RSS growth after warm-up, MiB (default 8)\n"
      "      --warmup S          warm-up seconds before growth counts (default: 20 %% of\n"
      "                          --duration, at least 20 s, at most half)\n"
      "      --no-bye            leave the server running at the end (no final account)\n"
      "      --serve-until-idle S  (server) survive lost clients: drop a connection stalled\n"
      "                          for --stall, exit after S s with nothing open, resources\n"
      "                          checked against the idle baseline\n"
      "Engine from the environment (FI_SOFTRDMA_TRANSPORT=dpdk|kernel, _THREADING=c1|c2|c3).\n"
      "Exit: 0 verified and flat, 1 mismatch or memory growth, 2 error, stall or timeout.\n",
      kDefaultPort, kMaxDepth);
}

[[noreturn]] void bad_usage(const char* what, const char* arg) {
  tools::bad_usage("srdma_soak", what, arg, usage);
}

uint64_t parse_num(const char* arg, const char* what, uint64_t lo, uint64_t hi) {
  uint64_t v;
  if (!tools::parse_u64(arg, &v) || v < lo || v > hi) bad_usage(what, arg);
  return v;
}

double parse_secs(const char* arg, const char* what, double lo) {
  char* end = nullptr;
  const double v = std::strtod(arg, &end);
  if (!end || *end || !(v >= lo) || v > 1e7) bad_usage(what, arg);
  return v;
}

}  // namespace

Options parse_args(int argc, char** argv) {
  enum {
    kServer = 256, kSeed, kChurn, kChurnParallel, kChurnOps, kChurnMax, kStall, kTimeout, kFlat,
    kWarmup, kNoBye, kServeUntilIdle
  };
  static const option kLong[] = {
      {"server", no_argument, nullptr, kServer},
      {"port", required_argument, nullptr, 'p'},
      {"duration", required_argument, nullptr, 'd'},
      {"conns", required_argument, nullptr, 'n'},
      {"depth", required_argument, nullptr, 'q'},
      {"max-size", required_argument, nullptr, 's'},
      {"seed", required_argument, nullptr, kSeed},
      {"report", required_argument, nullptr, 'r'},
      {"churn", required_argument, nullptr, kChurn},
      {"churn-parallel", required_argument, nullptr, kChurnParallel},
      {"churn-ops", required_argument, nullptr, kChurnOps},
      {"churn-max-size", required_argument, nullptr, kChurnMax},
      {"stall", required_argument, nullptr, kStall},
      {"timeout", required_argument, nullptr, kTimeout},
      {"flat-mib", required_argument, nullptr, kFlat},
      {"warmup", required_argument, nullptr, kWarmup},
      {"no-bye", no_argument, nullptr, kNoBye},
      {"serve-until-idle", required_argument, nullptr, kServeUntilIdle},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  Options o;
  for (int c; (c = getopt_long(argc, argv, "p:d:n:q:s:r:h", kLong, nullptr)) != -1;) {
    switch (c) {
      case kServer: o.server = true; break;
      case 'p': o.port = static_cast<uint16_t>(parse_num(optarg, "bad port", 1, 65535)); break;
      case 'd': o.duration_s = parse_secs(optarg, "bad duration", 0); break;
      case 'n': o.conns = static_cast<uint32_t>(parse_num(optarg, "bad --conns", 0, 4096)); break;
      case 'q':
        o.depth = static_cast<uint32_t>(parse_num(optarg, "bad --depth", 1, kMaxDepth));
        break;
      case 's': o.max_size = static_cast<uint32_t>(parse_num(optarg, "bad size", 8, kMaxSize)); break;
      case kSeed: o.seed = parse_num(optarg, "bad seed", 0, UINT64_MAX); o.seed_set = true; break;
      case 'r': o.report_s = parse_secs(optarg, "bad report interval", 0.05); break;
      case kChurn: o.churn = parse_num(optarg, "bad --churn", 0, uint64_t{1} << 32); break;
      case kChurnParallel:
        o.churn_parallel = static_cast<uint32_t>(parse_num(optarg, "bad --churn-parallel", 1, 4000));
        break;
      case kChurnOps: o.churn_ops = parse_num(optarg, "bad --churn-ops", 0, uint64_t{1} << 32); break;
      case kChurnMax:
        o.churn_max_size = static_cast<uint32_t>(parse_num(optarg, "bad size", 8, kMaxSize));
        break;
      case kStall: o.stall_s = parse_secs(optarg, "bad --stall", 1); break;
      case kTimeout: o.timeout_s = parse_secs(optarg, "bad --timeout", 1); break;
      case kFlat: o.flat_mib = parse_secs(optarg, "bad --flat-mib", 0); break;
      case kWarmup: o.warmup_s = parse_secs(optarg, "bad --warmup", 0); break;
      case kNoBye: o.no_bye = true; break;
      case kServeUntilIdle:
        o.serve_until_idle_s = parse_secs(optarg, "bad --serve-until-idle", 0.1);
        break;
      case 'h': usage(stdout); std::exit(0);
      default: usage(stderr); std::exit(kExitError);
    }
  }
  if (optind < argc) o.host = argv[optind++];
  if (optind < argc) bad_usage("unexpected argument", argv[optind]);
  if (o.server != o.host.empty()) bad_usage("give either --server or a server address", "");
  if (!o.seed_set) o.seed = mix64(static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  return o;
}

}  // namespace softrdma::soak
