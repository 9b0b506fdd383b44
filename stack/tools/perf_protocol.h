// srdma_perf's wire protocol: the Hello (client -> server, in the MPA
// Request) and Welcome (in the Reply) that set a test up, the buffer
// geometry both sides derive from it, and the control messages each side
// writes into the other's mailbox during the run (see srdma_perf.cc).
//
// Limits a server holds every Hello to before it allocates anything (a
// Hello outside them is rejected, with the reason, and the server goes on
// waiting for a client):
//   op, test, check   one of the six operations; lat or bw; 0 or 1
//   depth             1 .. 4096, and 1 for lat
//   stride            a multiple of 64, 64 B .. 1 GiB (the largest message,
//                     rounded up)
//   slots             what the client derives from depth and stride: 1, or
//                     for verified bw up to 128 MiB / stride (at most depth),
//                     or depth for atomics bw; so the buffers are at most
//                     2 x 1 GiB
//   sizes             1 .. 64 message sizes
//   data, ctrl        regions at least as large as the geometry puts there
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

#include "stack/engine.h"
#include "stack/tools/private_data.h"
#include "stack/tools/rdma_ops.h"
#include "stack/tools/result_table.h"
#include "stack/tools/run_options.h"

namespace softrdma::perf {

using tools::Kind;
using tools::Op;
using tools::Region;

static_assert(std::endian::native == std::endian::little,
              "patterns and the private-data layout assume a little-endian host");

inline constexpr uint64_t kVerifyRingBytes = uint64_t{128} << 20;  // -c bw: ring per direction
inline constexpr uint64_t kMaxRegion = 2 * tools::kMaxMsgSize;    // a server's data buffers
inline constexpr uint32_t kMaxDepth = 4096;
inline constexpr uint32_t kMaxSizes = 64;
inline constexpr uint32_t kMagic = 0x53525046;  // "FPRS" on the wire
inline constexpr uint32_t kProtoVersion = 1;
inline constexpr size_t kNotifyRing = 8;  // > slots / notify batch + 2, see issue_bw

// Sizes that make sense: atomics move 8 bytes; a polled Write needs a last
// byte to poll.
inline bool size_meaningful(Op op, Kind kind, uint64_t size) {
  if (tools::is_atomic(op)) return size == 8;
  if (op == Op::kWrite && kind == Kind::kLat) return size > 0;
  return size <= tools::kMaxMsgSize;
}

// Reads and atomics are answered by the responder's engine alone, so their
// latency is one full round trip; Sends and Writes ping-pong (half of one).
inline bool full_rtt(Op op) { return op == Op::kRead || tools::is_atomic(op); }

// Client -> server, in the MPA Request's private data.
struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kProtoVersion;
  uint8_t op = 0;
  uint8_t kind = 0;
  uint8_t verify = 0;
  uint8_t pad = 0;
  uint32_t depth = 0;
  uint32_t slots = 0;
  uint32_t n_sizes = 0;
  uint64_t stride = 0;
  Region data, ctrl;
};

// Server -> client, in the MPA Reply's private data.
struct Welcome {
  uint32_t magic = kMagic;
  uint32_t version = kProtoVersion;
  Region data, ctrl;
};
static_assert(sizeof(Hello) <= Engine::kMaxPrivateData);
static_assert(sizeof(Welcome) <= Engine::kMaxPrivateData);

enum class MsgType : uint32_t { kNone, kBegin, kReady, kEnd, kDone };

const char* to_string(MsgType t);

// One control message; it travels as one small Write, so it is placed whole
// within one progress call on the thread that reads it.
struct CtrlMsg {
  uint64_t seq = 0;
  MsgType type = MsgType::kNone;
  uint32_t pad = 0;
  uint64_t size = 0;
  uint64_t total = 0;  // iterations including warm-up
  uint64_t warm = 0;
  uint64_t base = 0;    // flow-controlled messages before this size
  uint64_t errors = 0;  // kDone: mismatches the server found in this size
  // seq again, last: the message has arrived once this matches. A Write may
  // be placed in pieces (an MPA marker or a TCP segment boundary can fall
  // inside it), in stream order, and with c1/c3 an engine thread places
  // while this one reads: seq alone showed the fields of the old message.
  uint64_t seq_end = 0;
};

// Each side's control MR. The peer writes credit, notify and inbox; the rest
// are the sources of our own control Writes.
struct alignas(64) CtrlBlock {
  uint64_t credit = 0;
  uint64_t notify = 0;
  alignas(64) CtrlMsg inbox;
  alignas(64) CtrlMsg outbox;
  uint64_t credit_src = 0;
  uint64_t notify_src[kNotifyRing] = {};
};

// Buffer layout, the same on both sides: `slots` receive slots (rx) then
// `slots` source slots (tx), each `stride` bytes.
struct Geometry {
  uint64_t stride = 64;
  uint32_t slots = 1;
  uint32_t depth = 1;
  Kind kind = Kind::kLat;
  Op op = Op::kSend;
  bool verify = false;

  uint64_t bytes() const { return 2 * uint64_t{slots} * stride; }
  // Operations the client keeps in flight. Verified runs and atomics give
  // each in-flight operation its own slot.
  uint32_t window() const {
    if (kind == Kind::kLat) return 1;
    return verify || tools::is_atomic(op) ? std::min(depth, slots) : depth;
  }
  // Receives the server keeps posted in bandwidth runs.
  uint32_t recv_window() const { return verify ? slots : depth; }
};

// The geometry of a test whose largest message is `largest` bytes (depth
// counts for bw only).
Geometry geometry_for(Op op, Kind kind, bool verify, uint32_t depth, uint64_t largest);

// Why a server cannot serve this Hello (the limits above), or empty.
std::string hello_problem(const Hello& h);
// The geometry a Hello that passed hello_problem asks for.
Geometry geometry_of(const Hello& h);

}  // namespace softrdma::perf
