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

// Advances `state` over `data` (ISA-L's crc32_iscsi, which picks the
// CPU's fastest kernel: SSE4.2 crc32 lanes, carry-less multiply folding).
uint32_t crc32c_update(uint32_t state, const void* data, size_t len);

// crc32c_final(crc32c_update(kCrc32cInit, data, len)).
uint32_t crc32c(const void* data, size_t len);

}  // namespace softrdma
