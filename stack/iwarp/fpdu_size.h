// How large an FPDU may be, from what the transport says of its segments
// (StreamConn::max_segment()). MPA's rules, RFC 5044:
//  - An FPDU fits one TCP segment (the sender sizes FPDUs to the MULPDU,
//    derived from the MSS), so FPDU and segment boundaries line up and a
//    receiver can place each segment as it arrives.
//  - ULPDU_Length is 16 bits, so an FPDU (length, ULPDU, pad, CRC) never
//    needs more than 64 KiB.
//  - An FPDU is a multiple of 4 octets (the ULPDU is padded to one).
// Markers, when in use, come out of this size (qp_tx.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace softrdma::iwarp {

// The largest FPDU: under 64 KiB and 4-aligned.
inline constexpr size_t kMaxFpdu = 65536 - 8;
// The smallest: below this, headers and markers would eat most of each FPDU.
// It is under the 536-octet default MSS every IPv4 TCP must accept, so a
// real segment is never overrun; only a bogus tiny MSS is.
inline constexpr size_t kMinFpdu = 512;

// The FPDU size for a stream whose segments carry max_segment payload bytes
// (net::kNoSegmentLimit: none, the largest FPDU).
constexpr size_t fpdu_size(size_t max_segment) {
  return std::max(std::min(max_segment, kMaxFpdu) & ~size_t{3}, kMinFpdu);
}

static_assert(fpdu_size(1460) == 1460 && fpdu_size(1449) == 1448);
static_assert(fpdu_size(SIZE_MAX) == kMaxFpdu && fpdu_size(0) == kMinFpdu);

}  // namespace softrdma::iwarp
