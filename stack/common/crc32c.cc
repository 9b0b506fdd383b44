#include "stack/common/crc32c.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
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

#endif  // SOFTRDMA_CRC32C_X86

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
#else
uint32_t crc32c_update_hw(uint32_t state, const void* data, size_t len) {
  return crc32c_update_sw(state, data, len);
}
#endif

bool crc32c_hw_available() { return g_hw; }

uint32_t crc32c_update(uint32_t state, const void* data, size_t len) {
  return g_hw ? crc32c_update_hw(state, data, len) : crc32c_update_sw(state, data, len);
}

uint32_t crc32c(const void* data, size_t len) {
  return crc32c_final(crc32c_update(kCrc32cInit, data, len));
}

}  // namespace softrdma
