#include "stack/tools/perf_options.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "stack/tools/perf_protocol.h"
#include "stack/tools/tool_common.h"
#include "stack/tools/tool_die.h"

namespace softrdma::perf {
namespace {

using namespace softrdma::tools;

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: srdma_perf [options]               server: serve one client, then exit\n"
      "       srdma_perf [options] <server-ip>   client: run the test against a server\n"
      "The client chooses the test; the server takes it from the connection request.\n"
      "  -p, --port N       TCP port (default %u)\n"
      "  -o, --op OP        send | write | read | write_imm | fadd | cas (default send)\n"
      "  -t, --test T       lat: one at a time (send/write/write_imm ping-pong, half round\n"
      "                     trip; read/atomics full round trip) | bw: -d in flight\n"
      "  -s, --size LIST    message sizes, comma-separated, K/M/G suffixes (default 8 for\n"
      "                     lat, 64K for bw; atomics: 8)\n"
      "  -a, --all          sizes 0 (where meaningful), 1, 2, 4 .. 8M\n"
      "  -n, --iters N      measured iterations per size (default %" PRIu64 " lat, %" PRIu64
      " bw)\n"
      "  -w, --warmup N     unmeasured iterations first (default min(%" PRIu64
      ", iters/10))\n"
      "      --max-bytes N  cap iterations at N/size per size, at least %" PRIu64
      " (default 1G; 0: no cap)\n"
      "  -c, --check        fill every message with a per-iteration pattern and check every\n"
      "                     byte at the receiver/reader; exit 1 on a mismatch\n"
      "  -d, --depth N      bw: operations in flight (default 128)\n"
      "      --crc 0|1      MPA CRC (default: FI_SOFTRDMA_CRC, else on); on if either side asks\n"
      "      --markers      ask the peer to insert MPA markers\n"
      "      --csv          machine-readable output\n"
      "      --timeout S    give up after S seconds in all (default 60)\n"
      "      --linger S     keep running the engine S seconds after the connection closed\n"
      "                     (FI_SOFTRDMA_PCAP writes its buffer once a second while links\n"
      "                     are polled; without this the capture's last frames are lost)\n"
      "Exit: 0 ok, 1 data mismatch, 2 error or timeout.\n",
      kDefaultPort, kLatIters, kBwIters, kMaxWarmup, kMinIters);
}


const RunOptionRules kRules{.program = "srdma_perf", .usage = usage, .min_size = 0,
                            .size_error = "bad size (max 1G)"};

[[noreturn]] void bad(const char* what, const char* arg) {
  bad_usage(kRules.program, what, arg, kRules.usage);
}

}  // namespace

Options parse_args(int argc, char** argv) {
  enum LongOnly { kCrc = kToolOptions, kMarkers, kLinger };
  std::vector<option> longs = run_long_options();
  longs.insert(longs.end(), {{"op", required_argument, nullptr, 'o'},
                             {"depth", required_argument, nullptr, 'd'},
                             {"crc", required_argument, nullptr, kCrc},
                             {"markers", no_argument, nullptr, kMarkers},
                             {"linger", required_argument, nullptr, kLinger},
                             {nullptr, 0, nullptr, 0}});
  const std::string shorts = std::string(kRunShortOptions) + "o:d:";
  Options o;
  for (int c; (c = getopt_long(argc, argv, shorts.c_str(), longs.data(), nullptr)) != -1;) {
    if (parse_run_option(c, optarg, kRules, &o)) continue;
    switch (c) {
      case 'o':
        if (!parse_op(optarg, &o.op)) bad("unknown operation", optarg);
        break;
      case 'd': {
        uint64_t v;
        if (!parse_u64(optarg, &v)) bad("bad depth", optarg);
        if (v == 0 || v > kMaxDepth) bad("depth must be 1..4096", optarg);
        o.depth = static_cast<uint32_t>(v);
        break;
      }
      case kCrc:
        if (std::string_view(optarg) != "0" && std::string_view(optarg) != "1")
          bad("--crc takes 0 or 1", optarg);
        o.engine.crc = optarg[0] == '1';
        o.crc_set = true;
        break;
      case kMarkers: o.engine.markers = true; break;
      case kLinger: {
        char* end = nullptr;
        o.linger_s = std::strtod(optarg, &end);
        if (!end || *end || !(o.linger_s >= 0) || o.linger_s > 60) bad("bad linger", optarg);
        break;
      }
      default: usage(stderr); std::exit(kExitError);
    }
  }
  parse_run_operands(argc, argv, kRules, &o);
  return o;
}

std::vector<uint64_t> resolve_sizes(const Options& o) {
  std::vector<uint64_t> out;
  if (o.all_sizes) {
    if (size_meaningful(o.op, o.kind, 0)) out.push_back(0);
    for (uint64_t s = 1; s <= kAllSizesMax; s *= 2)
      if (size_meaningful(o.op, o.kind, s)) out.push_back(s);
  } else if (!o.sizes.empty()) {
    for (uint64_t s : o.sizes) {
      if (!size_meaningful(o.op, o.kind, s)) {
        die(kExitError, "size %" PRIu64 " does not fit %s %s (%s)", s, op_name(o.op),
            o.kind == Kind::kLat ? "lat" : "bw",
            is_atomic(o.op) ? "atomics move 8 bytes" : "the receiver polls the last byte");
      }
      out.push_back(s);
    }
  } else {
    out.push_back(is_atomic(o.op) || o.kind == Kind::kLat ? 8 : 65536);
  }
  if (out.size() > kMaxSizes) die(kExitError, "at most %u sizes per run", kMaxSizes);
  return out;
}

SizeRun plan_for(const Options& o, uint64_t size) {
  const IterPlan p = plan_iterations(o, size);
  return SizeRun{.size = size, .total = p.total, .warm = p.warm, .base = 0};
}

}  // namespace softrdma::perf
