// Golden-bytes tests for the iWARP wire structs: each expected array is laid
// out by hand from the RFC figure, octet 0 first, so that a field in the wrong
// place, of the wrong width or in host byte order fails loudly.
#include "stack/iwarp/wire.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

namespace softrdma::iwarp {
namespace {

template <typename T>
std::vector<uint8_t> to_bytes(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

template <typename T, size_t N>
T from_bytes(const std::array<uint8_t, N>& bytes) {
  static_assert(sizeof(T) == N, "golden array must cover the whole struct");
  T v;
  std::memcpy(&v, bytes.data(), N);
  return v;
}

template <size_t N>
std::vector<uint8_t> vec(const std::array<uint8_t, N>& a) {
  return {a.begin(), a.end()};
}

// ---------------------------------------------------------------------------
// Big-endian field wrappers.
// ---------------------------------------------------------------------------

TEST(BeTest, Be16RoundTrip) {
  Be16 v;
  v.set(0x1234);
  EXPECT_EQ(to_bytes(v), (std::vector<uint8_t>{0x12, 0x34}));
  EXPECT_EQ(v.get(), 0x1234);
  for (uint32_t x : {0x0000u, 0x00ffu, 0xff00u, 0x8001u, 0xffffu}) {
    v.set(static_cast<uint16_t>(x));
    EXPECT_EQ(v.get(), x);
  }
  const Be16 parsed{{0xbe, 0xef}};
  EXPECT_EQ(parsed.get(), 0xbeef);
}

TEST(BeTest, Be32RoundTrip) {
  Be32 v;
  v.set(0x12345678u);
  EXPECT_EQ(to_bytes(v), (std::vector<uint8_t>{0x12, 0x34, 0x56, 0x78}));
  EXPECT_EQ(v.get(), 0x12345678u);
  for (uint32_t x : {0u, 0xffu, 0x80000000u, 0x7fffffffu, 0xffffffffu}) {
    v.set(x);
    EXPECT_EQ(v.get(), x);
  }
  const Be32 parsed{{0xde, 0xad, 0xbe, 0xef}};
  EXPECT_EQ(parsed.get(), 0xdeadbeefu);
}

TEST(BeTest, Be64RoundTrip) {
  Be64 v;
  v.set(0x0102030405060708ull);
  EXPECT_EQ(to_bytes(v), (std::vector<uint8_t>{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}));
  EXPECT_EQ(v.get(), 0x0102030405060708ull);
  for (uint64_t x : {0ull, 0xffull, 0x8000000000000000ull, 0xffffffffffffffffull}) {
    v.set(x);
    EXPECT_EQ(v.get(), x);
  }
  const Be64 parsed{{0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}};
  EXPECT_EQ(parsed.get(), 0xfedcba9876543210ull);
}

constexpr bool be_constexpr_round_trip() {
  Be64 v{};
  v.set(0x8877665544332211ull);
  return v.b[0] == 0x88 && v.b[7] == 0x11 && v.get() == 0x8877665544332211ull;
}
static_assert(be_constexpr_round_trip());

// ---------------------------------------------------------------------------
// MPA Request/Reply frame, RFC 5044 §7.1.
// ---------------------------------------------------------------------------

// The keys as the RFC spells them in hex.
constexpr std::array<uint8_t, 16> kReqKeyHex = {0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                                0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65};
constexpr std::array<uint8_t, 16> kRepKeyHex = {0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                                0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65};

TEST(WireTest, MpaKeysMatchRfcHex) {
  EXPECT_EQ(sizeof(kMpaKeyReq) - 1, kMpaKeyLen);  // the NUL is not sent
  EXPECT_EQ(std::memcmp(kMpaKeyReq, kReqKeyHex.data(), kMpaKeyLen), 0);
  EXPECT_EQ(std::memcmp(kMpaKeyRep, kRepKeyHex.data(), kMpaKeyLen), 0);
}

TEST(WireTest, MpaRequestToBytes) {
  MpaRrHdr h{};
  std::memcpy(h.key, kMpaKeyReq, kMpaKeyLen);
  h.flags = kMpaFlagCrc;
  h.rev = kMpaRev2;
  h.pd_len.set(260);
  // Key(16) | M C R Res(5) | Rev | PD_Length(16)
  const std::array<uint8_t, 20> expected = {
      0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
      0x40,        // M=0 C=1 R=0
      0x02,        // Rev 2
      0x01, 0x04,  // PD_Length 260
  };
  EXPECT_EQ(to_bytes(h), vec(expected));
}

TEST(WireTest, MpaRejectReplyToBytes) {
  MpaRrHdr h{};
  std::memcpy(h.key, kMpaKeyRep, kMpaKeyLen);
  h.flags = kMpaFlagReject | kMpaFlagMarkers;
  h.rev = kMpaRev1;
  h.pd_len.set(kMpaMaxPrivateData);
  const std::array<uint8_t, 20> expected = {
      0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
      0xa0,        // M=1 C=0 R=1
      0x01,        // Rev 1
      0x02, 0x00,  // PD_Length 512, the maximum
  };
  EXPECT_EQ(to_bytes(h), vec(expected));
}

TEST(WireTest, MpaReplyFromBytes) {
  const std::array<uint8_t, 20> wire = {
      0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6d, 0x65,
      0xff, 0x02, 0x00, 0x04,
  };
  const auto h = from_bytes<MpaRrHdr>(wire);
  EXPECT_EQ(std::memcmp(h.key, kMpaKeyRep, kMpaKeyLen), 0);
  EXPECT_NE(std::memcmp(h.key, kMpaKeyReq, kMpaKeyLen), 0);
  EXPECT_TRUE(h.flags & kMpaFlagMarkers);
  EXPECT_TRUE(h.flags & kMpaFlagCrc);
  EXPECT_TRUE(h.flags & kMpaFlagReject);
  EXPECT_EQ(h.flags & kMpaFlagResMask, 0x1f);
  EXPECT_EQ(h.rev, kMpaRev2);
  EXPECT_EQ(h.pd_len.get(), 4);
  // The four flag masks partition the octet.
  EXPECT_EQ(kMpaFlagMarkers | kMpaFlagCrc | kMpaFlagReject | kMpaFlagResMask, 0xff);
  EXPECT_EQ(kMpaFlagMarkers & kMpaFlagCrc & kMpaFlagReject & kMpaFlagResMask, 0);
}

// ---------------------------------------------------------------------------
// MPA v2 IRD/ORD private data, RFC 6581 §5: |A|B| IRD(14) |C|D| ORD(14) |
// ---------------------------------------------------------------------------

TEST(WireTest, MpaV2ParamsToBytes) {
  MpaV2Params p{};
  p.ird.set(kMpaV2PeerToPeer | 16);
  p.ord.set(kMpaV2ReadRtr | kMpaV2IrdOrdMask);
  EXPECT_EQ(to_bytes(p), (std::vector<uint8_t>{0x80, 0x10, 0x7f, 0xff}));

  p.ird.set(kMpaV2SendRtr | 5);
  p.ord.set(kMpaV2WriteRtr | 1);
  EXPECT_EQ(to_bytes(p), (std::vector<uint8_t>{0x40, 0x05, 0x80, 0x01}));
}

TEST(WireTest, MpaV2ParamsFromBytes) {
  const auto p = from_bytes<MpaV2Params>(std::array<uint8_t, 4>{0xc0, 0x07, 0x40, 0x03});
  EXPECT_TRUE(p.ird.get() & kMpaV2PeerToPeer);  // A
  EXPECT_TRUE(p.ird.get() & kMpaV2SendRtr);     // B
  EXPECT_EQ(p.ird.get() & kMpaV2IrdOrdMask, 7);
  EXPECT_FALSE(p.ord.get() & kMpaV2WriteRtr);  // C
  EXPECT_TRUE(p.ord.get() & kMpaV2ReadRtr);    // D
  EXPECT_EQ(p.ord.get() & kMpaV2IrdOrdMask, 3);
}

// ---------------------------------------------------------------------------
// MPA Marker, RFC 5044 §5: Reserved(16) | FPDUPTR(16).
// ---------------------------------------------------------------------------

TEST(WireTest, MpaMarkerBothWays) {
  MpaMarker m{};
  m.rsvd.set(0);
  m.fpduptr.set(500);
  EXPECT_EQ(to_bytes(m), (std::vector<uint8_t>{0x00, 0x00, 0x01, 0xf4}));

  const auto parsed = from_bytes<MpaMarker>(std::array<uint8_t, 4>{0x00, 0x00, 0x00, 0x2c});
  EXPECT_EQ(parsed.rsvd.get(), 0);
  EXPECT_EQ(parsed.fpduptr.get(), 44);
}

// ---------------------------------------------------------------------------
// MPA padding, RFC 5044 §6.1: ULPDU_Length(2) + ULPDU + PAD is 4-aligned.
// ---------------------------------------------------------------------------

TEST(WireTest, MpaPad) {
  constexpr size_t kExpected[] = {2, 1, 0, 3, 2, 1, 0, 3, 2};  // lengths 0..8
  for (size_t len = 0; len <= 8; ++len) EXPECT_EQ(mpa_pad(len), kExpected[len]) << len;
  for (size_t len = 0; len < 4096; ++len) {
    ASSERT_EQ((kMpaLenSize + len + mpa_pad(len)) % 4, 0u) << len;
    ASSERT_LT(mpa_pad(len), 4u) << len;
  }
  static_assert(mpa_pad(sizeof(TaggedHdr) - kMpaLenSize) == 0);  // 14-octet DDP header
}

// ---------------------------------------------------------------------------
// Shared control word: MPA ULPDU_Length | T L Rsvd(4) DV(2) | RV(2) Rsvd(2) Op(4)
// (RFC 5041 §4.2, RFC 5040 §4.2).
// ---------------------------------------------------------------------------

TEST(WireTest, CtrlRdmaWriteLast) {
  Ctrl c{};
  c.mpa_len.set(78);
  c.set(/*is_tagged=*/true, /*is_last=*/true, RdmapOpcode::kRdmaWrite);
  EXPECT_EQ(to_bytes(c), (std::vector<uint8_t>{0x00, 0x4e, 0xc1, 0x40}));
  EXPECT_TRUE(c.tagged());
  EXPECT_TRUE(c.last());
  EXPECT_EQ(c.ddp_version(), 1);
  EXPECT_EQ(c.rdmap_version(), 1);
  EXPECT_EQ(c.opcode(), 0);
}

TEST(WireTest, CtrlSetHandWrittenCases) {
  struct Case {
    bool tagged;
    bool last;
    RdmapOpcode op;
    uint8_t ddp;
    uint8_t rdmap;
  };
  const Case cases[] = {
      {true, false, RdmapOpcode::kRdmaWrite, 0x81, 0x40},    // middle Write segment
      {false, true, RdmapOpcode::kRdmaReadReq, 0x41, 0x41},  // Read Request
      {true, true, RdmapOpcode::kRdmaReadResp, 0xc1, 0x42},  // last Read Response
      {false, false, RdmapOpcode::kSend, 0x01, 0x43},        // first Send segment
      {false, true, RdmapOpcode::kSendInv, 0x41, 0x44},
      {false, true, RdmapOpcode::kSendSe, 0x41, 0x45},
      {false, true, RdmapOpcode::kSendSeInv, 0x41, 0x46},
      {false, true, RdmapOpcode::kTerminate, 0x41, 0x47},
      {false, true, RdmapOpcode::kImmData, 0x41, 0x48},
      {false, true, RdmapOpcode::kImmDataSe, 0x41, 0x49},
      {false, true, RdmapOpcode::kAtomicReq, 0x41, 0x4a},
      {false, true, RdmapOpcode::kAtomicResp, 0x41, 0x4b},
  };
  for (const Case& k : cases) {
    Ctrl c{};
    c.mpa_len.set(0x0102);
    c.set(k.tagged, k.last, k.op);
    EXPECT_EQ(to_bytes(c), (std::vector<uint8_t>{0x01, 0x02, k.ddp, k.rdmap}))
        << "opcode " << int(k.op);
    EXPECT_EQ(c.tagged(), k.tagged);
    EXPECT_EQ(c.last(), k.last);
    EXPECT_EQ(c.opcode(), static_cast<uint8_t>(k.op));
    EXPECT_EQ(c.ddp & kDdpRsvdMask, 0);
    EXPECT_EQ(c.rdmap & kRdmapRsvdMask, 0);
  }
}

TEST(WireTest, CtrlFromBytes) {
  // Untagged, last, DV 1; RV 1, Send with SE and Invalidate.
  auto c = from_bytes<Ctrl>(std::array<uint8_t, 4>{0x00, 0x12, 0x41, 0x46});
  EXPECT_EQ(c.mpa_len.get(), 18);
  EXPECT_FALSE(c.tagged());
  EXPECT_TRUE(c.last());
  EXPECT_EQ(c.ddp_version(), kDdpVersion);
  EXPECT_EQ(c.rdmap_version(), kRdmapVersion);
  EXPECT_EQ(c.opcode(), static_cast<uint8_t>(RdmapOpcode::kSendSeInv));

  // A peer speaking DDP version 2 / RDMAP version 3 with reserved bits set:
  // the accessors must isolate their own fields.
  c = from_bytes<Ctrl>(std::array<uint8_t, 4>{0xff, 0xff, 0xbe, 0xfa});
  EXPECT_EQ(c.mpa_len.get(), 0xffff);
  EXPECT_TRUE(c.tagged());
  EXPECT_FALSE(c.last());
  EXPECT_EQ(c.ddp_version(), 2);
  EXPECT_EQ(c.ddp & kDdpRsvdMask, 0x3c);
  EXPECT_EQ(c.rdmap_version(), 3);
  EXPECT_EQ(c.rdmap & kRdmapRsvdMask, 0x30);
  EXPECT_EQ(c.opcode(), 0x0a);
}

TEST(WireTest, ControlMasksPartitionTheirOctets) {
  EXPECT_EQ(kDdpTagged | kDdpLast | kDdpRsvdMask | kDdpVersionMask, 0xff);
  EXPECT_EQ(kDdpTagged + kDdpLast + kDdpRsvdMask + kDdpVersionMask, 0xff);
  EXPECT_EQ(kRdmapVersionMask | kRdmapRsvdMask | kRdmapOpcodeMask, 0xff);
  EXPECT_EQ(kRdmapVersionMask + kRdmapRsvdMask + kRdmapOpcodeMask, 0xff);
}

constexpr bool ctrl_constexpr() {
  Ctrl c{};
  c.set(true, true, RdmapOpcode::kRdmaWrite);
  return c.ddp == 0xc1 && c.rdmap == 0x40;
}
static_assert(ctrl_constexpr());

// ---------------------------------------------------------------------------
// Tagged header, RFC 5041 §4.3: control | STag(32) | TO(64).
// ---------------------------------------------------------------------------

TEST(WireTest, TaggedHdrToBytes) {
  TaggedHdr h{};
  h.ctrl.mpa_len.set(14 + 64);  // DDP header + 64 octets of payload
  h.ctrl.set(true, true, RdmapOpcode::kRdmaWrite);
  h.stag.set(0x12345678u);
  h.to.set(0x0102030405060708ull);
  const std::array<uint8_t, 16> expected = {
      0x00, 0x4e, 0xc1, 0x40,                          // ULPDU_Length 78, T L DV=1, RV=1 Write
      0x12, 0x34, 0x56, 0x78,                          // Data Sink STag
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // Data Sink Tagged Offset
  };
  EXPECT_EQ(to_bytes(h), vec(expected));
  EXPECT_EQ(hdr_len(true), expected.size());
}

TEST(WireTest, TaggedHdrFromBytes) {
  const std::array<uint8_t, 16> wire = {
      0x05, 0xb4, 0x81, 0x42,                          // 1460, T, not last, Read Response
      0xa5, 0x5a, 0x00, 0x01,                          //
      0x00, 0x00, 0x7f, 0xff, 0xf7, 0xa0, 0x10, 0x00,  //
  };
  const auto h = from_bytes<TaggedHdr>(wire);
  EXPECT_EQ(h.ctrl.mpa_len.get(), 1460);
  EXPECT_TRUE(h.ctrl.tagged());
  EXPECT_FALSE(h.ctrl.last());
  EXPECT_EQ(h.ctrl.opcode(), static_cast<uint8_t>(RdmapOpcode::kRdmaReadResp));
  EXPECT_EQ(h.stag.get(), 0xa55a0001u);
  EXPECT_EQ(h.to.get(), 0x00007ffff7a01000ull);
}

// ---------------------------------------------------------------------------
// Untagged header, RFC 5041 §4.4: control | RsvdULP(32) | QN | MSN | MO.
// ---------------------------------------------------------------------------

TEST(WireTest, UntaggedSendInvToBytes) {
  UntaggedHdr h{};
  h.ctrl.mpa_len.set(18 + 100);
  h.ctrl.set(false, true, RdmapOpcode::kSendInv);
  h.rsvd_ulp.set(0xcafebabeu);  // STag to invalidate
  h.qn.set(kQnSend);
  h.msn.set(1);
  h.mo.set(0x1000);
  const std::array<uint8_t, 20> expected = {
      0x00, 0x76, 0x41, 0x44,  // ULPDU_Length 118, L DV=1, RV=1 Send w/ Invalidate
      0xca, 0xfe, 0xba, 0xbe,  // RsvdULP = Invalidate STag
      0x00, 0x00, 0x00, 0x00,  // QN 0
      0x00, 0x00, 0x00, 0x01,  // MSN 1
      0x00, 0x00, 0x10, 0x00,  // MO 4096
  };
  EXPECT_EQ(to_bytes(h), vec(expected));
  EXPECT_EQ(hdr_len(false), expected.size());
}

TEST(WireTest, UntaggedReadRequestFromBytes) {
  const std::array<uint8_t, 20> wire = {
      0x00, 0x2e, 0x41, 0x41,  // 18 + 28, L, Read Request
      0x00, 0x00, 0x00, 0x00,  //
      0x00, 0x00, 0x00, 0x01,  // QN 1
      0x80, 0x00, 0x00, 0x07,  // MSN (wraps mod 2^32)
      0x00, 0x00, 0x00, 0x00,  //
  };
  const auto h = from_bytes<UntaggedHdr>(wire);
  EXPECT_EQ(h.ctrl.mpa_len.get(), 18 + sizeof(ReadReqPayload));
  EXPECT_FALSE(h.ctrl.tagged());
  EXPECT_TRUE(h.ctrl.last());
  EXPECT_EQ(h.ctrl.opcode(), static_cast<uint8_t>(RdmapOpcode::kRdmaReadReq));
  EXPECT_EQ(h.rsvd_ulp.get(), 0u);
  EXPECT_EQ(h.qn.get(), kQnReadReq);
  EXPECT_EQ(h.msn.get(), 0x80000007u);
  EXPECT_EQ(h.mo.get(), 0u);
}

// ---------------------------------------------------------------------------
// RDMA Read Request header, RFC 5040 §4.4.
// ---------------------------------------------------------------------------

TEST(WireTest, ReadReqPayloadBothWays) {
  ReadReqPayload r{};
  r.sink_stag.set(0x11223344u);
  r.sink_to.set(0xaabbccddeeff0011ull);
  r.read_size.set(0x00010000u);
  r.src_stag.set(0x55667788u);
  r.src_to.set(0x0000700012345678ull);
  const std::array<uint8_t, 28> expected = {
      0x11, 0x22, 0x33, 0x44,                          // Data Sink STag
      0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11,  // Data Sink Tagged Offset
      0x00, 0x01, 0x00, 0x00,                          // RDMA Read Message Size
      0x55, 0x66, 0x77, 0x88,                          // Data Source STag
      0x00, 0x00, 0x70, 0x00, 0x12, 0x34, 0x56, 0x78,  // Data Source Tagged Offset
  };
  EXPECT_EQ(to_bytes(r), vec(expected));

  const auto p = from_bytes<ReadReqPayload>(expected);
  EXPECT_EQ(p.sink_stag.get(), 0x11223344u);
  EXPECT_EQ(p.sink_to.get(), 0xaabbccddeeff0011ull);
  EXPECT_EQ(p.read_size.get(), 0x00010000u);
  EXPECT_EQ(p.src_stag.get(), 0x55667788u);
  EXPECT_EQ(p.src_to.get(), 0x0000700012345678ull);
}

// ---------------------------------------------------------------------------
// Terminate control, RFC 5040 §4.8:
// Layer(4) EType(4) ErrorCode(8) M D R Rsvd(13).
// ---------------------------------------------------------------------------

uint32_t term_ctrl(TermLayer layer, uint8_t etype, uint8_t ecode, uint32_t flags) {
  return (uint32_t{static_cast<uint8_t>(layer)} << kTermLayerShift) |
         (uint32_t{etype} << kTermEtypeShift) | (uint32_t{ecode} << kTermEcodeShift) | flags;
}

TEST(WireTest, TerminateToBytes) {
  TerminatePayload t{};
  t.ctrl.set(term_ctrl(TermLayer::kDdp, static_cast<uint8_t>(DdpEtype::kUntaggedBuf),
                       static_cast<uint8_t>(DdpUntaggedEcode::kMsnRange), kTermFlagM | kTermFlagD));
  EXPECT_EQ(to_bytes(t), (std::vector<uint8_t>{0x12, 0x03, 0xc0, 0x00}));

  t.ctrl.set(term_ctrl(TermLayer::kRdmap, static_cast<uint8_t>(RdmapEtype::kRemoteProtection),
                       static_cast<uint8_t>(RdmapEcode::kInvalidStag), kTermFlagR));
  EXPECT_EQ(to_bytes(t), (std::vector<uint8_t>{0x01, 0x00, 0x20, 0x00}));

  // LLP layer, EType 0 (MPA), CRC error, no headers attached.
  t.ctrl.set(term_ctrl(TermLayer::kLlp, 0, static_cast<uint8_t>(LlpEcode::kCrc), 0));
  EXPECT_EQ(to_bytes(t), (std::vector<uint8_t>{0x20, 0x02, 0x00, 0x00}));

  t.ctrl.set(term_ctrl(TermLayer::kRdmap, static_cast<uint8_t>(RdmapEtype::kRemoteOperation),
                       static_cast<uint8_t>(RdmapEcode::kUnspecified), 0));
  EXPECT_EQ(to_bytes(t), (std::vector<uint8_t>{0x02, 0xff, 0x00, 0x00}));
}

TEST(WireTest, TerminateFromBytes) {
  const auto t = from_bytes<TerminatePayload>(std::array<uint8_t, 4>{0x01, 0x02, 0xe0, 0x00});
  const uint32_t c = t.ctrl.get();
  EXPECT_EQ(c >> kTermLayerShift, static_cast<uint32_t>(TermLayer::kRdmap));
  EXPECT_EQ((c >> kTermEtypeShift) & 0xf, static_cast<uint32_t>(RdmapEtype::kRemoteProtection));
  EXPECT_EQ((c >> kTermEcodeShift) & 0xff, static_cast<uint32_t>(RdmapEcode::kAccessRights));
  EXPECT_TRUE(c & kTermFlagM);
  EXPECT_TRUE(c & kTermFlagD);
  EXPECT_TRUE(c & kTermFlagR);
  EXPECT_EQ(c & 0x1fff, 0u);  // Rsvd
}

TEST(WireTest, TerminateOptionalFieldSizes) {
  EXPECT_EQ(kTermDdpSegLenSize, 2u);
  EXPECT_EQ(hdr_len(true) - kMpaLenSize, 14u);   // terminated tagged DDP header
  EXPECT_EQ(hdr_len(false) - kMpaLenSize, 18u);  // terminated untagged DDP header
  EXPECT_EQ(kTermRdmapHdrSize, 28u);
}

// ---------------------------------------------------------------------------
// RFC 7306 Immediate Data and Atomics.
// ---------------------------------------------------------------------------

TEST(WireTest, ImmDataBothWays) {
  ImmDataPayload d{};
  d.data.set(0x0123456789abcdefull);
  EXPECT_EQ(to_bytes(d),
            (std::vector<uint8_t>{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}));
  const auto p = from_bytes<ImmDataPayload>(
      std::array<uint8_t, 8>{0xff, 0, 0, 0, 0, 0, 0, 0x01});
  EXPECT_EQ(p.data.get(), 0xff00000000000001ull);
}

TEST(WireTest, AtomicReqToBytes) {
  AtomicReqPayload a{};
  a.opcode.set(static_cast<uint32_t>(AtomicOpcode::kCompareSwap));
  a.req_id.set(7);
  a.remote_stag.set(0xdeadbeefu);
  a.remote_to.set(0x00007f0000001000ull);
  a.add_swap.set(0x0102030405060708ull);
  a.add_swap_mask.set(0xffffffffffffffffull);
  a.compare.set(0x1020304050607080ull);
  a.compare_mask.set(0xffffffff00000000ull);
  const std::array<uint8_t, 52> expected = {
      0x00, 0x00, 0x00, 0x02,                          // Reserved(28) AOpCode = CompareSwap
      0x00, 0x00, 0x00, 0x07,                          // Request Identifier
      0xde, 0xad, 0xbe, 0xef,                          // Remote STag
      0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,  // Remote Tagged Offset
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // Add or Swap Data
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // Add or Swap Mask
      0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80,  // Compare Data
      0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,  // Compare Mask
  };
  EXPECT_EQ(to_bytes(a), vec(expected));
}

TEST(WireTest, AtomicReqFromBytes) {
  const std::array<uint8_t, 52> wire = {
      0x00, 0x00, 0x00, 0x01,                          // Swap
      0x12, 0x34, 0x56, 0x78,                          //
      0x00, 0x00, 0x01, 0x00,                          //
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08,  //
      0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa,  //
      0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,  //
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //
  };
  const auto a = from_bytes<AtomicReqPayload>(wire);
  EXPECT_EQ(a.opcode.get() & 0xf, static_cast<uint32_t>(AtomicOpcode::kSwap));
  EXPECT_EQ(a.req_id.get(), 0x12345678u);
  EXPECT_EQ(a.remote_stag.get(), 0x100u);
  EXPECT_EQ(a.remote_to.get(), 8u);
  EXPECT_EQ(a.add_swap.get(), 0xaaaaaaaaaaaaaaaaull);
  EXPECT_EQ(a.add_swap_mask.get(), 0x00000000ffffffffull);
  EXPECT_EQ(a.compare.get(), 0u);
  EXPECT_EQ(a.compare_mask.get(), 0u);
}

TEST(WireTest, AtomicRespBothWays) {
  AtomicRespPayload r{};
  r.req_id.set(7);
  r.orig_value.set(0x8877665544332211ull);
  const std::array<uint8_t, 12> expected = {
      0x00, 0x00, 0x00, 0x07,                          // Original Request Identifier
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // Original Remote Data Value
  };
  EXPECT_EQ(to_bytes(r), vec(expected));
  const auto p = from_bytes<AtomicRespPayload>(expected);
  EXPECT_EQ(p.req_id.get(), 7u);
  EXPECT_EQ(p.orig_value.get(), 0x8877665544332211ull);
}

// ---------------------------------------------------------------------------
// Code points that travel on the wire, against the RFC tables.
// ---------------------------------------------------------------------------

TEST(WireTest, CodePointsMatchRfcTables) {
  // RFC 5040 §4.2 Table 1 and RFC 7306.
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kRdmaWrite), 0b0000);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kRdmaReadReq), 0b0001);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kRdmaReadResp), 0b0010);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kSend), 0b0011);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kSendInv), 0b0100);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kSendSe), 0b0101);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kSendSeInv), 0b0110);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kTerminate), 0b0111);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kImmData), 0b1000);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kImmDataSe), 0b1001);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kAtomicReq), 0b1010);
  EXPECT_EQ(static_cast<int>(RdmapOpcode::kAtomicResp), 0b1011);
  EXPECT_EQ(kRdmapOpcodeCount, 12);

  // RFC 5040 §5.1 untagged queues.
  EXPECT_EQ(kQnSend, 0u);
  EXPECT_EQ(kQnReadReq, 1u);
  EXPECT_EQ(kQnTerminate, 2u);

  // RFC 7306 atomic operation codes.
  EXPECT_EQ(static_cast<int>(AtomicOpcode::kFetchAdd), 0);
  EXPECT_EQ(static_cast<int>(AtomicOpcode::kSwap), 1);
  EXPECT_EQ(static_cast<int>(AtomicOpcode::kCompareSwap), 2);

  // RFC 5040 §4.8 layers.
  EXPECT_EQ(static_cast<int>(TermLayer::kRdmap), 0);
  EXPECT_EQ(static_cast<int>(TermLayer::kDdp), 1);
  EXPECT_EQ(static_cast<int>(TermLayer::kLlp), 2);
}

}  // namespace
}  // namespace softrdma::iwarp
