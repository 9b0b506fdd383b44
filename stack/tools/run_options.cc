#include "stack/tools/run_options.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "stack/tools/tool_common.h"
#include "stack/tools/tool_die.h"

namespace softrdma::tools {
namespace {

uint64_t parse_count(const char* arg, const char* what, const RunOptionRules& r) {
  uint64_t v;
  if (!parse_u64(arg, &v)) bad_usage(r.program, what, arg, r.usage);
  return v;
}

}  // namespace

std::vector<option> run_long_options() {
  return {{"port", required_argument, nullptr, 'p'},   {"test", required_argument, nullptr, 't'},
          {"size", required_argument, nullptr, 's'},   {"all", no_argument, nullptr, 'a'},
          {"iters", required_argument, nullptr, 'n'},  {"warmup", required_argument, nullptr, 'w'},
          {"check", no_argument, nullptr, 'c'},        {"csv", no_argument, nullptr, kOptCsv},
          {"timeout", required_argument, nullptr, kOptTimeout},
          {"max-bytes", required_argument, nullptr, kOptMaxBytes},
          {"help", no_argument, nullptr, 'h'}};
}

bool parse_run_option(int c, const char* arg, const RunOptionRules& r, RunOptions* o) {
  auto bad = [&](const char* what) { bad_usage(r.program, what, arg, r.usage); };
  switch (c) {
    case 'p': {
      const uint64_t v = parse_count(arg, "bad port", r);
      if (v == 0 || v > 65535) bad("bad port");
      o->port = static_cast<uint16_t>(v);
      return true;
    }
    case 't':
      if (std::string_view(arg) == "lat") {
        o->kind = Kind::kLat;
      } else if (std::string_view(arg) == "bw") {
        o->kind = Kind::kBw;
      } else {
        bad("test must be lat or bw");
      }
      return true;
    case 's': {
      std::string_view list(arg);
      while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string item(list.substr(0, comma));
        uint64_t v;
        if (!parse_u64(item, &v) || v < r.min_size || v > kMaxMsgSize) bad(r.size_error);
        o->sizes.push_back(v);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      }
      return true;
    }
    case 'a': o->all_sizes = true; return true;
    case 'n': {
      const uint64_t v = parse_count(arg, "bad iteration count", r);
      if (v == 0 || v > (uint64_t{1} << 40)) bad("bad iteration count");
      o->iters = static_cast<int64_t>(v);
      return true;
    }
    case 'w': {
      const uint64_t v = parse_count(arg, "bad warm-up count", r);
      if (v > (uint64_t{1} << 40)) bad("bad warm-up count");
      o->warmup = static_cast<int64_t>(v);
      return true;
    }
    case 'c': o->verify = true; return true;
    case kOptCsv: o->csv = true; return true;
    case kOptTimeout: {
      char* end = nullptr;
      o->timeout_s = std::strtod(arg, &end);
      if (!end || *end || !(o->timeout_s > 0) || o->timeout_s > 1e6) bad("bad timeout");
      return true;
    }
    case kOptMaxBytes: o->max_bytes = parse_count(arg, "bad --max-bytes", r); return true;
    case 'h': r.usage(stdout); std::exit(0);
    default: return false;
  }
}

void parse_run_operands(int argc, char** argv, const RunOptionRules& r, RunOptions* o) {
  if (optind < argc) o->host = argv[optind++];
  if (optind < argc) bad_usage(r.program, "unexpected argument", argv[optind], r.usage);
}

IterPlan plan_iterations(const RunOptions& o, uint64_t size) {
  uint64_t n = o.iters > 0 ? static_cast<uint64_t>(o.iters)
                           : (o.kind == Kind::kLat ? kLatIters : kBwIters);
  if (o.max_bytes > 0 && size > 0) n = std::min(n, std::max(kMinIters, o.max_bytes / size));
  const uint64_t warm =
      o.warmup >= 0 ? static_cast<uint64_t>(o.warmup) : std::min(kMaxWarmup, n / 10);
  return {.total = n + warm, .warm = warm};
}

}  // namespace softrdma::tools
