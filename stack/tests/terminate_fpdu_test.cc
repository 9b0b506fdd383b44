// Terminate tests (terminate_fixture.h): malformed FPDUs, tagged buffers
// (RFC 5041 §7, access rights RFC 5040 §7), responses nobody asked for, and
// the statuses of the work requests a bad input had nothing to do with.
#include <gtest/gtest.h>

#include "stack/tests/terminate_fixture.h"

namespace softrdma::testing::term {
namespace {

// ---------------------------------------------------------------------------
// Malformed FPDUs
// ---------------------------------------------------------------------------

// ULPDU_Length 4 on a Send (header alone is 18). No RFC code names "segment
// shorter than its header"; what is certain is that it is not an RDMAP
// error and, with no markers negotiated, not RFC 5044 §8's 0x03 "Marker and
// ULPDU Length field mismatch".
TEST_F(TerminateTest, MpaLengthShorterThanUntaggedHeader) {
  ASSERT_NO_FATAL_FAILURE(Open());
  FrameOpts fo;
  fo.mpa_len = 4;
  std::optional<TermInfo> t;
  const Bytes bad = raw_->send_fpdu(
      untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, raw_->next_msn(0), 0), kSixteen, fo);
  ExpectTerminated({}, bad, {.code = false, .hdrct = false}, &t);
  ASSERT_TRUE(t.has_value());
  EXPECT_NE(t->layer, u8(TermLayer::kRdmap)) << code_str(t->layer, t->etype, t->ecode);
  EXPECT_FALSE(t->layer == u8(TermLayer::kLlp) && t->ecode == u8(LlpEcode::kMarker))
      << "marker-mismatch code without markers: " << code_str(t->layer, t->etype, t->ecode);
}

TEST_F(TerminateTest, MpaLengthShorterThanTaggedHeader) {
  ASSERT_NO_FATAL_FAILURE(Open());
  FrameOpts fo;
  fo.mpa_len = 10;  // the tagged header alone is 14
  std::optional<TermInfo> t;
  const Bytes bad =
      raw_->send_fpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr()), kSixteen, fo);
  ExpectTerminated({}, bad, {.code = false, .hdrct = false}, &t);
  ASSERT_TRUE(t.has_value());
  EXPECT_NE(t->layer, u8(TermLayer::kRdmap)) << code_str(t->layer, t->etype, t->ecode);
  EXPECT_FALSE(t->layer == u8(TermLayer::kLlp) && t->ecode == u8(LlpEcode::kMarker))
      << "marker-mismatch code without markers: " << code_str(t->layer, t->etype, t->ecode);
}

// RFC 5041 §7: DDP version errors, per buffer model.
TEST_F(TerminateTest, DdpVersion0Untagged) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Bytes h = untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, raw_->next_msn(0), 0);
  h[2] &= static_cast<uint8_t>(~iwarp::kDdpVersionMask);
  ExpectBadFpdu(
      h, kSixteen,
      {TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kVersion), true, true});
}

TEST_F(TerminateTest, DdpVersion2Tagged) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Bytes h = tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr());
  h[2] = static_cast<uint8_t>((h[2] & ~iwarp::kDdpVersionMask) | 2);
  ExpectBadFpdu(
      h, kSixteen,
      {TermLayer::kDdp, u8(DdpEtype::kTaggedBuf), u8(DdpTaggedEcode::kVersion), true, true});
}

// RFC 5040 §7 (Remote Operation Error, Invalid RDMAP version).
TEST_F(TerminateTest, RdmapVersion2) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Bytes h = untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, raw_->next_msn(0), 0);
  h[3] = static_cast<uint8_t>((2 << 6) | (h[3] & 0x3f));
  ExpectBadFpdu(
      h, kSixteen,
      {TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kVersion), true, true});
}

TEST_F(TerminateTest, RdmapVersion0OnWrite) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Bytes h = tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr());
  h[3] &= 0x3f;
  ExpectBadFpdu(
      h, kSixteen,
      {TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kVersion), true, true});
}

// RFC 5044 §8: MPA CRC error (LLP layer, no headers quoted: they are suspect).
TEST_F(TerminateTest, BadCrcOnSend) {
  ASSERT_NO_FATAL_FAILURE(Open());
  FrameOpts fo;
  fo.corrupt_crc = true;
  // The payload may be placed before the CRC is checked; never completed.
  ExpectBadFpdu(untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, raw_->next_msn(0), 0),
                kSixteen, {TermLayer::kLlp, 0, u8(LlpEcode::kCrc)}, {.may_change = {&recv_}}, fo);
}

TEST_F(TerminateTest, BadCrcOnWrite) {
  ASSERT_NO_FATAL_FAILURE(Open());
  FrameOpts fo;
  fo.corrupt_crc = true;
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr()), kSixteen,
                {TermLayer::kLlp, 0, u8(LlpEcode::kCrc)}, {.may_change = {&rw_}}, fo);
}

// Opcodes 0xC..0xF are unassigned (RFC 5040 §4.2 Table 1, RFC 7306 §5.1).
class UnknownOpcodeTest : public TerminateTest,
                          public ::testing::WithParamInterface<std::pair<int, bool>> {};

TEST_P(UnknownOpcodeTest, IsUnexpectedOpcode) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const auto [op, tagged] = GetParam();
  Bytes h = tagged ? tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr())
                   : untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, raw_->next_msn(0), 0);
  h[3] = static_cast<uint8_t>((iwarp::kRdmapVersion << 6) | op);
  ExpectBadFpdu(
      h, kSixteen,
      {TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode), true, true});
}

INSTANTIATE_TEST_SUITE_P(Opcodes, UnknownOpcodeTest,
                         ::testing::Values(std::pair{0xc, false}, std::pair{0xd, true},
                                           std::pair{0xe, false}, std::pair{0xf, true}));

// A Send carried in the tagged model, a Write in the untagged one.
TEST_F(TerminateTest, SendWithTaggedFlag) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Bytes h = tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr());
  h[3] = static_cast<uint8_t>((iwarp::kRdmapVersion << 6) | u8(RdmapOpcode::kSend));
  ExpectBadFpdu(
      h, kSixteen,
      {TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode), true, true});
}

TEST_F(TerminateTest, WriteWithoutTaggedFlag) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Bytes h = untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, raw_->next_msn(0), 0);
  h[3] = static_cast<uint8_t>((iwarp::kRdmapVersion << 6) | u8(RdmapOpcode::kRdmaWrite));
  ExpectBadFpdu(
      h, kSixteen,
      {TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode), true, true});
}

// RFC 6581 §5: the first FPDU must be the agreed RTR.
TEST_F(TerminateTest, FirstFpduIsNotTheRtr) {
  ASSERT_NO_FATAL_FAILURE(Open({.send_rtr = false}));
  ExpectBadFpdu(untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, raw_->next_msn(0), 0),
                kSixteen, {TermLayer::kLlp, 0, u8(LlpEcode::kNoMatchingRtr)});
}

// ---------------------------------------------------------------------------
// Tagged buffers: RFC 5041 §7 (DDP), access rights RFC 5040 §7 (RDMAP)
// ---------------------------------------------------------------------------

TEST_F(TerminateTest, WriteUnregisteredStag) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, kNoSuchStag, rw_.addr()), kSixteen,
                kDdpInvalidStag);
}

TEST_F(TerminateTest, WriteStaleStag) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, dead_stag_, rw_.addr()), kSixteen,
                kDdpInvalidStag);
}

TEST_F(TerminateTest, WriteStagOfAnotherPd) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(
      tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_other_, other_.addr()), kSixteen,
      {TermLayer::kDdp, u8(DdpEtype::kTaggedBuf), u8(DdpTaggedEcode::kStagNotAssoc), true, true});
}

TEST_F(TerminateTest, WriteWithoutRemoteWriteRight) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_ro_, ro_.addr()), kSixteen,
                {TermLayer::kRdmap, u8(RdmapEtype::kRemoteProtection),
                 u8(RdmapEcode::kAccessRights), true, true});
}

TEST_F(TerminateTest, WriteOneBytePastTheEnd) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr() + rw_.size() - 15),
                kSixteen, kDdpBounds);
}

TEST_F(TerminateTest, WriteOneByteBeforeTheStart) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, rw_.addr() - 1), kSixteen,
                kDdpBounds);
}

// The first segment is fine (and placed); the second runs past the end.
TEST_F(TerminateTest, WriteSecondSegmentPastTheEnd) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const uint64_t to = rw_.addr() + rw_.size() - 16;
  raw_->send_fpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, false, mr_rw_, to), kSixteen);
  rw_.expect_write(rw_.size() - 16, kSixteen);
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, to + 16), kSixteen, kDdpBounds);
}

TEST_F(TerminateTest, WriteTaggedOffsetWraps) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(
      tagged_hdr(RdmapOpcode::kRdmaWrite, true, mr_rw_, ~uint64_t{0} - 7), kSixteen,
      {TermLayer::kDdp, u8(DdpEtype::kTaggedBuf), u8(DdpTaggedEcode::kToWrap), true, true});
}

// ---------------------------------------------------------------------------
// Responses nobody asked for
// ---------------------------------------------------------------------------

// No Read outstanding: the sink STag (valid, local-write only) was never
// advertised to the peer, so DDP refuses it.
TEST_F(TerminateTest, UnsolicitedReadResponse) {
  ASSERT_NO_FATAL_FAILURE(Open({.pending_read = false}));
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaReadResp, true, mr_sink_, sink_.addr()), kSixteen,
                kDdpInvalidStag);
}

// One byte more than the outstanding Read asked for: refused before any
// placement, and the Read fails as a bad response (verbs.h kBadRespErr).
TEST_F(TerminateTest, ReadResponseLongerThanRequested) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaReadResp, true, mr_sink_, sink_.addr()),
                pattern(sink_.size() + 1, 9), kDdpBounds,
                {.victims = {{201, WcStatus::kBadRespErr}}});
}

TEST_F(TerminateTest, UnsolicitedAtomicResponse) {
  ASSERT_NO_FATAL_FAILURE(Open());
  iwarp::AtomicRespPayload a{};
  a.req_id.set(77);
  a.orig_value.set(5);
  ExpectBadFpdu(
      untagged_hdr(RdmapOpcode::kAtomicResp, true, iwarp::kQnAtomicResp,
                   raw_->next_msn(iwarp::kQnAtomicResp), 0),
      bytes_of(a),
      {TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode), true, true});
}

// ---------------------------------------------------------------------------
// Completion statuses of work requests the bad input had nothing to do with
// ---------------------------------------------------------------------------

// A bad inbound Write involves none of qp_t_'s WRs: its posted receives,
// its outstanding Read and the Send behind it are flushed (kWrFlushErr), not
// reported as if the peer had refused them (kRemAccessErr).
TEST_F(TerminateTest, UninvolvedWorkRequestsAreFlushed) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Check c;
  for (uint64_t id : outstanding_) c.victims[id] = WcStatus::kWrFlushErr;
  ExpectBadFpdu(tagged_hdr(RdmapOpcode::kRdmaWrite, true, kNoSuchStag, rw_.addr()), kSixteen,
                kDdpInvalidStag, c);
}

}  // namespace
}  // namespace softrdma::testing::term
