#include "stack/tools/perf_protocol.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>

namespace softrdma::perf {
namespace {

// A region at a real address that does not wrap the address space.
bool region_sane(const Region& r) { return r.addr != 0 && r.addr + r.len >= r.addr; }

std::string printed(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printed(const char* fmt, ...) {
  char buf[200];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

const char* to_string(MsgType t) {
  switch (t) {
    case MsgType::kNone: return "none";
    case MsgType::kBegin: return "BEGIN";
    case MsgType::kReady: return "READY";
    case MsgType::kEnd: return "END";
    case MsgType::kDone: return "DONE";
  }
  return "?";
}

Geometry geometry_for(Op op, Kind kind, bool verify, uint32_t depth, uint64_t largest) {
  Geometry g;
  g.kind = kind;
  g.op = op;
  g.verify = verify;
  g.depth = kind == Kind::kBw ? depth : 1;
  g.stride = (std::max<uint64_t>(largest, 8) + 63) & ~uint64_t{63};
  if (kind == Kind::kBw) {
    if (tools::is_atomic(op)) {
      g.slots = depth;
    } else if (verify) {
      g.slots = static_cast<uint32_t>(
          std::clamp<uint64_t>(kVerifyRingBytes / g.stride, 1, uint64_t{depth}));
    }
  }
  return g;
}

Geometry geometry_of(const Hello& h) {
  return geometry_for(static_cast<Op>(h.op), static_cast<Kind>(h.kind), h.verify != 0, h.depth,
                      h.stride);
}

std::string hello_problem(const Hello& h) {
  if (h.magic != kMagic || h.version != kProtoVersion) return "not a matching srdma_perf client";
  if (h.op >= tools::kOpCount || h.kind > 1 || h.verify > 1 || h.pad != 0) return "unknown test";
  const Kind kind = static_cast<Kind>(h.kind);
  if (h.depth == 0 || h.depth > kMaxDepth || (kind == Kind::kLat && h.depth != 1))
    return printed("bad depth %u (1..%u; 1 for lat)", h.depth, kMaxDepth);
  if (h.stride < 64 || h.stride % 64 || h.stride > tools::kMaxMsgSize)
    return printed("bad message stride %" PRIu64 " (a multiple of 64, at most 1 GiB)", h.stride);
  if (h.n_sizes == 0 || h.n_sizes > kMaxSizes)
    return printed("bad size count %u (1..%u)", h.n_sizes, kMaxSizes);
  const Geometry g = geometry_of(h);
  if (h.slots != g.slots)
    return printed("bad slot count %u for stride %" PRIu64 " and depth %u (expected %u)",
                   h.slots, h.stride, h.depth, g.slots);
  if (g.bytes() > kMaxRegion) return "buffers too large";
  if (!region_sane(h.data) || !region_sane(h.ctrl))
    return printed("bad client buffer address (data 0x%" PRIx64 " + %" PRIu64 ", control 0x%"
                   PRIx64 " + %" PRIu64 ")", h.data.addr, h.data.len, h.ctrl.addr, h.ctrl.len);
  if (h.data.len < g.bytes() || h.ctrl.len < sizeof(CtrlBlock))
    return printed("client buffers too small (data %" PRIu64 " of %" PRIu64 " B, control %"
                   PRIu64 " of %zu B)", h.data.len, g.bytes(), h.ctrl.len, sizeof(CtrlBlock));
  return {};
}

}  // namespace softrdma::perf
