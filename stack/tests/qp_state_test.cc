// QP state machine: the legal transitions (qp_state.h) for every pair of
// states, Idle → RTS on start, work posted early, the ways into Error (local
// close, to_error, the stream lost) and what every outstanding work request
// completes with on the way. A Terminate received or sent: qp_terminate_test.cc.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

#include "stack/iwarp/qp_state.h"
#include "stack/tests/qp_pair.h"

namespace softrdma::testing {
namespace {

constexpr QpState kStates[] = {QpState::kIdle, QpState::kRts, QpState::kClosing,
                               QpState::kTerminate, QpState::kError};
static_assert(std::size(kStates) == iwarp::kQpStateCount);

// The verbs QP state diagram as this stack uses it, written out by hand:
// kLegal[from][to], states in kStates order.
constexpr bool kLegal[5][5] = {
    //         Idle   RTS    Closing Term   Error
    /* Idle */ {false, true, false, false, true},
    /* RTS  */ {false, false, true, true, true},
    /* Clos */ {false, false, false, false, true},
    /* Term */ {false, false, false, false, true},
    /* Err  */ {false, false, false, false, false},
};

// Every (from, to) pair: the table says what kLegal says, and set_state
// moves the QP exactly then; a refusal is counted and leaves it where it was.
TEST(QpStateTest, EveryTransitionPairFollowsTheTable) {
  const char* names[] = {"idle", "rts", "closing", "terminate", "error"};
  for (int f = 0; f < 5; ++f) {
    EXPECT_STREQ(to_string(kStates[f]), names[f]);
    for (int t = 0; t < 5; ++t) {
      SCOPED_TRACE(std::string(names[f]) + " -> " + names[t]);
      EXPECT_EQ(iwarp::qp_transition_legal(kStates[f], kStates[t]), kLegal[f][t]);
      FakeHost h{1};
      QpTestPeer::force_state(*h.qp, kStates[f]);
      EXPECT_EQ(QpTestPeer::set_state(*h.qp, kStates[t]), kLegal[f][t] ? 0 : -EINVAL);
      EXPECT_EQ(h.qp->state(), kLegal[f][t] ? kStates[t] : kStates[f]);
      EXPECT_EQ(h.stats.qp_transitions_refused, kLegal[f][t] ? 0u : 1u);
    }
  }
}

// start is Idle → RTS only: a second start, or one after an error, is
// refused and leaves the QP (and its stream) as it was.
TEST(QpStateTest, StartRefusedUnlessIdle) {
  Pair p;
  p.start();
  auto [ma, mb] = mpa_pair(true, false, false);
  FakeConn other({}, 9);
  EXPECT_EQ(p.a.qp->start(&other, ma, true), -EINVAL);
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);
  EXPECT_EQ(p.a.qp->conn(), &p.link->a);
  p.a.qp->to_error(WcStatus::kWrFlushErr, 0);
  EXPECT_EQ(p.a.qp->start(&other, ma, true), -EINVAL);
  EXPECT_EQ(p.a.qp->state(), QpState::kError);
  EXPECT_EQ(p.a.stats.qp_transitions_refused, 2u);
  EXPECT_EQ(other.bytes_sent(), 0u);
}

// close from Idle and from Terminate goes straight to Error (Closing is
// entered from RTS only), and no path asks for a transition the table refuses.
TEST(QpStateTest, CloseFromIdleAndTerminate) {
  FakeHost idle{3};
  ASSERT_EQ(idle.qp->post_recv(Pair::recv(1, 0, 0, 0)), 0);
  idle.qp->close();
  EXPECT_EQ(idle.qp->state(), QpState::kError);
  expect_flushed(completions(idle), {1}, 1, WcStatus::kWrFlushErr, 0);

  Pair p;
  p.start();
  p.link->b.config().tx_space = 0;  // b's Terminate cannot leave
  iwarp::QpTestPeer::bound_unexpected(*p.b.qp, 0, 0);  // b holds no Send for want of a receive
  ASSERT_EQ(p.a.qp->post_send(p.send(1, 0, 10)), 0);  // b has no receive posted
  ASSERT_TRUE(p.link->pump());
  ASSERT_EQ(p.b.qp->state(), QpState::kTerminate);
  p.b.qp->close();
  EXPECT_EQ(p.b.qp->state(), QpState::kError);
  EXPECT_TRUE(p.link->b.closed());
  for (const iwarp::Stats* st : {&idle.stats, &p.a.stats, &p.b.stats})
    EXPECT_EQ(st->qp_transitions_refused, 0u);
}

TEST(QpStateTest, StartMovesIdleToRts) {
  Pair p;
  iwarp::Qp& a = *p.a.qp;
  EXPECT_EQ(a.state(), QpState::kIdle);
  EXPECT_EQ(a.conn(), nullptr);
  EXPECT_FALSE(a.tx_pending());
  EXPECT_EQ(a.error_status(), 0);
  EXPECT_EQ(a.error_term(), 0u);
  EXPECT_EQ(a.term_received(), nullptr);
  // The responder starts first so that the RTR is not already waiting.
  auto [ma, mb] = mpa_pair(true, false, false, Rtr::kWrite);
  p.b.qp->start(&p.link->b, mb, false);
  a.start(&p.link->a, ma, true);
  EXPECT_EQ(a.state(), QpState::kRts);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);
  EXPECT_EQ(a.conn(), &p.link->a);
  EXPECT_EQ(a.mpa().rtr, Rtr::kWrite);
  EXPECT_EQ(p.a.owner.ready, 1) << "the initiator is ready once its RTR is out";
  EXPECT_EQ(p.b.owner.ready, 0) << "the responder waits for the RTR";
  ASSERT_TRUE(p.link->pump());
  EXPECT_EQ(p.b.owner.ready, 1);
  EXPECT_EQ(p.a.owner.errors + p.b.owner.errors, 0);
}

// Work posted before start waits; the responder sends nothing before the RTR.
TEST(QpStateTest, PostsInIdleAreQueuedAndSentOnStart) {
  Pair p;
  for (size_t i = 0; i < 4096; ++i) p.abuf[i] = static_cast<uint8_t>(i * 3);
  for (size_t i = 0; i < 4096; ++i) p.bbuf[i] = static_cast<uint8_t>(i * 5 + 1);
  iwarp::Qp& a = *p.a.qp;
  iwarp::Qp& b = *p.b.qp;
  ASSERT_EQ(b.post_recv(Pair::recv(100, p.baddr(8192), 4096, p.bstag)), 0);
  ASSERT_EQ(a.post_send(p.send(1, 0, 1000)), 0);
  ASSERT_EQ(a.post_send(p.write(2, 1000, 2000, p.baddr(16384), p.bstag)), 0);
  ASSERT_EQ(a.post_send(p.read(3, 65536, 3000, p.baddr(0), p.bstag)), 0);
  // The responder posts too: a Send back to a.
  ASSERT_EQ(a.post_recv(Pair::recv(200, p.aaddr(32768), 4096, p.astag)), 0);
  SendWr back{.wr_id = 4, .opcode = WrOpcode::kSend, .num_sge = 1};
  back.sg_list[0] = Sge{p.baddr(0), 500, p.bstag};
  ASSERT_EQ(b.post_send(back), 0);
  EXPECT_TRUE(a.tx_pending());
  EXPECT_EQ(p.a.send_cq.size() + p.b.send_cq.size(), 0u);

  auto [ma, mb] = mpa_pair(true, false, false, Rtr::kWrite);
  b.start(&p.link->b, mb, false);
  EXPECT_EQ(b.state(), QpState::kRts);
  EXPECT_EQ(p.link->b.bytes_sent(), 0u) << "responder transmitted before the RTR";
  a.start(&p.link->a, ma, true);
  EXPECT_GT(p.link->a.bytes_sent(), 0u) << "queued work not sent on start";
  ASSERT_TRUE(p.link->pump());

  std::map<uint64_t, Wc> wa = completions(p.a), wb = completions(p.b);
  ASSERT_EQ(wa.size(), 4u);
  ASSERT_EQ(wb.size(), 2u);
  for (const auto& [id, wc] : wa) EXPECT_EQ(wc.status, WcStatus::kSuccess) << id;
  for (const auto& [id, wc] : wb) EXPECT_EQ(wc.status, WcStatus::kSuccess) << id;
  EXPECT_EQ(wb[100].byte_len, 1000u);
  EXPECT_EQ(wa[200].byte_len, 500u);
  EXPECT_EQ(wa[3].byte_len, 3000u);
  EXPECT_TRUE(std::equal(p.abuf.begin(), p.abuf.begin() + 1000, p.bbuf.begin() + 8192));
  EXPECT_TRUE(std::equal(p.abuf.begin() + 1000, p.abuf.begin() + 3000, p.bbuf.begin() + 16384));
  EXPECT_TRUE(std::equal(p.bbuf.begin(), p.bbuf.begin() + 3000, p.abuf.begin() + 65536));
  EXPECT_TRUE(std::equal(p.bbuf.begin(), p.bbuf.begin() + 500, p.abuf.begin() + 32768));
}

// Leaves a with work in every place it can be outstanding: a Read and a
// two-SGE Read awaiting responses, Sends/Writes/Reads/Atomics stuck in the
// SQ (signaled or not), posted receives, and a receive half filled by a
// message from b. Returns every wr_id it posted on a.
std::vector<uint64_t> load_outstanding(Pair& p) {
  iwarp::Qp& a = *p.a.qp;
  iwarp::Qp& b = *p.b.qp;
  std::vector<uint64_t> ids;
  auto post = [&](const SendWr& wr) {
    EXPECT_EQ(a.post_send(wr), 0);
    ids.push_back(wr.wr_id);
  };
  auto post_recv = [&](uint64_t id, size_t off) {
    EXPECT_EQ(a.post_recv(Pair::recv(id, p.aaddr(off), 65536, p.astag)), 0);
    ids.push_back(id);
  };
  // Receive 10 fills partly: b's 20000-octet Send gets 3000 octets through.
  post_recv(10, 0);
  post_recv(11, 65536);
  post_recv(12, 131072);
  p.link->b.config().tx_space = 3000;
  SendWr big{.wr_id = 90, .opcode = WrOpcode::kSend, .num_sge = 1};
  big.sg_list[0] = Sge{p.baddr(0), 20000, p.bstag};
  EXPECT_EQ(b.post_send(big), 0);
  a.rx_progress();
  EXPECT_TRUE(QpTestPeer::receiving_message(a));

  // Reads whose requests reach b, which does not answer (it is never run).
  post(p.read(1, 200000, 4096, p.baddr(0), p.bstag));
  SendWr two = p.read(2, 210000, 1000, p.baddr(4096), p.bstag, 0);
  two.num_sge = 2;
  two.sg_list[1] = Sge{p.aaddr(220000), 1000, p.astag};
  post(two);
  EXPECT_EQ(QpTestPeer::orq(a), 3u);
  // Now the wire is full: everything else stays in the SQ.
  p.link->a.config().tx_space = 0;
  post(p.send(3, 0, 100));
  post(p.send(4, 0, 100, 0));
  post(p.write(5, 0, 100, p.baddr(0), p.bstag, 0));
  post(p.read(6, 300000, 100, p.baddr(0), p.bstag, 0));
  post(p.fetch_add(7, 400000, p.baddr(8), p.bstag));
  SendWr imm{.wr_id = 8, .opcode = WrOpcode::kWriteWithImm, .flags = 0, .num_sge = 1,
             .remote_addr = p.baddr(0), .rkey = p.bstag, .imm_data = 5};
  imm.sg_list[0] = Sge{p.aaddr(0), 10, p.astag};
  post(imm);
  EXPECT_EQ(QpTestPeer::sq(a), 6u);
  return ids;
}

TEST(QpStateTest, CloseFlushesEverything) {
  Pair p;
  p.start();
  std::vector<uint64_t> ids = load_outstanding(p);
  p.a.qp->close();
  EXPECT_EQ(p.a.qp->state(), QpState::kError);
  EXPECT_TRUE(p.link->a.closed());
  EXPECT_FALSE(p.link->a.aborted()) << "an orderly close is not a reset";
  std::map<uint64_t, Wc> wcs = completions(p.a);
  expect_flushed(wcs, ids, 0, WcStatus::kWrFlushErr, 0);
  EXPECT_EQ(wcs[1].opcode, WcOpcode::kRead);
  EXPECT_EQ(wcs[3].opcode, WcOpcode::kSend);
  EXPECT_EQ(wcs[5].opcode, WcOpcode::kWrite);
  EXPECT_EQ(wcs[7].opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(wcs[8].opcode, WcOpcode::kWrite);
  EXPECT_EQ(wcs[10].opcode, WcOpcode::kRecv);
  EXPECT_FALSE(p.a.qp->tx_pending());

  // Nothing more happens, whatever else is called.
  p.a.qp->close();
  p.a.qp->to_error(WcStatus::kFatalErr, 1);
  p.a.qp->on_stream_closed(0);
  p.a.qp->rx_progress();
  p.a.qp->tx_progress();
  EXPECT_TRUE(completions(p.a).empty());
  EXPECT_EQ(p.a.qp->state(), QpState::kError);
}

TEST(QpStateTest, ToErrorFromRts) {
  Pair p;
  p.start();
  std::vector<uint64_t> ids = load_outstanding(p);
  const uint64_t sent = p.link->a.bytes_sent();
  p.a.qp->to_error(WcStatus::kLocQpOpErr, 77);
  EXPECT_EQ(p.a.qp->state(), QpState::kError);
  EXPECT_TRUE(p.link->a.aborted()) << "an error resets the stream";
  EXPECT_EQ(p.a.owner.errors, 1);
  // The receive in progress is the one the error is about.
  expect_flushed(completions(p.a), ids, 10, WcStatus::kLocQpOpErr, 77);
  p.a.qp->to_error(WcStatus::kFatalErr, 1);
  p.a.qp->close();
  EXPECT_EQ(p.a.owner.errors, 1);
  EXPECT_TRUE(completions(p.a).empty());
  EXPECT_EQ(p.link->a.bytes_sent(), sent);
  // The peer learns of the reset.
  ASSERT_TRUE(p.link->pump());
  EXPECT_EQ(p.b.qp->state(), QpState::kError);
  EXPECT_EQ(p.b.qp->error_status(), -ECONNRESET);
}

TEST(QpStateTest, ToErrorFromIdle) {
  Pair p;
  ASSERT_EQ(p.a.qp->post_send(p.send(1, 0, 10, 0)), 0);
  ASSERT_EQ(p.a.qp->post_recv(Pair::recv(2, p.aaddr(0), 10, p.astag)), 0);
  p.a.qp->to_error(WcStatus::kWrFlushErr, 0);
  EXPECT_EQ(p.a.qp->state(), QpState::kError);
  expect_flushed(completions(p.a), {1, 2}, 0, WcStatus::kWrFlushErr, 0);
}

TEST(QpStateTest, PostsAfterErrorCompleteFlushed) {
  Pair p;
  p.start();
  p.a.qp->to_error(WcStatus::kFatalErr, 0);
  ASSERT_TRUE(completions(p.a).empty());
  const uint64_t sent = p.link->a.bytes_sent();
  struct {
    SendWr wr;
    WcOpcode op;
  } cases[] = {
      {p.send(1, 0, 10, 0), WcOpcode::kSend},
      {p.write(2, 0, 10, p.baddr(0), p.bstag), WcOpcode::kWrite},
      {p.read(3, 0, 10, p.baddr(0), p.bstag, 0), WcOpcode::kRead},
      {p.fetch_add(4, 0, p.baddr(0), p.bstag), WcOpcode::kFetchAdd},
  };
  for (auto& c : cases) {
    ASSERT_EQ(p.a.qp->post_send(c.wr), 0);
    std::vector<Wc> wcs = p.a.poll_send();
    ASSERT_EQ(wcs.size(), 1u) << "wr_id " << c.wr.wr_id;
    EXPECT_EQ(wcs[0].wr_id, c.wr.wr_id);
    EXPECT_EQ(wcs[0].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(wcs[0].opcode, c.op);
  }
  SendWr cas = p.fetch_add(5, 0, p.baddr(0), p.bstag);
  cas.opcode = WrOpcode::kAtomicCmpSwap;
  ASSERT_EQ(p.a.qp->post_send(cas), 0);
  EXPECT_EQ(p.a.poll_send().at(0).opcode, WcOpcode::kCmpSwap);
  ASSERT_EQ(p.a.qp->post_recv(Pair::recv(6, p.aaddr(0), 10, p.astag)), 0);
  std::vector<Wc> r = p.a.poll_recv();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 6u);
  EXPECT_EQ(r[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(r[0].opcode, WcOpcode::kRecv);
  EXPECT_EQ(p.link->a.bytes_sent(), sent) << "nothing is sent after the error";
  // A malformed WR is still refused as such.
  SendWr bad = p.send(7, 0, 10);
  bad.num_sge = kMaxSge + 1;
  EXPECT_EQ(p.a.qp->post_send(bad), -EINVAL);
}

// The peer's stream ends. An orderly close is a disconnect: everything
// outstanding is flushed. A reset loses the stream: the first outstanding
// WR fails with kFatalErr (vendor_err the errno), the rest are flushed.
TEST(QpStateTest, PeerStreamCloseFailsOutstanding) {
  for (bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "reset" : "orderly close");
    Pair p;
    p.start();
    std::vector<uint64_t> ids = load_outstanding(p);
    p.link->b.config().tx_space = 1u << 20;
    if (reset) {
      p.b.qp->to_error(WcStatus::kFatalErr, 0);
    } else {
      p.b.qp->close();
    }
    p.link->step();
    EXPECT_EQ(p.a.qp->state(), QpState::kError);
    EXPECT_EQ(p.a.qp->conn(), nullptr);
    EXPECT_EQ(p.a.owner.errors, 1);
    EXPECT_EQ(p.a.qp->error_status(), reset ? -ECONNRESET : 0);
    expect_flushed(completions(p.a), ids, 10, reset ? WcStatus::kFatalErr : WcStatus::kWrFlushErr,
                   reset ? static_cast<uint32_t>(ECONNRESET) : 0u);
  }
}
// With ORD 0 the peer takes no Reads: the Read fails locally, the QP lives.
TEST(QpStateTest, ReadWithZeroOrdFailsLocally) {
  Pair p;
  auto [ma, mb] = mpa_pair(true, false, false, Rtr::kNone, 0, 16);
  p.link->start(ma, mb);
  ASSERT_EQ(p.a.qp->post_send(p.read(1, 0, 64, p.baddr(0), p.bstag)), 0);
  ASSERT_EQ(p.a.qp->post_send(p.send(2, 0, 0, 0)), 0);
  ASSERT_EQ(p.b.qp->post_recv(Pair::recv(3, p.baddr(0), 64, p.bstag)), 0);
  ASSERT_TRUE(p.link->pump());
  std::map<uint64_t, Wc> wa = completions(p.a);
  ASSERT_EQ(wa.size(), 1u);
  EXPECT_EQ(wa[1].status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);
  EXPECT_EQ(completions(p.b).size(), 1u) << "the Send behind it still went";
}

// A Read that fails locally (ORD 0) must not hold up the work queued
// behind it: one tx_progress (what a writable event triggers) sends both
// Sends around it, with no further progress call.
TEST(QpStateTest, ZeroOrdReadDoesNotStallQueue) {
  Pair p;
  auto [ma, mb] = mpa_pair(true, false, false, Rtr::kNone, 0, 16);
  p.link->start(ma, mb);
  ASSERT_EQ(p.b.qp->post_recv(Pair::recv(10, p.baddr(0), 64, p.bstag)), 0);
  ASSERT_EQ(p.b.qp->post_recv(Pair::recv(11, p.baddr(64), 64, p.bstag)), 0);
  p.link->a.config().tx_space = 0;  // the wire is busy while all three are posted
  ASSERT_EQ(p.a.qp->post_send(p.send(1, 0, 16)), 0);
  ASSERT_EQ(p.a.qp->post_send(p.read(2, 0, 64, p.baddr(0), p.bstag)), 0);
  ASSERT_EQ(p.a.qp->post_send(p.send(3, 0, 16)), 0);
  p.link->a.config().tx_space = 1u << 20;
  p.a.qp->tx_progress();  // writable
  p.b.qp->rx_progress();
  std::map<uint64_t, Wc> wa = completions(p.a), wb = completions(p.b);
  EXPECT_EQ(wa[2].status, WcStatus::kLocQpOpErr);
  EXPECT_TRUE(wa.count(3)) << "Send behind the failed Read was not sent";
  EXPECT_TRUE(wb.count(10));
  EXPECT_TRUE(wb.count(11)) << "Send behind the failed Read never arrived";
}

}  // namespace
}  // namespace softrdma::testing
