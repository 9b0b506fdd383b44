// Terminates and the ways into Error they cause: a peer that misbehaves
// gets a Terminate naming why and the requester's work fails with the
// status the cause maps to; Terminates crafted on the wire map the same way;
// an over-long Send fails its receive locally. Two QPs over FakeConn.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "stack/iwarp/tx_frame.h"
#include "stack/tests/qp_pair.h"

namespace softrdma::testing {
namespace {

using iwarp::DdpEtype;
using iwarp::DdpTaggedEcode;
using iwarp::DdpUntaggedEcode;
using iwarp::LlpEcode;
using iwarp::RdmapEcode;
using iwarp::RdmapEtype;
using iwarp::TermCause;
using iwarp::TermLayer;

// A peer that misbehaves gets a Terminate naming why; the requester's
// outstanding work then fails with the status the cause maps to.
struct BadOp {
  const char* name;
  TermCause cause;
  WcStatus status;      // at the requester
  bool bad_is_response;  // the bad WR itself awaits a response (so fails first)
};
// gtest prints parameters; without these it dumps raw bytes, padding included.
void PrintTo(const BadOp& b, std::ostream* os) { *os << b.name; }

class TerminateTest : public ::testing::TestWithParam<BadOp> {};

void post_bad(Pair& p, const std::string& name, std::vector<uint64_t>* flushed) {
  iwarp::Qp& a = *p.a.qp;
  iwarp::Qp& b = *p.b.qp;
  const uint64_t end = p.baddr(p.bbuf.size());
  const uint32_t ro = p.b.reg(p.bbuf.data(), 4096, kAccessRemoteRead);
  const uint32_t wo = p.b.reg(p.bbuf.data(), 4096, kAccessRemoteWrite);
  const uint32_t foreign = p.b.mrs.reg(&p.other_pd, p.bbuf.data(), 4096, kAll)->stag;
  SendWr wr;
  if (name == "WriteInvalidStag") {
    wr = p.write(1, 0, 100, p.baddr(0), p.bstag ^ 0x5500);
  } else if (name == "WriteBaseBounds") {
    wr = p.write(1, 0, 100, end - 50, p.bstag);
  } else if (name == "WriteAccessRights") {
    wr = p.write(1, 0, 100, p.baddr(0), ro);
  } else if (name == "WritePdMismatch") {
    wr = p.write(1, 0, 100, p.baddr(0), foreign);
  } else if (name == "ReadAccessRights") {
    wr = p.read(1, 0, 100, p.baddr(0), wo);
  } else if (name == "ReadBaseBounds") {
    wr = p.read(1, 0, 100, end - 50, p.bstag);
  } else if (name == "AtomicAccessRights") {
    wr = p.fetch_add(1, 0, p.baddr(0), ro);
  } else if (name == "SendBeyondHeldBound") {
    iwarp::QpTestPeer::bound_unexpected(b, 50, 16);  // no receive: held, but not 100 bytes
    wr = p.send(1, 0, 100);
  } else if (name == "SendTooLong") {
    EXPECT_EQ(b.post_recv(Pair::recv(50, p.baddr(0), 100, p.bstag)), 0);
    wr = p.send(1, 0, 200);
  } else if (name == "SendInvalidateForeign") {
    EXPECT_EQ(b.post_recv(Pair::recv(50, p.baddr(0), 100, p.bstag)), 0);
    wr = p.send(1, 0, 10);
    wr.opcode = WrOpcode::kSendWithInv;
    wr.invalidate_stag = foreign;
  } else if (name == "CorruptedPayload") {
    wr = p.write(1, 0, 1000, p.baddr(0), p.bstag);
  } else {
    FAIL() << "unknown case " << name;
  }
  ASSERT_EQ(a.post_recv(Pair::recv(20, p.aaddr(0), 10, p.astag)), 0);
  ASSERT_EQ(a.post_send(wr), 0);
  if (name == "CorruptedPayload") {
    ASSERT_GT(p.link->b.pending(), 600u);
    p.link->b.pending_data()[500] ^= 0x10;  // a payload octet, under the CRC
  }
  // A good Read behind it: b never answers it, the Terminate fails it.
  ASSERT_EQ(a.post_send(p.read(2, 8192, 64, p.baddr(0), p.bstag)), 0);
  *flushed = {1, 2, 20};
}

TEST_P(TerminateTest, RequesterFailsWithMappedStatus) {
  const BadOp& c = GetParam();
  Pair p;
  p.start();
  std::vector<uint64_t> ids;
  post_bad(p, c.name, &ids);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(p.link->pump());

  // b detected it: Terminate sent, then an orderly close so it arrives.
  iwarp::Qp& b = *p.b.qp;
  EXPECT_EQ(b.state(), QpState::kError);
  EXPECT_EQ(b.error_status(), -EPROTO);
  EXPECT_EQ(b.error_term(), c.cause.packed());
  EXPECT_EQ(p.b.stats.terminates_tx, 1u);
  EXPECT_TRUE(p.link->b.closed());
  EXPECT_FALSE(p.link->b.aborted());
  EXPECT_EQ(p.b.owner.errors, 1);

  // a received it.
  iwarp::Qp& a = *p.a.qp;
  EXPECT_EQ(a.state(), QpState::kError);
  EXPECT_EQ(a.error_status(), -EREMOTEIO);
  EXPECT_EQ(a.error_term(), c.cause.packed());
  ASSERT_NE(a.term_received(), nullptr);
  EXPECT_EQ(a.term_received()->layer, c.cause.layer);
  EXPECT_EQ(a.term_received()->etype, c.cause.etype);
  EXPECT_EQ(a.term_received()->ecode, c.cause.ecode);
  EXPECT_EQ(p.a.stats.terminates_rx, 1u);
  EXPECT_EQ(p.a.owner.errors, 1);

  std::map<uint64_t, Wc> wcs = completions(p.a);
  if (!c.bad_is_response) {
    // A Send or Write completes when sent; the Terminate comes later.
    ASSERT_TRUE(wcs.count(1));
    EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
    wcs.erase(1);
    ids.erase(ids.begin());
  }
  expect_flushed(wcs, ids, ids.front(), c.status, c.cause.packed());
}

constexpr TermCause ddp_tagged(DdpTaggedEcode e) {
  return {TermLayer::kDdp, static_cast<uint8_t>(DdpEtype::kTaggedBuf), static_cast<uint8_t>(e)};
}
constexpr TermCause ddp_untagged(DdpUntaggedEcode e) {
  return {TermLayer::kDdp, static_cast<uint8_t>(DdpEtype::kUntaggedBuf), static_cast<uint8_t>(e)};
}
constexpr TermCause rdmap(RdmapEtype t, RdmapEcode e) {
  return {TermLayer::kRdmap, static_cast<uint8_t>(t), static_cast<uint8_t>(e)};
}
constexpr TermCause llp(LlpEcode e) { return {TermLayer::kLlp, 0, static_cast<uint8_t>(e)}; }


INSTANTIATE_TEST_SUITE_P(
    Causes, TerminateTest,
    ::testing::Values(
        BadOp{"WriteInvalidStag", ddp_tagged(DdpTaggedEcode::kInvalidStag), WcStatus::kRemAccessErr, false},
        BadOp{"WriteBaseBounds", ddp_tagged(DdpTaggedEcode::kBaseBounds), WcStatus::kRemAccessErr, false},
        BadOp{"WriteAccessRights", rdmap(RdmapEtype::kRemoteProtection, RdmapEcode::kAccessRights),
              WcStatus::kRemAccessErr, false},
        BadOp{"WritePdMismatch", ddp_tagged(DdpTaggedEcode::kStagNotAssoc), WcStatus::kRemAccessErr, false},
        BadOp{"ReadAccessRights", rdmap(RdmapEtype::kRemoteProtection, RdmapEcode::kAccessRights),
              WcStatus::kRemAccessErr, true},
        BadOp{"ReadBaseBounds", rdmap(RdmapEtype::kRemoteProtection, RdmapEcode::kBaseBounds),
              WcStatus::kRemAccessErr, true},
        BadOp{"AtomicAccessRights", rdmap(RdmapEtype::kRemoteProtection, RdmapEcode::kAccessRights),
              WcStatus::kRemAccessErr, true},
        BadOp{"SendBeyondHeldBound", ddp_untagged(DdpUntaggedEcode::kNoBuffer), WcStatus::kRemOpErr, false},
        BadOp{"SendTooLong", ddp_untagged(DdpUntaggedEcode::kTooLong), WcStatus::kRemInvReqErr, false},
        BadOp{"SendInvalidateForeign",
              rdmap(RdmapEtype::kRemoteProtection, RdmapEcode::kCannotInvalidate),
              WcStatus::kRemAccessErr, false},
        BadOp{"CorruptedPayload", llp(LlpEcode::kCrc), WcStatus::kFatalErr, false}),
    [](const ::testing::TestParamInfo<BadOp>& i) { return std::string(i.param.name); });

// The receiver of an over-long Send: its receive fails with kLocLenErr
// (verbs.h: "message longer than the posted receive"), not with a status
// that blames the peer.
TEST(QpStateTest, TooLongSendFailsReceiveWithLocLenErr) {
  Pair p;
  p.start();
  ASSERT_EQ(p.b.qp->post_recv(Pair::recv(50, p.baddr(0), 100, p.bstag)), 0);
  ASSERT_EQ(p.b.qp->post_recv(Pair::recv(51, p.baddr(100), 100, p.bstag)), 0);
  ASSERT_EQ(p.a.qp->post_send(p.send(1, 0, 200)), 0);
  ASSERT_TRUE(p.link->pump());
  std::map<uint64_t, Wc> wcs = completions(p.b);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[50].status, WcStatus::kLocLenErr) << to_string(wcs[50].status);
  EXPECT_EQ(wcs[51].status, WcStatus::kWrFlushErr);
}

// Terminates crafted on the wire: every RFC layer / error type maps to the
// completion status verbs.h documents, headers after the control word are
// accepted, and the QP resets its stream (it sent no Terminate itself).
struct Injected {
  TermCause cause;
  WcStatus status;
  bool with_hdrs;
};
void PrintTo(const Injected& i, std::ostream* os) {
  *os << "layer " << int(i.cause.layer) << " etype " << int(i.cause.etype) << " ecode "
      << int(i.cause.ecode) << (i.with_hdrs ? " with headers" : "");
}

class InjectedTerminateTest : public ::testing::TestWithParam<Injected> {};

std::vector<uint8_t> terminate_fpdu(const TermCause& c, bool with_hdrs, bool crc) {
  std::vector<uint8_t> payload(4, 0);
  uint32_t ctrl = (uint32_t{static_cast<uint8_t>(c.layer)} << iwarp::kTermLayerShift) |
                  (uint32_t{c.etype} << iwarp::kTermEtypeShift) |
                  (uint32_t{c.ecode} << iwarp::kTermEcodeShift);
  if (with_hdrs) ctrl |= iwarp::kTermFlagM | iwarp::kTermFlagD | iwarp::kTermFlagR;
  reinterpret_cast<iwarp::TerminatePayload*>(payload.data())->ctrl.set(ctrl);
  if (with_hdrs) payload.resize(4 + 2 + 18 + 28, 0x3c);
  iwarp::UntaggedHdr h{};
  const size_t ulpdu = sizeof(h) - iwarp::kMpaLenSize + payload.size();
  h.ctrl.mpa_len.set(static_cast<uint16_t>(ulpdu));
  h.ctrl.set(false, true, iwarp::RdmapOpcode::kTerminate);
  h.qn.set(iwarp::kQnTerminate);
  h.msn.set(1);
  h.mo.set(0);
  static const uint8_t kZero[4] = {};
  iwarp::TxFrame f(false, crc, 0);
  EXPECT_TRUE(f.add(&h, sizeof(h)) && f.add(payload.data(), payload.size()) &&
              f.add(kZero, iwarp::mpa_pad(ulpdu)) && f.finish());
  std::vector<uint8_t> out;
  for (int i = 0; i < f.iovcnt(); ++i) {
    const auto* b = static_cast<const uint8_t*>(f.iov()[i].iov_base);
    out.insert(out.end(), b, b + f.iov()[i].iov_len);
  }
  return out;
}

TEST_P(InjectedTerminateTest, MapsToStatus) {
  const Injected& c = GetParam();
  Pair p;
  p.start();
  iwarp::Qp& a = *p.a.qp;
  ASSERT_EQ(a.post_send(p.read(1, 0, 64, p.baddr(0), p.bstag)), 0);
  ASSERT_EQ(a.post_recv(Pair::recv(2, p.aaddr(4096), 64, p.astag)), 0);
  std::vector<uint8_t> t = terminate_fpdu(c.cause, c.with_hdrs, true);
  p.link->a.inject(t.data(), t.size());
  a.rx_progress();
  EXPECT_EQ(a.state(), QpState::kError);
  EXPECT_EQ(a.error_status(), -EREMOTEIO);
  EXPECT_EQ(a.error_term(), c.cause.packed());
  ASSERT_NE(a.term_received(), nullptr);
  EXPECT_EQ(a.term_received()->packed(), c.cause.packed());
  EXPECT_TRUE(p.link->a.aborted());
  EXPECT_EQ(p.a.stats.terminates_tx, 0u);
  EXPECT_EQ(p.a.owner.errors, 1);
  expect_flushed(completions(p.a), {1, 2}, 1, c.status, c.cause.packed());
}

INSTANTIATE_TEST_SUITE_P(
    Causes, InjectedTerminateTest,
    ::testing::Values(
        Injected{llp(LlpEcode::kCrc), WcStatus::kFatalErr, false},
        Injected{llp(LlpEcode::kMarker), WcStatus::kFatalErr, false},
        Injected{llp(LlpEcode::kStreamLost), WcStatus::kFatalErr, false},
        Injected{{TermLayer::kDdp, u8(DdpEtype::kCatastrophic), 0}, WcStatus::kFatalErr, false},
        Injected{ddp_tagged(DdpTaggedEcode::kInvalidStag), WcStatus::kRemAccessErr, true},
        Injected{ddp_tagged(DdpTaggedEcode::kBaseBounds), WcStatus::kRemAccessErr, false},
        Injected{ddp_tagged(DdpTaggedEcode::kToWrap), WcStatus::kRemAccessErr, false},
        Injected{ddp_untagged(DdpUntaggedEcode::kInvalidQn), WcStatus::kRemInvReqErr, true},
        Injected{ddp_untagged(DdpUntaggedEcode::kNoBuffer), WcStatus::kRemOpErr, false},
        Injected{ddp_untagged(DdpUntaggedEcode::kTooLong), WcStatus::kRemInvReqErr, false},
        Injected{rdmap(RdmapEtype::kCatastrophic, RdmapEcode::kCatastrophicStream),
                 WcStatus::kFatalErr, false},
        Injected{rdmap(RdmapEtype::kRemoteProtection, RdmapEcode::kInvalidStag),
                 WcStatus::kRemAccessErr, true},
        Injected{rdmap(RdmapEtype::kRemoteProtection, RdmapEcode::kAccessRights),
                 WcStatus::kRemAccessErr, false},
        Injected{rdmap(RdmapEtype::kRemoteOperation, RdmapEcode::kOpcode),
                 WcStatus::kRemInvReqErr, false},
        Injected{rdmap(RdmapEtype::kRemoteOperation, RdmapEcode::kVersion),
                 WcStatus::kRemInvReqErr, false},
        Injected{rdmap(RdmapEtype::kRemoteOperation, RdmapEcode::kUnspecified),
                 WcStatus::kRemOpErr, false}));

}  // namespace
}  // namespace softrdma::testing
