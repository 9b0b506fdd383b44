// Connection manager over kernel TCP: private data both ways, reject with
// private data, no listener, orderly disconnect with flushing, MPA v1 and
// every RTR kind, a shared receive queue, Send with Invalidate.
#include <gtest/gtest.h>

#include "stack/tests/loopback.h"

using namespace softrdma;
using namespace softrdma::testing;

namespace {

CmEvent wait_event(Engine& e, std::initializer_list<Engine*> all, int timeout_ms = 10000) {
  CmEvent ev;
  bool got = run_until(all, [&] { return e.poll_cm(&ev); }, timeout_ms);
  EXPECT_TRUE(got) << "no CM event";
  return ev;
}

TEST(Cm, MaxPrivateDataBothWays) {
  Pair p;
  std::vector<uint8_t> req = pattern(Engine::kMaxPrivateData, 1);
  std::vector<uint8_t> rep = pattern(Engine::kMaxPrivateData, 2);
  ASSERT_TRUE(p.connect(req, rep));
  EXPECT_EQ(p.events_b.front().private_data, req);
  EXPECT_EQ(p.events_a.back().private_data, rep);
  std::vector<uint8_t> too_big(Engine::kMaxPrivateData + 1);
  Side c(EngineConfig{});
  EXPECT_EQ(c.eng->connect(c.qp, loopback(1), too_big.data(), too_big.size()), -EINVAL);
}

TEST(Cm, RejectCarriesPrivateData) {
  Side a(EngineConfig{}), b(EngineConfig{});
  Listener* l;
  ASSERT_EQ(b.eng->listen(loopback(0), 4, &l), 0);
  std::vector<uint8_t> why = {0xde, 0xad};
  ASSERT_EQ(a.eng->connect(a.qp, b.eng->listen_addr(l), nullptr, 0), 0);
  CmEvent req = wait_event(*b.eng, {a.eng.get(), b.eng.get()});
  ASSERT_EQ(req.type, CmEventType::kConnectRequest);
  ASSERT_EQ(b.eng->reject(req.req, why.data(), why.size()), 0);
  CmEvent rej = wait_event(*a.eng, {a.eng.get(), b.eng.get()});
  EXPECT_EQ(rej.type, CmEventType::kRejected);
  EXPECT_EQ(rej.status, -ECONNREFUSED);
  EXPECT_EQ(rej.private_data, why);
  EXPECT_EQ(rej.qp, a.qp);
}

TEST(Cm, NoListenerIsUnreachable) {
  Side a(EngineConfig{});
  Listener* l;
  ASSERT_EQ(a.eng->listen(loopback(0), 1, &l), 0);
  sockaddr_in dead = a.eng->listen_addr(l);
  a.eng->close_listener(l);  // the port is now closed
  ASSERT_EQ(a.eng->connect(a.qp, dead, nullptr, 0), 0);
  CmEvent ev = wait_event(*a.eng, {a.eng.get()});
  EXPECT_EQ(ev.type, CmEventType::kUnreachable);
  EXPECT_EQ(ev.status, -ECONNREFUSED);
}

TEST(Cm, DisconnectFlushesAndTellsPeer) {
  Pair p;
  ASSERT_TRUE(p.connect());
  std::vector<uint8_t> buf(64);
  Mr* mb = p.b.reg(buf, kAccessLocalWrite);
  Mr* ma = p.a.reg(buf, kAccessLocalWrite);
  for (uint64_t i = 0; i < 3; ++i) {
    RecvWr rw{.wr_id = i, .num_sge = 1};
    rw.sg_list[0] = sge(buf, mb);
    ASSERT_EQ(p.b.eng->post_recv(p.b.qp, rw), 0);
    rw.sg_list[0] = sge(buf, ma);
    ASSERT_EQ(p.a.eng->post_recv(p.a.qp, rw), 0);
  }
  ASSERT_EQ(p.a.eng->disconnect(p.a.qp), 0);
  CmEvent ev = wait_event(*p.b.eng, {p.a.eng.get(), p.b.eng.get()});
  EXPECT_EQ(ev.type, CmEventType::kDisconnected);
  EXPECT_EQ(ev.status, 0);  // orderly
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == 3 && p.b.wcs.size() == 3; }));
  for (const Wc& wc : p.a.wcs) EXPECT_EQ(wc.status, WcStatus::kWrFlushErr);
  for (const Wc& wc : p.b.wcs) EXPECT_EQ(wc.status, WcStatus::kWrFlushErr);
  EXPECT_EQ(p.b.qp->state(), QpState::kError);
  // Posting after the end completes at once, as flushed.
  SendWr sw{.wr_id = 9, .opcode = WrOpcode::kSend};
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, sw), 0);
  p.a.reap();
  EXPECT_EQ(p.a.wcs.back().status, WcStatus::kWrFlushErr);
}

struct Variant {
  uint8_t rev;
  iwarp::Rtr rtr;
  const char* name;
};
// gtest prints parameters; without this it dumps raw bytes, padding included.
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class CmVariants : public ::testing::TestWithParam<Variant> {};

// MPA v1, and v2 with each RTR kind and with none: data flows both ways.
TEST_P(CmVariants, ConnectsAndMovesData) {
  EngineConfig cfg;
  cfg.mpa_rev = GetParam().rev;
  cfg.rtr = GetParam().rtr;
  Pair p(cfg);
  ASSERT_TRUE(p.connect({7}, {8}));
  EXPECT_EQ(p.events_b.front().private_data, std::vector<uint8_t>{7});
  std::vector<uint8_t> src = pattern(70000, 3), dst(70000, 0);
  Mr* md = p.a.reg(dst, kAccessLocalWrite);
  RecvWr rw{.wr_id = 1, .num_sge = 1};
  rw.sg_list[0] = sge(dst, md);
  ASSERT_EQ(p.a.eng->post_recv(p.a.qp, rw), 0);
  SendWr sw{.wr_id = 2, .opcode = WrOpcode::kSend, .num_sge = 1};
  sw.sg_list[0] = sge(src, nullptr);
  ASSERT_EQ(p.b.eng->post_send(p.b.qp, sw), 0);  // responder sends first
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == 1; }));
  EXPECT_EQ(p.a.wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(dst, src);
}

INSTANTIATE_TEST_SUITE_P(
    Mpa, CmVariants,
    ::testing::Values(Variant{1, iwarp::Rtr::kNone, "v1"}, Variant{2, iwarp::Rtr::kNone, "v2NoRtr"},
                      Variant{2, iwarp::Rtr::kWrite, "v2WriteRtr"},
                      Variant{2, iwarp::Rtr::kRead, "v2ReadRtr"},
                      Variant{2, iwarp::Rtr::kSend, "v2SendRtr"}),
    [](const ::testing::TestParamInfo<Variant>& v) { return std::string(v.param.name); });

// Mixed revisions: a v2 initiator meets a v1 responder and falls back.
TEST(Cm, V2InitiatorMeetsV1Responder) {
  EngineConfig v1;
  v1.mpa_rev = 1;
  Side a(EngineConfig{}), b(v1);
  Listener* l;
  ASSERT_EQ(b.eng->listen(loopback(0), 4, &l), 0);
  ASSERT_EQ(a.eng->connect(a.qp, b.eng->listen_addr(l), nullptr, 0), 0);
  CmEvent req = wait_event(*b.eng, {a.eng.get(), b.eng.get()});
  ASSERT_EQ(req.type, CmEventType::kConnectRequest);
  ASSERT_EQ(b.eng->accept(req.req, b.qp, nullptr, 0), 0);
  CmEvent up = wait_event(*a.eng, {a.eng.get(), b.eng.get()});
  EXPECT_EQ(up.type, CmEventType::kEstablished);
  EXPECT_EQ(a.qp->mpa().rev, 1);
  EXPECT_EQ(b.qp->mpa().rev, 1);
}

TEST(Cm, SharedReceiveQueueServesTwoQps) {
  Side a1(EngineConfig{}), a2(EngineConfig{});
  auto eng = std::make_unique<Engine>(EngineConfig{});
  Pd* pd = eng->alloc_pd();
  Cq* cq = eng->create_cq(64);
  Srq* srq = eng->create_srq(pd, 16);
  Qp* q1 = eng->create_qp({.pd = pd, .send_cq = cq, .recv_cq = cq, .srq = srq});
  Qp* q2 = eng->create_qp({.pd = pd, .send_cq = cq, .recv_cq = cq, .srq = srq});
  std::vector<uint8_t> rbuf(4 * 100, 0);
  Mr* mr = eng->reg_mr(pd, rbuf.data(), rbuf.size(), kAccessLocalWrite);
  for (int i = 0; i < 4; ++i) {
    RecvWr rw{.wr_id = static_cast<uint64_t>(i), .num_sge = 1};
    rw.sg_list[0] = sge(rbuf, mr, i * 100, 100);
    ASSERT_EQ(eng->post_srq_recv(srq, rw), 0);
  }
  RecvWr own{.wr_id = 99};
  EXPECT_EQ(eng->post_recv(q1, own), -EINVAL);  // an SRQ QP has no own RQ
  Listener* l;
  ASSERT_EQ(eng->listen(loopback(0), 4, &l), 0);
  ASSERT_EQ(a1.eng->connect(a1.qp, eng->listen_addr(l), nullptr, 0), 0);
  ASSERT_EQ(a2.eng->connect(a2.qp, eng->listen_addr(l), nullptr, 0), 0);
  Qp* next[] = {q1, q2};
  int accepted = 0, established = 0;
  ASSERT_TRUE(run_until({a1.eng.get(), a2.eng.get(), eng.get()}, [&] {
    CmEvent ev;
    while (eng->poll_cm(&ev)) {
      if (ev.type == CmEventType::kConnectRequest) eng->accept(ev.req, next[accepted++], nullptr, 0);
      if (ev.type == CmEventType::kEstablished) ++established;
    }
    return established == 2;
  }));
  std::vector<uint8_t> m1(100, 1), m2(100, 2);
  SendWr s1{.wr_id = 1, .opcode = WrOpcode::kSend, .num_sge = 1};
  s1.sg_list[0] = sge(m1, nullptr);
  SendWr s2 = s1;
  s2.sg_list[0] = sge(m2, nullptr);
  ASSERT_EQ(a1.eng->post_send(a1.qp, s1), 0);
  ASSERT_EQ(a2.eng->post_send(a2.qp, s2), 0);
  std::vector<Wc> got;
  ASSERT_TRUE(run_until({a1.eng.get(), a2.eng.get(), eng.get()}, [&] {
    Wc wc;
    while (eng->poll_cq(cq, &wc, 1) == 1) got.push_back(wc);
    return got.size() == 2;
  }));
  int ones = 0, twos = 0;
  for (const Wc& wc : got) {
    ASSERT_EQ(wc.status, WcStatus::kSuccess);
    ASSERT_LT(wc.wr_id, 2u);  // the first two SRQ buffers, in post order
    uint8_t v = rbuf[wc.wr_id * 100];
    ones += v == 1;
    twos += v == 2;
    EXPECT_TRUE(std::all_of(rbuf.begin() + static_cast<long>(wc.wr_id * 100),
                            rbuf.begin() + static_cast<long>(wc.wr_id * 100 + 100),
                            [v](uint8_t b) { return b == v; }));
  }
  EXPECT_EQ(ones, 1);
  EXPECT_EQ(twos, 1);
}

TEST(Cm, SendWithInvalidate) {
  Pair p;
  ASSERT_TRUE(p.connect());
  std::vector<uint8_t> target(4096), rbuf(16);
  Mr* mt = p.b.reg(target, kAccessRemoteWrite);
  Mr* mrb = p.b.reg(rbuf, kAccessLocalWrite);
  for (uint64_t i = 0; i < 2; ++i) {
    RecvWr rw{.wr_id = i, .num_sge = 1};
    rw.sg_list[0] = sge(rbuf, mrb);
    ASSERT_EQ(p.b.eng->post_recv(p.b.qp, rw), 0);
  }
  SendWr inv{.wr_id = 1, .opcode = WrOpcode::kSendWithInv, .invalidate_stag = mt->stag};
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, inv), 0);
  ASSERT_TRUE(p.run([&] { return p.b.wcs.size() == 1; }));
  EXPECT_EQ(p.b.wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(p.b.wcs[0].flags & kWcWithInv);
  EXPECT_EQ(p.b.wcs[0].invalidated_stag, mt->stag);
  // The invalidated STag now refuses a Write: Terminate, both sides in error.
  std::vector<uint8_t> src(16, 5);
  SendWr w{.wr_id = 2, .opcode = WrOpcode::kWrite, .num_sge = 1,
           .remote_addr = reinterpret_cast<uint64_t>(target.data()), .rkey = mt->stag};
  w.sg_list[0] = sge(src, nullptr);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, w), 0);
  ASSERT_TRUE(p.run([&] {
    return p.a.qp->state() == QpState::kError && p.b.qp->state() == QpState::kError;
  }));
  EXPECT_EQ(target, std::vector<uint8_t>(4096, 0));
  ASSERT_NE(p.a.qp->term_received(), nullptr);
  EXPECT_EQ(p.a.qp->term_received()->layer, iwarp::TermLayer::kDdp);
  EXPECT_EQ(p.a.qp->term_received()->ecode, 0x00);  // invalid STag
}

}  // namespace
