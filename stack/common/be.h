// Big-endian wire fields. Wire structs use these instead of raw integers so
// that every read and write of a network-order field is explicit, and the
// structs stay byte-aligned (no padding, no unaligned-access surprises).
#pragma once

#include <cstdint>

namespace softrdma {

struct Be16 {
  uint8_t b[2];
  constexpr uint16_t get() const { return static_cast<uint16_t>((b[0] << 8) | b[1]); }
  constexpr void set(uint16_t v) {
    b[0] = static_cast<uint8_t>(v >> 8);
    b[1] = static_cast<uint8_t>(v);
  }
};

struct Be32 {
  uint8_t b[4];
  constexpr uint32_t get() const {
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }
  constexpr void set(uint32_t v) {
    for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  }
};

struct Be64 {
  uint8_t b[8];
  constexpr uint64_t get() const {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | b[i];
    return v;
  }
  constexpr void set(uint64_t v) {
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  }
};

static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be32) == 4 && alignof(Be32) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);

}  // namespace softrdma
