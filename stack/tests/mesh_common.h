// mesh_test's shared pieces (usage and protocol in mesh_test.cc): sizes and
// pattern seeds both ends derive, the atomic word's history, the private
// data exchanged at connection setup, registered buffers, and failing loudly
// from a child process.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "stack/tests/loopback.h"

namespace softrdma::mesh {

using Clock = std::chrono::steady_clock;
using testing::loopback;
using testing::pattern;

inline constexpr uint32_t kMagic = 0x4d455348;  // "MESH"
inline constexpr int kMaxProcs = 8;
inline constexpr uint64_t kBaseSizes[] = {0, 1, 4095, 9001, 65536, (1u << 20) + 3};
inline constexpr uint64_t kReadSlack = 8;  // Reads start at offset step % 8 in C

inline int g_rank = -1;  // the child's index, for messages

[[noreturn]] __attribute__((format(printf, 1, 2))) inline void fail(const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "mesh_test[%d pid %d]: FAIL: ", g_rank, getpid());
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  _exit(1);
}

inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

enum class What : uint32_t { kWrite = 1, kSend, kWriteImm, kReadSource };

// The pattern seed of one message: who to whom, which step, which operation.
inline uint32_t seed_of(int from, int to, size_t step, What what) {
  return static_cast<uint32_t>(
      mix((uint64_t(from) << 48) ^ (uint64_t(to) << 40) ^ (uint64_t(step) << 8) ^
          static_cast<uint64_t>(what)));
}

// The sizes requester `from` runs against responder `to`.
inline std::vector<uint64_t> sizes_for(int from, int to, int procs, uint64_t big) {
  std::vector<uint64_t> s(std::begin(kBaseSizes), std::end(kBaseSizes));
  if (big > 0 && to == (from + 1) % procs) s.push_back(big);
  return s;
}

inline uint64_t largest(const std::vector<uint64_t>& sizes) {
  return std::max<uint64_t>(8, *std::max_element(sizes.begin(), sizes.end()));
}

// The atomic word's history on one connection, derived by both ends.
struct AtomicSeq {
  uint64_t w;
  explicit AtomicSeq(int from, int to) : w(mix(0xA70A1C00ull + uint64_t(from) * 16 + to)) {}
  static uint64_t addend(size_t step) { return mix(step) | 1; }
  uint64_t swap_value(size_t step) const { return mix(w ^ (step * 0x51ull)); }
  // One step: fetch-add, succeeding cmp-swap, failing cmp-swap.
  void advance(size_t step) {
    w += addend(step);
    w = swap_value(step);
  }
};

// Compares n bytes with the expected ones; fails with the first difference.
inline void expect_bytes(const char* what, int from, int to, size_t step, uint64_t n,
                  const uint8_t* got, const uint8_t* want) {
  if (n == 0 || std::memcmp(got, want, n) == 0) return;
  uint64_t off = 0;
  while (got[off] == want[off]) ++off;
  fail("DATA MISMATCH in %s %d->%d step %zu (%" PRIu64 " bytes): byte %" PRIu64
       " is 0x%02x, expected 0x%02x",
       what, from, to, step, n, off, got[off], want[off]);
}

struct Region {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t pad = 0;
};

struct Hello {  // requester -> responder, in the MPA Request
  uint32_t magic = kMagic;
  int32_t from = -1;
};

struct Welcome {  // responder -> requester, in the MPA Reply
  uint32_t magic = kMagic;
  int32_t from = -1;
  Region a, b, c, w;
};
static_assert(sizeof(Welcome) <= Engine::kMaxPrivateData);

struct Ack {
  uint64_t step = 0;
  uint64_t magic = kMagic;
};

template <class T>
inline bool decode(const std::vector<uint8_t>& pd, T* out) {
  if (pd.size() != sizeof(T)) return false;
  std::memcpy(out, pd.data(), sizeof(T));
  return out->magic == kMagic;
}

inline uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A registered buffer.
struct Buf {
  std::vector<uint8_t> v;
  Mr* mr = nullptr;
  void init(Engine& e, Pd* pd, uint64_t n, uint32_t access) {
    v.assign(n, 0);
    mr = e.reg_mr(pd, v.data(), n, access);
    if (!mr) fail("reg_mr of %" PRIu64 " bytes failed", n);
  }
  uint8_t* p(uint64_t off = 0) { return v.data() + off; }
  Sge sge(uint64_t off, uint64_t n) {
    return Sge{addr_of(p(off)), static_cast<uint32_t>(n), mr->stag};
  }
};

inline Wc expect_success(const Wc& wc, const char* role, int from, int to) {
  if (wc.status != WcStatus::kSuccess)
    fail("%s %d->%d: %s completion failed: %s (vendor_err 0x%x)", role, from, to,
         to_string(wc.opcode), to_string(wc.status), wc.vendor_err);
  return wc;
}

}  // namespace softrdma::mesh
