// CRC32c (Castagnoli, reflected polynomial 0x82F63B78): the MPA FPDU CRC
// (RFC 5044 §6.1) and the iSCSI digest (RFC 3720 §B.4).
//
// crc32c_update() works on the raw running state so that a CRC can be
// accumulated over a scattered FPDU (header, payload fragments, pad) without
// copying; seed with kCrc32cInit and apply crc32c_final() once at the end.
// The value goes on the wire little-endian (RFC 3720 §B.4 lists the CRC of
// 32 zero bytes, 0x8a9136aa, as the octets aa 36 91 8a).
#pragma once

#include <cstddef>
#include <cstdint>

namespace softrdma {

inline constexpr uint32_t kCrc32cInit = 0xFFFFFFFFu;

inline constexpr uint32_t crc32c_final(uint32_t state) { return ~state; }

// Advances `state` over `data`, using the SSE4.2 crc32 instruction when the
// CPU has it and the table-driven code otherwise.
uint32_t crc32c_update(uint32_t state, const void* data, size_t len);

// crc32c_final(crc32c_update(kCrc32cInit, data, len)).
uint32_t crc32c(const void* data, size_t len);

// True when crc32c_update() dispatches to the SSE4.2 path.
bool crc32c_hw_available();

// The portable slicing-by-8 path, always available; exposed so that tests and
// benchmarks can exercise it on machines that do have SSE4.2.
uint32_t crc32c_update_sw(uint32_t state, const void* data, size_t len);

// The SSE4.2 path. Precondition: crc32c_hw_available().
uint32_t crc32c_update_hw(uint32_t state, const void* data, size_t len);
// True when the CPU also has AVX2 and VPCLMULQDQ: crc32c_update() then
// folds part of every buffer of 7 KiB or more with carry-less multiplies.
bool crc32c_clmul_available();
// The hybrid path (SSE4.2 below 7 KiB). Precondition: crc32c_clmul_available().
uint32_t crc32c_update_clmul(uint32_t state, const void* data, size_t len);

}  // namespace softrdma
