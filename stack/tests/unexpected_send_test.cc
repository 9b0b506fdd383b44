// Sends that arrive before a receive is posted (iwarp/unexpected.h): held,
// then delivered in order, with their Immediate Data, Invalidate and
// Solicited semantics, once receives are posted; beyond the bound the
// peer gets the RFC 5041 Terminate (untagged buffer, no buffer available).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "stack/tests/fake_conn.h"
#include "stack/tests/loopback.h"

using namespace softrdma;
using namespace softrdma::testing;
using iwarp::DdpEtype;
using iwarp::DdpUntaggedEcode;
using iwarp::TermLayer;

namespace {

constexpr uint8_t u8(auto v) { return static_cast<uint8_t>(v); }

EngineConfig bounded(uint64_t bytes, uint32_t msgs) {
  EngineConfig c;
  c.unexpected_bytes = bytes;
  c.unexpected_msgs = msgs;
  return c;
}

// Keeps both engines moving for ms without anyone posting a receive.
void idle(Pair& p, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  p.run([&] { return std::chrono::steady_clock::now() > end; }, ms + 5000);
}

SendWr send(uint64_t id, const std::vector<uint8_t>& buf, Mr* mr) {
  SendWr w{.wr_id = id, .opcode = WrOpcode::kSend, .num_sge = 1};
  w.sg_list[0] = sge(buf, mr);
  return w;
}

RecvWr recv(uint64_t id, const std::vector<uint8_t>& buf, Mr* mr) {
  RecvWr r{.wr_id = id, .num_sge = 1};
  r.sg_list[0] = sge(buf, mr);
  return r;
}

// The Terminate the sender got, as TermCause::packed().
uint32_t untagged_term(DdpUntaggedEcode e) {
  return iwarp::TermCause{TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(e)}.packed();
}

}  // namespace

TEST(UnexpectedSend, HeldUntilReceivesArePostedThenDeliveredInOrder) {
  Pair p(bounded(2u << 20, 16));
  ASSERT_TRUE(p.connect());
  const std::vector<size_t> sizes = {0, 8, 64 * 1024, 1 << 20};
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<Mr*> ms, md;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.push_back(pattern(sizes[i], static_cast<uint32_t>(i + 1)));
    dst.emplace_back(sizes[i] + 16, 0);  // room to spare: byte_len must say the size
    ms.push_back(p.a.reg(src[i], 0));
    md.push_back(p.b.reg(dst[i], kAccessLocalWrite));
    ASSERT_EQ(p.a.eng->post_send(p.a.qp, send(10 + i, src[i], ms[i])), 0);
  }
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == sizes.size(); }));
  idle(p, 1000);
  for (const Wc& w : p.a.wcs) EXPECT_EQ(w.status, WcStatus::kSuccess);
  EXPECT_TRUE(p.b.wcs.empty());
  uint64_t total = 0;
  for (size_t s : sizes) total += s;
  Counters held = p.b.eng->counters();
  EXPECT_EQ(held.unexpected_msgs, sizes.size());
  EXPECT_EQ(held.unexpected_bytes, total);
  EXPECT_EQ(held.unexpected_bytes_hwm, total);
  EXPECT_EQ(held.unexpected_overruns, 0u);
  EXPECT_EQ(held.terminates_tx, 0u);

  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_EQ(p.b.eng->post_recv(p.b.qp, recv(20 + i, dst[i], md[i])), 0);
  ASSERT_TRUE(p.run([&] { return p.b.wcs.size() == sizes.size(); }));
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Wc& w = p.b.wcs[i];
    EXPECT_EQ(w.wr_id, 20 + i) << "delivered out of order";
    EXPECT_EQ(w.status, WcStatus::kSuccess);
    EXPECT_EQ(w.opcode, WcOpcode::kRecv);
    EXPECT_EQ(w.byte_len, sizes[i]);
    EXPECT_TRUE(std::equal(src[i].begin(), src[i].end(), dst[i].begin())) << "message " << i;
  }
  // Held messages are copied twice: into the store, then into the receive.
  Counters c = p.b.eng->counters();
  EXPECT_EQ(c.rx_copy_bytes, c.payload_rx + total);

  // The stream goes on: a Send to a posted receive lands directly.
  std::vector<uint8_t> more = pattern(3000, 9), into(3000, 0);
  ASSERT_EQ(p.b.eng->post_recv(p.b.qp, recv(30, into, p.b.reg(into, kAccessLocalWrite))), 0);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, send(31, more, p.a.reg(more, 0))), 0);
  ASSERT_TRUE(p.run([&] { return p.b.wcs.size() == sizes.size() + 1; }));
  EXPECT_EQ(p.b.wcs.back().status, WcStatus::kSuccess);
  EXPECT_EQ(into, more);
  EXPECT_EQ(p.b.eng->counters().unexpected_msgs, sizes.size());
}

// Immediate Data, Invalidate and Solicited are applied when the held
// message completes: the STag stays valid until its receive is posted.
TEST(UnexpectedSend, ImmediateInvalidateAndSolicitedApplyOnDelivery) {
  Pair p;
  ASSERT_TRUE(p.connect());
  std::vector<uint8_t> target(4096, 0), payload = pattern(100, 3), sink(256, 0);
  Mr* mt = p.b.reg(target, kAccessLocalWrite | kAccessRemoteWrite);
  Mr* ms = p.a.reg(payload, 0);
  Mr* mk = p.b.reg(sink, kAccessLocalWrite);
  SendWr inv = send(1, payload, ms);
  inv.opcode = WrOpcode::kSendWithInv;
  inv.invalidate_stag = mt->stag;
  inv.flags |= kWrSolicited;
  SendWr imm{.wr_id = 2, .opcode = WrOpcode::kImmData, .imm_data = 0x1122334455667788ull};
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, inv), 0);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, imm), 0);
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == 2; }));
  idle(p, 1000);
  ASSERT_EQ(p.b.eng->counters().unexpected_msgs, 2u);

  // Not yet invalidated: a Write through it still lands.
  std::vector<uint8_t> w = pattern(64, 4);
  SendWr wr{.wr_id = 3, .opcode = WrOpcode::kWrite, .num_sge = 1,
            .remote_addr = reinterpret_cast<uint64_t>(target.data()), .rkey = mt->stag};
  wr.sg_list[0] = sge(w, p.a.reg(w, 0));
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, wr), 0);
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == 3; }));
  ASSERT_TRUE(p.run([&] { return std::equal(w.begin(), w.end(), target.begin()); }));

  ASSERT_EQ(p.b.eng->post_recv(p.b.qp, recv(11, sink, mk)), 0);
  ASSERT_EQ(p.b.eng->post_recv(p.b.qp, recv(12, sink, mk)), 0);
  ASSERT_TRUE(p.run([&] { return p.b.wcs.size() == 2; }));
  const Wc& a = p.b.wcs[0];
  EXPECT_EQ(a.wr_id, 11u);
  EXPECT_EQ(a.status, WcStatus::kSuccess);
  EXPECT_EQ(a.byte_len, payload.size());
  EXPECT_EQ(a.flags & (kWcWithInv | kWcSolicited), kWcWithInv | kWcSolicited);
  EXPECT_EQ(a.invalidated_stag, mt->stag);
  const Wc& b = p.b.wcs[1];
  EXPECT_EQ(b.wr_id, 12u);
  EXPECT_EQ(b.status, WcStatus::kSuccess);
  EXPECT_EQ(b.opcode, WcOpcode::kRecvRdmaImm);
  EXPECT_TRUE(b.flags & kWcWithImm);
  EXPECT_EQ(b.imm_data, 0x1122334455667788ull);

  // Now the STag is gone: a Write through it is refused with a Terminate.
  wr.wr_id = 4;
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, wr), 0);
  ASSERT_TRUE(p.run([&] { return p.a.qp->term_received() != nullptr; }));
  EXPECT_EQ(p.a.qp->term_received()->layer, TermLayer::kDdp);
  EXPECT_EQ(p.a.qp->term_received()->etype, u8(DdpEtype::kTaggedBuf));
}

// A receive too short for the held message fails as a too-short posted
// receive does: kLocLenErr here, DDP "message too long" to the peer.
TEST(UnexpectedSend, HeldMessageLongerThanReceive) {
  Pair p;
  ASSERT_TRUE(p.connect());
  std::vector<uint8_t> payload = pattern(200, 5), sink(100, 0);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, send(1, payload, p.a.reg(payload, 0))), 0);
  ASSERT_TRUE(p.run([&] { return p.b.eng->counters().unexpected_msgs == 1; }));
  ASSERT_EQ(p.b.eng->post_recv(p.b.qp, recv(7, sink, p.b.reg(sink, kAccessLocalWrite))), 0);
  ASSERT_TRUE(p.run([&] { return !p.b.wcs.empty() && p.a.qp->term_received() != nullptr; }));
  EXPECT_EQ(p.b.wcs[0].wr_id, 7u);
  EXPECT_EQ(p.b.wcs[0].status, WcStatus::kLocLenErr);
  EXPECT_EQ(p.a.qp->term_received()->packed(), untagged_term(DdpUntaggedEcode::kTooLong));
}

// A peer beyond the byte bound (here in the middle of a multi-segment Send)
// or the message bound has overrun us: the Terminate, as without a store.
TEST(UnexpectedSend, OverrunningTheBoundTerminates) {
  struct Case {
    uint64_t bytes;
    uint32_t msgs;
    std::vector<size_t> sends;
    uint64_t held;  // messages the store took in, the overrunning one too if begun
  };
  // Over kernel TCP on loopback an FPDU carries up to 64 KiB: the 200 KiB
  // Send overruns 128 KiB at its second segment.
  for (const Case& k : {Case{128 * 1024, 16, {32 * 1024, 200 * 1024}, 2},
                        Case{1 << 20, 2, {8, 8, 8}, 2}, Case{0, 0, {8}, 0}}) {
    SCOPED_TRACE(::testing::Message() << k.bytes << " bytes, " << k.msgs << " messages");
    Pair p(bounded(k.bytes, k.msgs));
    ASSERT_TRUE(p.connect());
    std::vector<std::vector<uint8_t>> src;
    for (size_t i = 0; i < k.sends.size(); ++i) {
      src.push_back(pattern(k.sends[i], static_cast<uint32_t>(i)));
      ASSERT_EQ(p.a.eng->post_send(p.a.qp, send(i, src[i], p.a.reg(src[i], 0))), 0);
    }
    ASSERT_TRUE(p.run([&] { return p.a.qp->term_received() != nullptr; }));
    EXPECT_EQ(p.a.qp->term_received()->packed(), untagged_term(DdpUntaggedEcode::kNoBuffer));
    // The receiver's QP is gone: receives posted now are flushed.
    std::vector<uint8_t> sink(64 * 1024, 0);
    ASSERT_TRUE(p.run([&] { return p.b.qp->state() == QpState::kError; }));
    ASSERT_EQ(p.b.eng->post_recv(p.b.qp, recv(50, sink, p.b.reg(sink, kAccessLocalWrite))), 0);
    ASSERT_TRUE(p.run([&] { return !p.b.wcs.empty(); }));
    EXPECT_EQ(p.b.wcs[0].status, WcStatus::kWrFlushErr);
    Counters c = p.b.eng->counters();
    EXPECT_EQ(c.unexpected_overruns, 1u);
    EXPECT_EQ(c.terminates_tx, 1u);
    EXPECT_EQ(c.unexpected_msgs, k.held);
    EXPECT_LE(c.unexpected_bytes_hwm, k.bytes);
  }
}

// A QP on a shared receive queue holds Sends too; post_srq_recv gives them
// their receives.
TEST(UnexpectedSend, DeliveredThroughTheSharedReceiveQueue) {
  Pair p;
  Srq* srq = p.b.eng->create_srq(p.b.pd, 16);
  p.b.eng->destroy_qp(p.b.qp);
  p.b.qp = p.b.eng->create_qp({.pd = p.b.pd, .send_cq = p.b.cq, .recv_cq = p.b.cq, .srq = srq});
  ASSERT_NE(p.b.qp, nullptr);
  ASSERT_TRUE(p.connect());
  std::vector<uint8_t> m1 = pattern(5000, 1), m2 = pattern(70000, 2);
  std::vector<uint8_t> d1(8000, 0), d2(80000, 0);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, send(1, m1, p.a.reg(m1, 0))), 0);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, send(2, m2, p.a.reg(m2, 0))), 0);
  ASSERT_TRUE(p.run([&] { return p.b.eng->counters().unexpected_msgs == 2; }));
  ASSERT_TRUE(p.run([&] { return p.b.eng->counters().unexpected_bytes == 75000; }));
  ASSERT_EQ(p.b.eng->post_srq_recv(srq, recv(11, d1, p.b.reg(d1, kAccessLocalWrite))), 0);
  ASSERT_EQ(p.b.eng->post_srq_recv(srq, recv(12, d2, p.b.reg(d2, kAccessLocalWrite))), 0);
  ASSERT_TRUE(p.run([&] { return p.b.wcs.size() == 2; }));
  EXPECT_EQ(p.b.wcs[0].wr_id, 11u);
  EXPECT_EQ(p.b.wcs[0].byte_len, m1.size());
  EXPECT_EQ(p.b.wcs[1].wr_id, 12u);
  EXPECT_EQ(p.b.wcs[1].byte_len, m2.size());
  for (const Wc& w : p.b.wcs) EXPECT_EQ(w.status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(m1.begin(), m1.end(), d1.begin()));
  EXPECT_TRUE(std::equal(m2.begin(), m2.end(), d2.begin()));
}

// A receive posted while a held multi-segment Send is still arriving waits
// for its last segment, then takes it whole.
TEST(UnexpectedSend, ReceivePostedWhileTheHeldSendArrives) {
  FakeHost a{1}, b{2};
  std::vector<uint8_t> src = pattern(100000, 6), dst(100000, 0);
  const uint32_t sa = a.reg(src.data(), src.size(), 0);
  const uint32_t sb = b.reg(dst.data(), dst.size(), kAccessLocalWrite);
  FakeConnConfig cfg;
  cfg.tx_space = 8192;  // a few 1448-octet FPDUs a round: the Send takes many
  FakeLink link(a.qp.get(), b.qp.get(), cfg, 1);
  auto [ma, mb] = mpa_pair(true, false, false, iwarp::Rtr::kNone);
  link.start(ma, mb);
  SendWr w{.wr_id = 1, .opcode = WrOpcode::kSend, .num_sge = 1};
  w.sg_list[0] = Sge{reinterpret_cast<uint64_t>(src.data()), 100000, sa};
  ASSERT_EQ(a.qp->post_send(w), 0);
  for (int i = 0; i < 1000 && b.stats.unexpected_bytes < 20000; ++i) link.step();
  ASSERT_GE(b.stats.unexpected_bytes, 20000u);
  ASSERT_LT(b.stats.unexpected_bytes, 100000u) << "the Send arrived whole already";
  RecvWr r{.wr_id = 9, .num_sge = 1};
  r.sg_list[0] = Sge{reinterpret_cast<uint64_t>(dst.data()), 100000, sb};
  ASSERT_EQ(b.qp->post_recv(r), 0);
  EXPECT_TRUE(b.poll_recv().empty()) << "completed before its last segment";
  ASSERT_TRUE(link.pump());
  std::vector<Wc> got = b.poll_recv();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 9u);
  EXPECT_EQ(got[0].status, WcStatus::kSuccess);
  EXPECT_EQ(got[0].byte_len, 100000u);
  EXPECT_EQ(dst, src);
  EXPECT_EQ(b.stats.unexpected_msgs, 1u);
  EXPECT_EQ(b.stats.unexpected_bytes, 100000u);
  EXPECT_EQ(b.stats.rx_copy_bytes, b.stats.payload_rx + 100000);
}
