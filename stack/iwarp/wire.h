// iWARP wire formats: MPA (RFC 5044, RFC 6581), DDP (RFC 5041), RDMAP
// (RFC 5040, RFC 7306). Declared once, here, beside their RFC sections.
//
// As in siw, every FPDU header starts with the MPA ULPDU_Length followed by
// the DDP and RDMAP control bytes: the three layers share one control word,
// so the structs below include the 2-byte MPA length. All multi-byte fields
// are big-endian (Be16/Be32/Be64); no C bitfields touch the wire.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stack/common/be.h"

namespace softrdma::iwarp {

// ---------------------------------------------------------------------------
// MPA connection setup, RFC 5044 §7.1 (Request/Reply frame) and RFC 6581 §5.
// ---------------------------------------------------------------------------
inline constexpr char kMpaKeyReq[] = "MPA ID Req Frame";  // 16 octets on wire
inline constexpr char kMpaKeyRep[] = "MPA ID Rep Frame";
inline constexpr size_t kMpaKeyLen = 16;
inline constexpr size_t kMpaMaxPrivateData = 512;  // RFC 5044 §7.1: PD_Length <= 512
inline constexpr uint8_t kMpaRev1 = 1;
inline constexpr uint8_t kMpaRev2 = 2;  // RFC 6581 enhanced connection establishment

struct MpaRrHdr {
  uint8_t key[kMpaKeyLen];
  uint8_t flags;  // M C R Res(5)
  uint8_t rev;
  Be16 pd_len;
};
static_assert(sizeof(MpaRrHdr) == 20);

inline constexpr uint8_t kMpaFlagMarkers = 0x80;  // M: receiver wants markers
inline constexpr uint8_t kMpaFlagCrc = 0x40;      // C: CRC32c in use
inline constexpr uint8_t kMpaFlagReject = 0x20;   // R: reply rejects the connection
inline constexpr uint8_t kMpaFlagResMask = 0x1f;

// RFC 6581 §5: first 4 octets of private data when Rev = 2.
struct MpaV2Params {
  Be16 ird;  // A(peer-to-peer) B(zero-length send RTR) IRD(14)
  Be16 ord;  // C(RDMA write RTR) D(RDMA read RTR) ORD(14)
};
static_assert(sizeof(MpaV2Params) == 4);
inline constexpr uint16_t kMpaV2PeerToPeer = 0x8000;  // in ird
inline constexpr uint16_t kMpaV2SendRtr = 0x4000;     // in ird: zero-length Send RTR
inline constexpr uint16_t kMpaV2WriteRtr = 0x8000;    // in ord: zero-length RDMA Write RTR
inline constexpr uint16_t kMpaV2ReadRtr = 0x4000;     // in ord: zero-length RDMA Read RTR
inline constexpr uint16_t kMpaV2IrdOrdMask = 0x3fff;

// ---------------------------------------------------------------------------
// MPA FPDU, RFC 5044 §6: ULPDU_Length(2) ULPDU PAD(0-3) CRC(4); Markers §5.
// ---------------------------------------------------------------------------
inline constexpr size_t kMpaLenSize = 2;
inline constexpr size_t kMpaCrcSize = 4;
inline constexpr size_t kMpaMarkerInterval = 512;  // RFC 5044 §5.1
inline constexpr size_t kMpaMarkerSize = 4;

struct MpaMarker {
  Be16 rsvd;
  Be16 fpduptr;  // octets from the marker back to the FPDU's ULPDU_Length
};
static_assert(sizeof(MpaMarker) == 4);

// Pad so that ULPDU_Length + ULPDU + PAD is a multiple of 4 (RFC 5044 §6.1).
constexpr size_t mpa_pad(size_t ulpdu_len) { return (4 - ((ulpdu_len + kMpaLenSize) & 3)) & 3; }

// ---------------------------------------------------------------------------
// DDP (RFC 5041 §4.2-4.4) and RDMAP (RFC 5040 §4.2) control, sharing a word.
// ---------------------------------------------------------------------------
inline constexpr uint8_t kDdpTagged = 0x80;  // T
inline constexpr uint8_t kDdpLast = 0x40;    // L
inline constexpr uint8_t kDdpRsvdMask = 0x3c;
inline constexpr uint8_t kDdpVersionMask = 0x03;
inline constexpr uint8_t kDdpVersion = 1;
inline constexpr uint8_t kRdmapVersionMask = 0xc0;
inline constexpr uint8_t kRdmapRsvdMask = 0x30;
inline constexpr uint8_t kRdmapOpcodeMask = 0x0f;
inline constexpr uint8_t kRdmapVersion = 1;

// RFC 5040 §4.2 Table 1, extended by RFC 7306 §5.1.
enum class RdmapOpcode : uint8_t {
  kRdmaWrite = 0x0,
  kRdmaReadReq = 0x1,
  kRdmaReadResp = 0x2,
  kSend = 0x3,
  kSendInv = 0x4,
  kSendSe = 0x5,
  kSendSeInv = 0x6,
  kTerminate = 0x7,
  kImmData = 0x8,      // RFC 7306
  kImmDataSe = 0x9,    // RFC 7306
  kAtomicReq = 0xa,    // RFC 7306
  kAtomicResp = 0xb,   // RFC 7306
};
inline constexpr int kRdmapOpcodeCount = 12;

// Untagged queue numbers: RFC 5040 §5.1; RFC 7306 §5.2 adds the atomics.
inline constexpr uint32_t kQnSend = 0;
inline constexpr uint32_t kQnReadReq = 1;
inline constexpr uint32_t kQnTerminate = 2;
inline constexpr uint32_t kQnAtomicReq = 3;
inline constexpr uint32_t kQnAtomicResp = 4;
inline constexpr uint32_t kQnCount = 5;

struct Ctrl {
  Be16 mpa_len;   // MPA ULPDU_Length
  uint8_t ddp;    // T L Rsvd(4) DV(2)
  uint8_t rdmap;  // RV(2) Rsvd(2) Opcode(4)

  constexpr bool tagged() const { return ddp & kDdpTagged; }
  constexpr bool last() const { return ddp & kDdpLast; }
  constexpr uint8_t ddp_version() const { return ddp & kDdpVersionMask; }
  constexpr uint8_t rdmap_version() const { return rdmap >> 6; }
  constexpr uint8_t opcode() const { return rdmap & kRdmapOpcodeMask; }
  constexpr void set(bool is_tagged, bool is_last, RdmapOpcode op) {
    ddp = static_cast<uint8_t>((is_tagged ? kDdpTagged : 0) | (is_last ? kDdpLast : 0) | kDdpVersion);
    rdmap = static_cast<uint8_t>((kRdmapVersion << 6) | static_cast<uint8_t>(op));
  }
};
static_assert(sizeof(Ctrl) == 4);

// RFC 5041 §4.3 tagged buffer model header (RDMA Write, Read Response).
struct TaggedHdr {
  Ctrl ctrl;
  Be32 stag;
  Be64 to;
};
static_assert(sizeof(TaggedHdr) == 16);

// RFC 5041 §4.4 untagged buffer model header. RsvdULP carries the
// Invalidate STag for Send with Invalidate (RFC 5040 §4.3).
struct UntaggedHdr {
  Ctrl ctrl;
  Be32 rsvd_ulp;
  Be32 qn;
  Be32 msn;
  Be32 mo;
};
static_assert(sizeof(UntaggedHdr) == 20);
static_assert(offsetof(UntaggedHdr, qn) == 8 && offsetof(UntaggedHdr, mo) == 16);

// RFC 5040 §4.4 RDMA Read Request header (the untagged payload on QN 1).
struct ReadReqPayload {
  Be32 sink_stag;
  Be64 sink_to;
  Be32 read_size;
  Be32 src_stag;
  Be64 src_to;
};
static_assert(sizeof(ReadReqPayload) == 28);

// RFC 5040 §4.8 Terminate header: control word then optional fields.
inline constexpr uint32_t kTermLayerShift = 28;
inline constexpr uint32_t kTermEtypeShift = 24;
inline constexpr uint32_t kTermEcodeShift = 16;
inline constexpr uint32_t kTermFlagM = 0x8000;  // DDP segment length valid
inline constexpr uint32_t kTermFlagD = 0x4000;  // terminated DDP header included
inline constexpr uint32_t kTermFlagR = 0x2000;  // terminated RDMAP header included
struct TerminatePayload {
  Be32 ctrl;  // Layer(4) EType(4) ErrorCode(8) Hdrct M D R (3) Rsvd(13)
};
static_assert(sizeof(TerminatePayload) == 4);
// After the control word: DDP Segment Length (2, if M), the terminated DDP
// header (14 tagged / 18 untagged, if D), the terminated RDMAP header (28, if R:
// the Read Request header only).
inline constexpr size_t kTermDdpSegLenSize = 2;
inline constexpr size_t kTermRdmapHdrSize = sizeof(ReadReqPayload);

// RFC 7306 §5.3 Immediate Data: 8 octets of data on QN 0.
struct ImmDataPayload {
  Be64 data;
};
static_assert(sizeof(ImmDataPayload) == 8);

// RFC 7306 §5.4 Atomic Request (payload on QN 3) and Response (QN 4).
enum class AtomicOpcode : uint8_t { kFetchAdd = 0x0, kSwap = 0x1, kCompareSwap = 0x2 };
struct AtomicReqPayload {
  Be32 opcode;  // Reserved(28) AOpCode(4)
  Be32 req_id;
  Be32 remote_stag;
  Be64 remote_to;
  Be64 add_swap;
  Be64 add_swap_mask;
  Be64 compare;
  Be64 compare_mask;
};
static_assert(sizeof(AtomicReqPayload) == 52);
struct AtomicRespPayload {
  Be32 req_id;
  Be64 orig_value;
};
static_assert(sizeof(AtomicRespPayload) == 12);

// ---------------------------------------------------------------------------
// Terminate error codes: RFC 5040 §7 (RDMAP), RFC 5041 §7 (DDP), RFC 5044 §8
// and RFC 6581 §6 (MPA/LLP).
// ---------------------------------------------------------------------------
enum class TermLayer : uint8_t { kRdmap = 0, kDdp = 1, kLlp = 2 };

enum class RdmapEtype : uint8_t { kCatastrophic = 0, kRemoteProtection = 1, kRemoteOperation = 2 };
enum class RdmapEcode : uint8_t {
  kInvalidStag = 0x00,
  kBaseBounds = 0x01,
  kAccessRights = 0x02,
  kStagNotAssoc = 0x03,
  kToWrap = 0x04,
  kVersion = 0x05,
  kOpcode = 0x06,
  kCatastrophicStream = 0x07,
  kCatastrophicGlobal = 0x08,
  kCannotInvalidate = 0x09,
  kUnspecified = 0xff,
};

enum class DdpEtype : uint8_t { kCatastrophic = 0, kTaggedBuf = 1, kUntaggedBuf = 2 };
enum class DdpTaggedEcode : uint8_t {
  kInvalidStag = 0x00,
  kBaseBounds = 0x01,
  kStagNotAssoc = 0x02,
  kToWrap = 0x03,
  kVersion = 0x04,
};
enum class DdpUntaggedEcode : uint8_t {
  kInvalidQn = 0x01,
  kNoBuffer = 0x02,     // Invalid MSN - no buffer available
  kMsnRange = 0x03,     // Invalid MSN - MSN range is not valid
  kInvalidMo = 0x04,
  kTooLong = 0x05,      // DDP message too long for available buffer
  kVersion = 0x06,
};

enum class LlpEcode : uint8_t {
  kStreamLost = 0x01,
  kCrc = 0x02,
  kMarker = 0x03,          // Marker and ULPDU_Length mismatch
  kBadReqRep = 0x04,       // invalid MPA Request/Reply frame
  kLocalCatastrophic = 0x05,  // RFC 6581
  kInsufficientIrd = 0x06,    // RFC 6581
  kNoMatchingRtr = 0x07,      // RFC 6581
};

// DDP header length (MPA length included) as the T bit selects it (RFC 5041
// §4.2): what a receiver collects before it can check the opcode. Everything
// per opcode, its header length too, is in the opcode table (opcodes.h), the
// one source of truth, which asserts that its lengths agree with this.
constexpr size_t hdr_len(bool tagged) { return tagged ? sizeof(TaggedHdr) : sizeof(UntaggedHdr); }

}  // namespace softrdma::iwarp
