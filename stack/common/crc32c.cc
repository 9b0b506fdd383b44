#include "stack/common/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#include <nmmintrin.h>
#define SOFTRDMA_CRC32C_X86 1
#endif

namespace softrdma {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reflected

// --- Portable path: slicing-by-8 --------------------------------------------

using SliceTables = std::array<std::array<uint32_t, 256>, 8>;

// kSlice[0] is the classic byte table; kSlice[k][b] is the state change caused
// by byte b followed by k zero bytes, so eight lookups consume a 64-bit word.
constexpr SliceTables make_slice_tables() {
  SliceTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1) ? kPoly : 0);
    t[0][b] = crc;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}
constexpr SliceTables kSlice = make_slice_tables();

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // memcpy: no alignment or aliasing UB
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

#if SOFTRDMA_CRC32C_X86

// --- Hardware path: three interleaved crc32 streams -------------------------
//
// The crc32 instruction has a 3-cycle latency but a 1-cycle throughput, so a
// single dependent chain uses a third of the unit. Large buffers are split
// into three adjacent lanes processed in parallel, and the lane CRCs are
// merged with the identity update(s, A||B) = s_A * x^(8|B|) ^ update(0, B)
// (mod P), where the multiplication by a fixed power of x is four table
// lookups.

// Lane sizes, largest first: big lanes amortize the merge, small ones keep
// MTU-sized FPDUs (and the tails of large buffers) mostly interleaved.
constexpr size_t kLongLane = 8192;  // 3 lanes = 24 KiB per round
constexpr size_t kShortLane = 256;  // 3 lanes = 768 B per round
constexpr size_t kTinyLane = 64;    // 3 lanes = 192 B per round

// a * b mod P in the reflected representation (bit 31 is x^0).
constexpr uint32_t gf2_mul(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b >> 1) ^ ((b & 1) ? kPoly : 0);  // b *= x
  }
  return product;
}

// x^(8 * n) mod P: the operator that advances a state over n zero bytes.
constexpr uint32_t x_pow_8n(size_t n) {
  uint32_t result = 1u << 31;  // x^0
  uint32_t square = 1u << 23;  // x^8
  for (; n != 0; n >>= 1) {
    if (n & 1) result = gf2_mul(result, square);
    square = gf2_mul(square, square);
  }
  return result;
}

using ShiftTables = std::array<std::array<uint32_t, 256>, 4>;

// kShift*[k][b] = (b << 8k) * x^(8 * lane) mod P; by linearity the shifted
// state is the XOR over its four bytes.
constexpr ShiftTables make_shift_tables(size_t lane) {
  ShiftTables t{};
  const uint32_t op = x_pow_8n(lane);
  for (uint32_t k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = gf2_mul(op, b << (8 * k));
  }
  return t;
}
constexpr ShiftTables kShiftLong = make_shift_tables(kLongLane);
constexpr ShiftTables kShiftShort = make_shift_tables(kShortLane);
constexpr ShiftTables kShiftTiny = make_shift_tables(kTinyLane);

inline uint32_t shift(const ShiftTables& t, uint32_t crc) {
  return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

// Processes as many whole 3 * lane rounds as fit; returns the updated state.
__attribute__((target("sse4.2"))) inline uint64_t hw_rounds(uint64_t crc0, const uint8_t*& p,
                                                            size_t& len, size_t lane,
                                                            const ShiftTables& t) {
  while (len >= 3 * lane) {
    uint64_t crc1 = 0;
    uint64_t crc2 = 0;
    const uint8_t* const end = p + lane;
    do {
      crc0 = _mm_crc32_u64(crc0, load_le64(p));
      crc1 = _mm_crc32_u64(crc1, load_le64(p + lane));
      crc2 = _mm_crc32_u64(crc2, load_le64(p + 2 * lane));
      p += 8;
    } while (p != end);
    crc0 = shift(t, static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = shift(t, static_cast<uint32_t>(crc0)) ^ crc2;
    p += 2 * lane;
    len -= 3 * lane;
  }
  return crc0;
}

// --- Hybrid path: carry-less multiply folding beside the crc32 lanes ----------
//
// The crc32 lanes above saturate the one unit that runs crc32 (about 19 GB/s
// here). VPCLMULQDQ runs on other ports, so a round splits its bytes: the
// first kFoldBytes are folded with carry-less multiplies while the crc32
// lanes take the next 3 * kFoldLane, and the two states are merged with the
// same shift tables.
//
// Folding works on 16-byte blocks. Read as a polynomial, a block is
// X = LO * x^64 + HI (LO: its first 8 bytes, the higher-degree half, since
// the CRC is bit-reflected). Moving X forward by D bits (D bits of later data
// follow it) means X * x^D = LO * x^(64 + D) + HI * x^D (mod P). With a
// reflected 64-bit q and a constant c, the carry-less product q (x) c read as
// a 128-bit block stands for Q * C * x, so the constants are x^(63 + D) and
// x^(D - 1) mod P, each in the high half of a 64-bit word. A block whose
// CRC state, from zero, equals that of all data so far is the fold's
// invariant; the caller's state enters as an XOR into the first 4 bytes.

constexpr size_t kFoldBytes = 4096;  // multiple of 128; about 55 % of a round
constexpr size_t kFoldLane = 1024;   // crc32 lanes: 3 * 1 KiB per round
constexpr size_t kHybridRound = kFoldBytes + 3 * kFoldLane;  // 7 KiB: one per MSS-sized FPDU
constexpr ShiftTables kShiftFold = make_shift_tables(kFoldLane);
constexpr ShiftTables kShiftFoldLanes = make_shift_tables(3 * kFoldLane);

// x^k mod P, reflected.
constexpr uint32_t x_pow(size_t k) { return gf2_mul(x_pow_8n(k / 8), 1u << (31 - k % 8)); }

// {lo, hi} multipliers that move a block forward by d bits.
struct FoldKey {
  uint64_t lo, hi;
};
constexpr FoldKey fold_key(size_t d) {
  return {uint64_t{x_pow(63 + d)} << 32, uint64_t{x_pow(d - 1)} << 32};
}
constexpr FoldKey kFold1024 = fold_key(1024);  // the loop: 128 bytes ahead
// The final merge: block j of the last 128 bytes moves (7 - j) * 128 bits.
constexpr std::array<FoldKey, 7> make_tail_keys() {
  std::array<FoldKey, 7> k{};
  for (size_t j = 0; j < 7; ++j) k[j] = fold_key((7 - j) * 128);
  return k;
}
constexpr std::array<FoldKey, 7> kFoldTail = make_tail_keys();

__attribute__((target("sse4.2,pclmul"))) inline __m128i fold128(__m128i x, FoldKey k) {
  const __m128i key = _mm_set_epi64x(static_cast<long long>(k.hi), static_cast<long long>(k.lo));
  return _mm_xor_si128(_mm_clmulepi64_si128(x, key, 0x00), _mm_clmulepi64_si128(x, key, 0x11));
}

// Two blocks moved forward by the key, plus the two blocks at next.
__attribute__((target("avx2,vpclmulqdq"))) inline __m256i fold256(__m256i x, __m256i k,
                                                                  const __m256i* next) {
  return _mm256_xor_si256(
      _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11)),
      _mm256_loadu_si256(next));
}

// One round: the state after `crc` runs over p[0, kHybridRound). Each
// iteration folds 128 bytes and feeds 32 bytes to each crc32 lane, so the
// two units work side by side (separate loops would not overlap: the
// reorder window is far smaller than either).
__attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq"))) uint32_t hybrid_round(uint32_t crc,
                                                                               const uint8_t* p) {
  const auto* v = reinterpret_cast<const __m256i*>(p);
  __m256i x0 = _mm256_xor_si256(_mm256_loadu_si256(v), _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0,
                                                                          static_cast<int>(crc)));
  __m256i x1 = _mm256_loadu_si256(v + 1);
  __m256i x2 = _mm256_loadu_si256(v + 2);
  __m256i x3 = _mm256_loadu_si256(v + 3);
  const __m256i k = _mm256_set_epi64x(static_cast<long long>(kFold1024.hi),
                                      static_cast<long long>(kFold1024.lo),
                                      static_cast<long long>(kFold1024.hi),
                                      static_cast<long long>(kFold1024.lo));
  const uint8_t* lane = p + kFoldBytes;
  uint64_t c0 = 0, c1 = 0, c2 = 0;
  constexpr size_t kLaneStep = kFoldLane / (kFoldBytes / 128);  // lane bytes per iteration
  static_assert(kLaneStep % 8 == 0 && kLaneStep * (kFoldBytes / 128) == kFoldLane);
  auto lanes = [&](const uint8_t* q) __attribute__((always_inline, target("sse4.2"))) {
    for (size_t b = 0; b < kLaneStep; b += 8) {
      c0 = _mm_crc32_u64(c0, load_le64(q + b));
      c1 = _mm_crc32_u64(c1, load_le64(q + kFoldLane + b));
      c2 = _mm_crc32_u64(c2, load_le64(q + 2 * kFoldLane + b));
    }
  };
  lanes(lane);
  for (size_t off = 4; off < kFoldBytes / 32; off += 4) {
    lane += kLaneStep;
    x0 = fold256(x0, k, v + off);
    x1 = fold256(x1, k, v + off + 1);
    x2 = fold256(x2, k, v + off + 2);
    x3 = fold256(x3, k, v + off + 3);
    lanes(lane);
  }
  const __m128i blocks[8] = {_mm256_castsi256_si128(x0), _mm256_extracti128_si256(x0, 1),
                             _mm256_castsi256_si128(x1), _mm256_extracti128_si256(x1, 1),
                             _mm256_castsi256_si128(x2), _mm256_extracti128_si256(x2, 1),
                             _mm256_castsi256_si128(x3), _mm256_extracti128_si256(x3, 1)};
  __m128i acc = blocks[7];
  for (size_t j = 0; j < 7; ++j) acc = _mm_xor_si128(acc, fold128(blocks[j], kFoldTail[j]));
  const uint64_t lo = static_cast<uint64_t>(_mm_cvtsi128_si64(acc));
  const uint64_t hi = static_cast<uint64_t>(_mm_extract_epi64(acc, 1));
  const auto folded = static_cast<uint32_t>(_mm_crc32_u64(_mm_crc32_u64(0, lo), hi));
  // Lanes merge as in hw_rounds; the fold's state moves past all three.
  uint32_t lanes_crc = shift(kShiftFold, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
  lanes_crc = shift(kShiftFold, lanes_crc) ^ static_cast<uint32_t>(c2);
  return shift(kShiftFoldLanes, folded) ^ lanes_crc;
}

#endif  // SOFTRDMA_CRC32C_X86

bool detect_clmul() {
#if SOFTRDMA_CRC32C_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") &&
         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq");
#else
  return false;
#endif
}

bool detect_hw() {
#if SOFTRDMA_CRC32C_X86
  __builtin_cpu_init();  // required when called from a static initializer
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

// Resolved once at load time. Code running in an earlier static initializer
// sees false and takes the (equally correct) table path.
const bool g_hw = detect_hw();
const bool g_clmul = detect_clmul();

}  // namespace

uint32_t crc32c_update_sw(uint32_t state, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = state;
  for (; len >= 8; p += 8, len -= 8) {
    const uint64_t w = load_le64(p) ^ crc;
    crc = kSlice[7][w & 0xff] ^ kSlice[6][(w >> 8) & 0xff] ^ kSlice[5][(w >> 16) & 0xff] ^
          kSlice[4][(w >> 24) & 0xff] ^ kSlice[3][(w >> 32) & 0xff] ^
          kSlice[2][(w >> 40) & 0xff] ^ kSlice[1][(w >> 48) & 0xff] ^ kSlice[0][w >> 56];
  }
  for (; len != 0; ++p, --len) crc = (crc >> 8) ^ kSlice[0][(crc ^ *p) & 0xff];
  return crc;
}

#if SOFTRDMA_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t crc32c_update_hw(uint32_t state, const void* data,
                                                            size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t crc = state;
  // Align so that the word loads below never straddle a cache line.
  for (; len != 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; ++p, --len) {
    crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p);
  }
  crc = hw_rounds(crc, p, len, kLongLane, kShiftLong);
  crc = hw_rounds(crc, p, len, kShortLane, kShiftShort);
  crc = hw_rounds(crc, p, len, kTinyLane, kShiftTiny);
  for (; len >= 8; p += 8, len -= 8) crc = _mm_crc32_u64(crc, load_le64(p));
  for (; len != 0; ++p, --len) crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p);
  return static_cast<uint32_t>(crc);
}

__attribute__((target("sse4.2"))) uint32_t crc32c_update_clmul(uint32_t state, const void* data,
                                                               size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len >= kHybridRound) {
    state = hybrid_round(state, p);
    p += kHybridRound;
    len -= kHybridRound;
  }
  return crc32c_update_hw(state, p, len);
}
#else
uint32_t crc32c_update_hw(uint32_t state, const void* data, size_t len) {
  return crc32c_update_sw(state, data, len);
}
uint32_t crc32c_update_clmul(uint32_t state, const void* data, size_t len) {
  return crc32c_update_sw(state, data, len);
}
#endif

bool crc32c_hw_available() { return g_hw; }
bool crc32c_clmul_available() { return g_clmul; }

uint32_t crc32c_update(uint32_t state, const void* data, size_t len) {
  if (g_clmul && len >= kHybridRound) return crc32c_update_clmul(state, data, len);
  return g_hw ? crc32c_update_hw(state, data, len) : crc32c_update_sw(state, data, len);
}

uint32_t crc32c(const void* data, size_t len) {
  return crc32c_final(crc32c_update(kCrc32cInit, data, len));
}

}  // namespace softrdma
