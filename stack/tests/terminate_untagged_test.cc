// Terminate tests (terminate_fixture.h): RDMA Read Requests (RFC 5040 §7),
// untagged buffers (RFC 5041 §7) and atomics (RFC 7306 §5.4).
#include <gtest/gtest.h>

#include "stack/tests/terminate_fixture.h"

namespace softrdma::testing::term {
namespace {

// ---------------------------------------------------------------------------
// RDMA Read Request: the source is checked by RDMAP (RFC 5040 §7, Remote
// Protection Error) and the Read Request header is quoted (R).
// ---------------------------------------------------------------------------

Want ReadReqWant(RdmapEcode e) {
  return {TermLayer::kRdmap, u8(RdmapEtype::kRemoteProtection), u8(e), true, true, true};
}

TEST_F(TerminateTest, ReadRequestInvalidSourceStag) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(ReadReqHdr(), read_req_payload(kRawStag, kRawTo, 16, kNoSuchStag, rw_.addr()),
                ReadReqWant(RdmapEcode::kInvalidStag));
}

TEST_F(TerminateTest, ReadRequestWithoutRemoteReadRight) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(ReadReqHdr(), read_req_payload(kRawStag, kRawTo, 16, mr_wo_, wo_.addr()),
                ReadReqWant(RdmapEcode::kAccessRights));
}

TEST_F(TerminateTest, ReadRequestOutOfBounds) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(ReadReqHdr(),
                read_req_payload(kRawStag, kRawTo, 16, mr_rw_, rw_.addr() + rw_.size() - 15),
                ReadReqWant(RdmapEcode::kBaseBounds));
}

TEST_F(TerminateTest, ReadRequestStagOfAnotherPd) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(ReadReqHdr(), read_req_payload(kRawStag, kRawTo, 16, mr_other_, other_.addr()),
                ReadReqWant(RdmapEcode::kStagNotAssoc));
}

TEST_F(TerminateTest, ReadRequestSourceOffsetWraps) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(ReadReqHdr(), read_req_payload(kRawStag, kRawTo, 16, mr_rw_, ~uint64_t{0} - 7),
                ReadReqWant(RdmapEcode::kToWrap));
}

// IRD is 2: a third Read Request arriving with two unanswered has no
// buffer on QN 1 (RFC 5041 §7 "Invalid MSN - no buffer available"). All
// three go in one write so the engine cannot answer the first two between.
TEST_F(TerminateTest, ReadRequestsBeyondIrd) {
  ASSERT_NO_FATAL_FAILURE(Open());
  Bytes wire, third;
  for (int i = 0; i <= kIrd; ++i) {
    FrameOpts fo;
    fo.crc = raw_->crc();
    third = frame_fpdu(
        ReadReqHdr(),
        read_req_payload(kRawStag, kRawTo, static_cast<uint32_t>(rw_.size()), mr_rw_, rw_.addr()),
        fo);
    wire = concat(std::move(wire), third);
  }
  ASSERT_TRUE(raw_->conn().send_all(wire));
  ExpectTerminated({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kNoBuffer),
                    true, true, true},
                   third);
}

// ---------------------------------------------------------------------------
// Untagged buffers: RFC 5041 §7
// ---------------------------------------------------------------------------

Want UntaggedWant(DdpUntaggedEcode e) {
  return {TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(e), true, true};
}

// A Send with no posted receive is held (iwarp/unexpected.h) within the
// bound, 16 bytes here; the next one overruns it: no buffer available.
TEST_F(TerminateTest, SendWithoutPostedReceiveBeyondTheHeldBound) {
  ASSERT_NO_FATAL_FAILURE(Open({.unexpected_bytes = 16}));
  const Bytes a = pattern(8, 1), b = pattern(8, 2);
  Send(raw_->next_msn(0), a);
  Send(raw_->next_msn(0), b);
  ASSERT_NO_FATAL_FAILURE(ExpectRecvOk({101, 102}, 8));
  recv_.expect_write(0, a);
  recv_.expect_write(64, b);
  Send(raw_->next_msn(0), pattern(8, 3));  // held: 8 of 16 bytes
  ExpectTerminated(UntaggedWant(DdpUntaggedEcode::kNoBuffer), Send(raw_->next_msn(0), kSixteen));
  EXPECT_EQ(eng_->counters().unexpected_msgs, 2u);
  EXPECT_EQ(eng_->counters().unexpected_overruns, 1u);
}

// The receive the message was meant for fails with a local length error
// (verbs.h kLocLenErr: "message longer than the posted receive").
TEST_F(TerminateTest, SendLongerThanReceive) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectTerminated(UntaggedWant(DdpUntaggedEcode::kTooLong),
                   Send(raw_->next_msn(0), pattern(65, 4)),
                   {.victims = {{101, WcStatus::kLocLenErr}}});
}

TEST_F(TerminateTest, SendLongerThanReceiveInSecondSegment) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const uint32_t msn = raw_->next_msn(0);
  const Bytes part = pattern(40, 5);
  Send(msn, part, false, 0);
  recv_.expect_write(0, part);
  ExpectTerminated(UntaggedWant(DdpUntaggedEcode::kTooLong), Send(msn, part, true, 40),
                   {.victims = {{101, WcStatus::kLocLenErr}}});
}

TEST_F(TerminateTest, SendOnWrongQueueNumber) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(untagged_hdr(RdmapOpcode::kSend, true, 7, raw_->next_msn(0), 0), kSixteen,
                UntaggedWant(DdpUntaggedEcode::kInvalidQn));
}

TEST_F(TerminateTest, ReadRequestOnSendQueue) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(untagged_hdr(RdmapOpcode::kRdmaReadReq, true, iwarp::kQnSend, 1, 0),
                read_req_payload(kRawStag, kRawTo, 16, mr_rw_, rw_.addr()),
                UntaggedWant(DdpUntaggedEcode::kInvalidQn));
}

TEST_F(TerminateTest, SendWithWrongMsn) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectTerminated(UntaggedWant(DdpUntaggedEcode::kMsnRange), Send(2, kSixteen));
}

TEST_F(TerminateTest, SendWithWrongMsnRev1NoCrc) {
  ASSERT_NO_FATAL_FAILURE(Open({.rev = iwarp::kMpaRev1, .crc = false}));
  ExpectTerminated(UntaggedWant(DdpUntaggedEcode::kMsnRange), Send(0, kSixteen));
}

TEST_F(TerminateTest, SendFirstSegmentWithNonzeroMo) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectTerminated(UntaggedWant(DdpUntaggedEcode::kInvalidMo),
                   Send(raw_->next_msn(0), kSixteen, true, 8));
}

TEST_F(TerminateTest, SendContinuationWithWrongMo) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const uint32_t msn = raw_->next_msn(0);
  const Bytes part = pattern(8, 6);
  Send(msn, part, false, 0);
  recv_.expect_write(0, part);
  ExpectTerminated(UntaggedWant(DdpUntaggedEcode::kInvalidMo), Send(msn, part, true, 16));
}

// An Immediate Data message claiming the MSN of a Send still in progress:
// it must not take a second receive (orphaning the first) or complete.
TEST_F(TerminateTest, ImmediateDataInsideASendMessage) {
  ASSERT_NO_FATAL_FAILURE(Open());
  const uint32_t msn = raw_->next_msn(0);
  const Bytes part = pattern(8, 7);
  Send(msn, part, false, 0);
  recv_.expect_write(0, part);
  const Bytes bad = raw_->send_fpdu(
      untagged_hdr(RdmapOpcode::kImmData, true, iwarp::kQnSend, msn, 0), pattern(8, 8));
  Settle(100);
  Reap(eng_.get(), cq_t_, &wcs_t_);
  for (const Wc& wc : wcs_t_) {
    EXPECT_NE(wc.status, WcStatus::kSuccess)
        << "wr " << wc.wr_id << " completed by an Immediate Data inside another message";
  }
  std::optional<TermInfo> t;
  // The offending DDP header is quoted (M, D) as for every untagged error.
  ExpectTerminated({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kInvalidMo),
                    true, true},
                   bad, {.code = false, .hdrct = true}, &t);
  ASSERT_TRUE(t.has_value());
  // Wrong MO for message `msn` (DDP) or an opcode change mid-message (RDMAP).
  const std::string got = code_str(t->layer, t->etype, t->ecode);
  EXPECT_TRUE(got == code_str(1, 2, u8(DdpUntaggedEcode::kInvalidMo)) ||
              got == code_str(0, 2, u8(RdmapEcode::kOpcode)))
      << got;
}

// ---------------------------------------------------------------------------
// Atomics (RFC 7306 §5.4, rights and alignment checked as RDMAP protection)
// ---------------------------------------------------------------------------

TEST_F(TerminateTest, AtomicWithoutRemoteAtomicRight) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(AtomicHdr(), atomic_req_payload(AtomicOpcode::kFetchAdd, 9, mr_wo_, wo_.addr(), 1),
                {TermLayer::kRdmap, u8(RdmapEtype::kRemoteProtection),
                 u8(RdmapEcode::kAccessRights), true, true});
}

TEST_F(TerminateTest, AtomicMisaligned) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(AtomicHdr(),
                atomic_req_payload(AtomicOpcode::kFetchAdd, 9, mr_rw_, rw_.addr() + 4, 1),
                {TermLayer::kRdmap, u8(RdmapEtype::kRemoteProtection), u8(RdmapEcode::kBaseBounds),
                 true, true});
}

TEST_F(TerminateTest, AtomicUnknownAtomicOpcode) {
  ASSERT_NO_FATAL_FAILURE(Open());
  ExpectBadFpdu(
      AtomicHdr(), atomic_req_payload(static_cast<AtomicOpcode>(5), 9, mr_rw_, rw_.addr(), 1),
      {TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode), true, true});
}

}  // namespace
}  // namespace softrdma::testing::term
