// srdma_soak's protocol: the operation sequence both sides derive (OpGen),
// the Hello/Welcome/Farewell carried in MPA private data, the control blocks
// each side Writes into, and a connection's server memory (see srdma_soak.cc).
#pragma once

#include <bit>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "stack/engine.h"
#include "stack/tools/private_data.h"
#include "stack/tools/rdma_ops.h"
#include "stack/tools/tool_common.h"
#include "stack/tools/tool_die.h"

namespace softrdma::soak {

using namespace softrdma::tools;  // Clock, die, patterns, operations, buffers

static_assert(std::endian::native == std::endian::little, "patterns assume little-endian");

inline constexpr uint32_t kMagic = 0x4b414f53;  // "SOAK"
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxDepth = 64;
inline constexpr uint64_t kMaxSize = uint64_t{64} << 20;
inline constexpr uint32_t kOffsetSlack = 64;  // payloads start 0..63 bytes into their slots
inline constexpr uint32_t kReadSlack = 4096;  // Reads start 0..4095 bytes into the source

// --- the operation sequence ------------------------------------------------

// Weights of the mix, in percent.
inline constexpr uint32_t kOpWeights[] = {24, 24, 20, 16, 8, 8};

// Takes a write slot of the server's (uses_recv: takes a receive).
inline bool uses_wslot(Op op) { return op == Op::kWrite || op == Op::kWriteImm; }

// Everything about operation k that both sides must agree on.
struct OpSpec {
  Op op = Op::kSend;
  uint32_t size = 0;
  uint32_t local_off = 0;   // into the client's slot (0 for atomics: 8-aligned)
  uint32_t remote_off = 0;  // into the server's write slot, or the read source
  uint64_t seed = 0;        // the payload's pattern
  uint64_t imm = 0;         // Write with Immediate
  uint64_t operand = 0;     // Fetch-Add addend; Compare-Swap: the miss mask
  uint64_t swap = 0;
  bool cas_hit = true;      // Compare-Swap compares with the true value
};

class OpGen {
 public:
  OpGen() = default;
  OpGen(uint64_t seed, uint32_t conn, uint32_t max_size)
      : base_(mix64(seed ^ mix64(conn + 0x50414bull))), max_size_(max_size),
        log_range_(std::log2(double(max_size) + 1.0)) {}

  OpSpec at(uint64_t k) const {
    const uint64_t r0 = rnd(k, 0), r1 = rnd(k, 1), r2 = rnd(k, 2);
    OpSpec s;
    s.op = pick_op(r0 % 100);
    s.seed = rnd(k, 3);
    if (is_atomic(s.op)) {
      s.size = 8;
      s.operand = rnd(k, 4) | 1;  // nonzero: a miss mask really misses
      s.swap = rnd(k, 5);
      s.cas_hit = (r0 >> 32) % 4 != 0;
      return s;
    }
    s.size = log_uniform(r1);
    s.local_off = static_cast<uint32_t>(r2 % kOffsetSlack);
    s.remote_off = static_cast<uint32_t>((r2 >> 16) % (s.op == Op::kRead ? kReadSlack
                                                                        : kOffsetSlack));
    s.imm = rnd(k, 6);
    return s;
  }
  // The atomic word's first value, and the read source's pattern.
  uint64_t atomic_init() const { return mix64(base_ ^ 0xA7011Cull); }
  uint64_t read_seed() const { return mix64(base_ ^ 0x5EADull); }

 private:
  uint64_t rnd(uint64_t k, uint64_t j) const { return mix64(base_ ^ mix64(k * 8 + j)); }
  static Op pick_op(uint64_t pct) {
    for (size_t i = 0; i < tools::kOpCount; ++i) {
      if (pct < kOpWeights[i]) return static_cast<Op>(i);
      pct -= kOpWeights[i];
    }
    return Op::kSend;
  }
  // 2^x - 1 for x uniform in [0, log2(max + 1)): 0 .. max, each octave alike.
  uint32_t log_uniform(uint64_t r) const {
    const double u = double(r >> 11) / double(uint64_t{1} << 53);
    const double v = std::floor(std::exp2(u * log_range_)) - 1.0;
    return static_cast<uint32_t>(std::clamp(v, 0.0, double(max_size_)));
  }

  uint64_t base_ = 0;
  uint32_t max_size_ = 0;
  double log_range_ = 0;
};

// The atomic word as the operations leave it: applies s to *v and returns
// the original value the operation must report.
// The last spec asked for, kept: a connection waiting on its peer asks for
// the same operation on every step.
class OpCache {
 public:
  explicit OpCache(const OpGen& gen) : gen_(gen) {}
  const OpSpec& at(uint64_t k) {
    if (k != k_) {
      spec_ = gen_.at(k);
      k_ = k;
    }
    return spec_;
  }

 private:
  const OpGen& gen_;
  uint64_t k_ = UINT64_MAX;
  OpSpec spec_;
};

inline uint64_t apply_atomic(const OpSpec& s, uint64_t* v, uint64_t* compare) {
  const uint64_t orig = *v;
  if (s.op == Op::kFetchAdd) {
    *v += s.operand;
  } else {
    *compare = s.cas_hit ? orig : orig ^ s.operand;
    if (*compare == orig) *v = s.swap;
  }
  return orig;
}

// --- the wire between client and server ------------------------------------


enum class HelloKind : uint8_t { kData = 1, kBye = 2 };

// Client -> server, in the MPA Request.
struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint8_t kind = 0;
  uint8_t pad[3] = {};
  uint32_t conn = 0;
  uint64_t seed = 0;
  uint32_t max_size = 0;
  uint32_t depth = 0;  // operations in flight; also the server's receive and write slots
  Region ctrl;
};

// Server -> client, in the MPA Reply.
struct Welcome {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  Region data, ctrl;
};

// Server -> client in the Reject of a bye request: the server's account.
struct Farewell {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t mismatches = 0;
  uint64_t lost = 0;  // connections that ended before their checks were done
  uint64_t ops = 0, bytes = 0, conns = 0;
  uint64_t peak_rss_kb = 0, final_rss_kb = 0, open_conns = 0;
};
static_assert(sizeof(Hello) <= Engine::kMaxPrivateData);
static_assert(sizeof(Welcome) <= Engine::kMaxPrivateData);
static_assert(sizeof(Farewell) <= Engine::kMaxPrivateData);

// *out from the private data, if it is one of ours.
template <class T>
bool decode(const std::vector<uint8_t>& pd, T* out) {
  return tools::decode_exact(pd, out) && out->magic == kMagic && out->version == kVersion;
}

// The server's running account of one connection, Written into the client's
// control block. Every field only grows, so a Write that overtakes an older
// one, or a value read while the next lands, is still true.
struct Credit {
  uint64_t recv_posted = 0;      // receives posted: Sends/Write-Imms the client may issue
  uint64_t writes_checked = 0;   // write slots freed
  uint64_t ops_checked = 0;
  uint64_t bytes_checked = 0;
  uint64_t mismatches = 0;
  uint64_t rss_kb = 0;  // the server process's, for the client's memory watch
};

inline constexpr size_t kNotifyRing = 2 * kMaxDepth + 4;  // > notifies that can be queued

// Written by the server; the rest are sources of the client's own Writes.
struct alignas(64) ClientCtrl {
  Credit credit;
  alignas(64) uint64_t done = 0;  // the end value, once the final credit has landed
  alignas(64) uint64_t notify_src[kNotifyRing] = {};
  uint64_t end_src = 0;
};

// Written by the client; the rest are sources of the server's own Writes.
struct alignas(64) ServerCtrl {
  uint64_t notify = 0;  // operations issued, written after each RDMA Write
  uint64_t end = 0;     // operations in all + 1, written once all have completed
  alignas(64) Credit credit_src;
  uint64_t done_src = 0;
};

// A connection's server memory (one MR): receive slots, write slots, the
// read source, the atomic word.
struct Layout {
  uint64_t stride = 0;
  uint32_t slots = 0;
  uint32_t max_size = 0;

  Layout() = default;
  Layout(uint32_t max, uint32_t depth)
      : stride((uint64_t{max} + kOffsetSlack + 63) & ~uint64_t{63}), slots(depth), max_size(max) {}
  uint64_t recv(uint64_t i) const { return (i % slots) * stride; }
  uint64_t wslot(uint64_t i) const { return (slots + i % slots) * stride; }
  uint64_t read_src() const { return 2 * slots * stride; }
  uint64_t read_len() const { return (uint64_t{max_size} + kReadSlack + 63) & ~uint64_t{63}; }
  uint64_t atomic() const { return read_src() + read_len(); }
  uint64_t bytes() const { return atomic() + 64; }
};

}  // namespace softrdma::soak
