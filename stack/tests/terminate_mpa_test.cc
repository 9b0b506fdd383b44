// Terminate tests (terminate_fixture.h): MPA connection setup (RFC 5044
// §7.1, RFC 6581 §5) refused, no crash, the listener still serving.
#include <gtest/gtest.h>

#include "stack/tests/terminate_fixture.h"

namespace softrdma::testing::term {
namespace {

// ---------------------------------------------------------------------------
// MPA connection setup (RFC 5044 §7.1, RFC 6581 §5): refused, no crash,
// listener still serving.
// ---------------------------------------------------------------------------

struct BadFrame {
  const char* name;
  Bytes (*make)(bool reply);
};

void PrintTo(const BadFrame& f, std::ostream* os) { *os << f.name; }

Bytes WithRaw(iwarp::MpaParams p, bool reply) {
  p.private_data = {'r', 'a', 'w'};
  return iwarp::mpa_build(reply, p);
}

const BadFrame kBadFrames[] = {
    {"WrongKey",
     [](bool reply) {
       Bytes f = WithRaw({}, reply);
       f[15] ^= 0x20;  // "...Frame" → "...FramE"
       return f;
     }},
    {"KeyOfTheOtherFrame",  // a Request carrying the Reply key, and vice versa
     [](bool reply) {
       Bytes f = WithRaw({}, !reply);
       return f;
     }},
    {"Revision3",
     [](bool reply) {
       Bytes f = WithRaw({}, reply);
       f[offsetof(iwarp::MpaRrHdr, rev)] = 3;
       return f;
     }},
    {"PrivateData513Rev2",
     [](bool reply) {
       iwarp::MpaParams p;
       p.private_data.assign(iwarp::kMpaMaxPrivateData + 1 - sizeof(iwarp::MpaV2Params), 'x');
       return iwarp::mpa_build(reply, p);  // PD_Length = 513
     }},
    {"PrivateData513Rev1",
     [](bool reply) {
       iwarp::MpaParams p;
       p.rev = iwarp::kMpaRev1;
       p.private_data.assign(iwarp::kMpaMaxPrivateData + 1, 'x');
       return iwarp::mpa_build(reply, p);
     }},
    {"PrivateData65535",
     [](bool reply) {
       Bytes f = WithRaw({}, reply);
       f[18] = f[19] = 0xff;  // PD_Length says 65535, far more than sent
       return f;
     }},
    {"Rev2WithoutIrdOrd",
     [](bool reply) {
       iwarp::MpaParams p;
       Bytes f = iwarp::mpa_build(reply, p);  // PD_Length 4: the v2 prefix alone
       f[19] = 2;                             // cut it to 2
       f.resize(sizeof(iwarp::MpaRrHdr) + 2);
       return f;
     }},
};

class BadMpaTest : public TerminateTest, public ::testing::WithParamInterface<BadFrame> {};

// The engine is the responder: no kConnectRequest, no Reply, stream closed.
TEST_P(BadMpaTest, RequestIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Open({.raw = false, .healthy_first = false}));
  RawPeer p([this] { Pump(); });
  ASSERT_TRUE(p.conn().connect(eng_->listen_addr(lis_)));
  p.conn().send_all(GetParam().make(false));  // the engine may reset before all is sent
  size_t stray = 0;
  EXPECT_TRUE(p.conn().wait_closed(&stray)) << "engine kept the connection open";
  EXPECT_EQ(stray, 0u) << "the engine answered a bad MPA Request";
  Settle(20);
  EXPECT_EQ(count(events_, CmEventType::kConnectRequest, nullptr), 0u);
  CheckMemory({});
  ASSERT_NO_FATAL_FAILURE(ConnectHealthy());
  VerifyHealthy(7);
}

// The engine is the initiator: the bad Reply makes the connection
// unreachable (-EPROTO) and nothing else.
TEST_P(BadMpaTest, ReplyIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Open({.raw = false}));
  RawListener l;
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(eng_->connect(qp_t_, l.addr(), "raw", 3), 0);
  RawPeer p([this] { Pump(); });
  ASSERT_TRUE(l.accept(&p.conn()));
  iwarp::MpaParams req;
  iwarp::MpaStatus st;
  ASSERT_TRUE(p.recv_mpa(false, &req, &st));
  ASSERT_EQ(st, iwarp::MpaStatus::kDone);
  EXPECT_EQ(req.private_data, (Bytes{'r', 'a', 'w'}));
  p.conn().send_all(GetParam().make(true));
  ASSERT_TRUE(WaitFor([&] { return count(events_, CmEventType::kUnreachable, qp_t_) > 0; }))
      << "no kUnreachable";
  for (const CmEvent& e : events_) {
    if (e.qp == qp_t_) {
      EXPECT_EQ(e.type, CmEventType::kUnreachable) << to_string(e.type);
      EXPECT_EQ(e.status, -EPROTO);
    }
  }
  size_t stray = 0;
  EXPECT_TRUE(p.conn().wait_closed(&stray));
  EXPECT_EQ(stray, 0u);
  EXPECT_EQ(count(events_, CmEventType::kUnreachable, qp_t_), 1u);
  CheckMemory({});
  VerifyHealthy(8);
}

INSTANTIATE_TEST_SUITE_P(Frames, BadMpaTest, ::testing::ValuesIn(kBadFrames),
                         [](const ::testing::TestParamInfo<BadFrame>& i) {
                           return std::string(i.param.name);
                         });

// Control for the above: PD_Length exactly 512 is legal and reaches the
// application (which here rejects it, so the Reply carries R).
TEST_F(TerminateTest, MpaRequestWithMaximalPrivateDataIsAccepted) {
  ASSERT_NO_FATAL_FAILURE(Open({.raw = false}));
  RawPeer p([this] { Pump(); });
  iwarp::MpaParams req;
  req.private_data.assign(iwarp::kMpaMaxPrivateData - sizeof(iwarp::MpaV2Params), 'x');
  ASSERT_TRUE(p.conn().connect(eng_->listen_addr(lis_)));
  ASSERT_TRUE(p.conn().send_all(iwarp::mpa_build(false, req)));
  iwarp::MpaParams rep;
  iwarp::MpaStatus st;
  ASSERT_TRUE(p.recv_mpa(true, &rep, &st));
  EXPECT_EQ(st, iwarp::MpaStatus::kDone);
  EXPECT_TRUE(rep.reject);
  const auto n = std::count_if(events_.begin(), events_.end(), [&](const CmEvent& e) {
    return e.type == CmEventType::kConnectRequest && e.private_data == req.private_data;
  });
  EXPECT_EQ(n, 1) << "the 508 octets of private data did not reach the application";
  VerifyHealthy(9);
}

}  // namespace
}  // namespace softrdma::testing::term
