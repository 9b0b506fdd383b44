#include "stack/common/crc32c.h"

#include <isa-l/crc.h>

#include <nmmintrin.h>

#include <climits>
#include <cstring>

namespace softrdma {

namespace {

// Buffers this short (an FPDU header, a small message, a pad) go through the
// CPU's crc32 instruction inline: ISA-L's dispatch and set-up cost more than
// the few instructions such a buffer needs (bench/crc32c_bench).
constexpr size_t kInlineMax = 64;

__attribute__((target("sse4.2"))) uint32_t crc_inline(uint32_t state, const uint8_t* p,
                                                        size_t len) {
  uint64_t s = state;
  for (; len >= 8; p += 8, len -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    s = _mm_crc32_u64(s, v);
  }
  auto s32 = static_cast<uint32_t>(s);
  for (; len > 0; ++p, --len) s32 = _mm_crc32_u8(s32, *p);
  return s32;
}

const bool g_has_sse42 = __builtin_cpu_supports("sse4.2");

}  // namespace

// crc32_iscsi() takes and returns the raw state (no inversion on entry or
// exit), as crc32c_update() does; its length is an int, hence the chunks.
uint32_t crc32c_update(uint32_t state, const void* data, size_t len) {
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));  // only read
  if (len <= kInlineMax && g_has_sse42) return crc_inline(state, p, len);
  constexpr size_t kMaxChunk = size_t{1} << 30;
  static_assert(kMaxChunk <= INT_MAX);
  for (; len > kMaxChunk; p += kMaxChunk, len -= kMaxChunk) {
    state = crc32_iscsi(p, static_cast<int>(kMaxChunk), state);
  }
  return crc32_iscsi(p, static_cast<int>(len), state);
}

uint32_t crc32c(const void* data, size_t len) {
  return crc32c_final(crc32c_update(kCrc32cInit, data, len));
}

}  // namespace softrdma
