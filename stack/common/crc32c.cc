#include "stack/common/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace softrdma {

// crc32_iscsi() takes and returns the raw state (no inversion on entry or
// exit), as crc32c_update() does; its length is an int, hence the chunks.
uint32_t crc32c_update(uint32_t state, const void* data, size_t len) {
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));  // only read
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
