// QP state machine: the legal transitions (qp_state.h) for every pair of
// states, Idle → RTS on start, work posted early, the ways into Error (local
// close, to_error, a Terminate received or sent, the stream lost) and what
// every outstanding work request completes with on the way. Two QPs over
// FakeConn, no Engine and no MPA exchange.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "stack/iwarp/qp_state.h"
#include "stack/iwarp/tx_frame.h"
#include "stack/tests/fake_conn.h"

namespace softrdma::iwarp {

// Lets a test see where the QP stands internally.
struct QpTestPeer {
  static bool receiving_message(const Qp& q) { return q.rx_msg_active_; }
  static size_t orq(const Qp& q) { return q.orq_.size(); }
  static size_t sq(const Qp& q) { return q.sq_.size(); }
  static int set_state(Qp& q, QpState to) { return q.set_state(to); }
  static void force_state(Qp& q, QpState s) { q.state_ = s; }  // a starting point only
  static void bound_unexpected(Qp& q, uint64_t bytes, uint32_t msgs) {
    q.unexp_.set_bounds(bytes, msgs);
  }
};

}  // namespace softrdma::iwarp

namespace softrdma::testing {
namespace {

using iwarp::DdpEtype;
using iwarp::DdpTaggedEcode;
using iwarp::DdpUntaggedEcode;
using iwarp::LlpEcode;
using iwarp::RdmapEcode;
using iwarp::RdmapEtype;
using iwarp::QpTestPeer;
using iwarp::Rtr;
using iwarp::TermCause;
using iwarp::TermLayer;

constexpr uint32_t kAll =
    kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic;

uint8_t u8(auto v) { return static_cast<uint8_t>(v); }

// Two hosts with a buffer each (all rights) and a link between them.
struct Pair {
  explicit Pair(FakeConnConfig cfg = {}, uint64_t seed = 1)
      : abuf(1 << 20, 0x11), bbuf(1 << 20, 0x22) {
    astag = a.reg(abuf.data(), abuf.size(), kAll);
    bstag = b.reg(bbuf.data(), bbuf.size(), kAll);
    link = std::make_unique<FakeLink>(a.qp.get(), b.qp.get(), cfg, seed);
  }
  void start(Rtr rtr = Rtr::kNone, bool crc = true) {
    auto [ma, mb] = mpa_pair(crc, false, false, rtr);
    link->start(ma, mb);
  }
  uint64_t aaddr(size_t off) const { return reinterpret_cast<uint64_t>(abuf.data()) + off; }
  uint64_t baddr(size_t off) const { return reinterpret_cast<uint64_t>(bbuf.data()) + off; }

  SendWr send(uint64_t id, size_t off, uint32_t len, uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = id, .opcode = WrOpcode::kSend, .flags = flags, .num_sge = 1};
    wr.sg_list[0] = Sge{aaddr(off), len, astag};
    return wr;
  }
  SendWr write(uint64_t id, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey,
               uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = id, .opcode = WrOpcode::kWrite, .flags = flags, .num_sge = 1,
              .remote_addr = raddr, .rkey = rkey};
    wr.sg_list[0] = Sge{aaddr(off), len, astag};
    return wr;
  }
  SendWr read(uint64_t id, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey,
              uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = id, .opcode = WrOpcode::kRead, .flags = flags, .num_sge = 1,
              .remote_addr = raddr, .rkey = rkey};
    wr.sg_list[0] = Sge{aaddr(off), len, astag};
    return wr;
  }
  SendWr fetch_add(uint64_t id, size_t off, uint64_t raddr, uint32_t rkey,
                   uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = id, .opcode = WrOpcode::kAtomicFetchAdd, .flags = flags, .num_sge = 1,
              .remote_addr = raddr, .rkey = rkey, .compare_add = 1};
    wr.sg_list[0] = Sge{aaddr(off), 8, astag};
    return wr;
  }
  static RecvWr recv(uint64_t id, uint64_t addr, uint32_t len, uint32_t stag) {
    RecvWr wr{.wr_id = id, .num_sge = 1};
    wr.sg_list[0] = Sge{addr, len, stag};
    return wr;
  }

  FakeHost a{1}, b{2};
  iwarp::Pd other_pd{99};  // a PD b's QP is not in
  std::vector<uint8_t> abuf, bbuf;
  uint32_t astag, bstag;
  std::unique_ptr<FakeLink> link;
};

// Every completion of a host, by wr_id; a second one for the same WR fails.
std::map<uint64_t, Wc> completions(FakeHost& h) {
  std::map<uint64_t, Wc> out;
  for (auto* cq : {&h.send_cq, &h.recv_cq}) {
    for (const Wc& wc : FakeHost::drain(*cq)) {
      EXPECT_TRUE(out.emplace(wc.wr_id, wc).second) << "wr_id " << wc.wr_id << " completed twice";
    }
  }
  return out;
}

// Expects exactly the WRs in `ids` to have completed: `first` with
// first_status, all others with kWrFlushErr, all with vendor_err.
void expect_flushed(const std::map<uint64_t, Wc>& wcs, const std::vector<uint64_t>& ids,
                    uint64_t first, WcStatus first_status, uint32_t vendor_err) {
  EXPECT_EQ(wcs.size(), ids.size());
  for (uint64_t id : ids) {
    auto it = wcs.find(id);
    if (it == wcs.end()) {
      ADD_FAILURE() << "wr_id " << id << " never completed";
      continue;
    }
    const WcStatus want = id == first ? first_status : WcStatus::kWrFlushErr;
    EXPECT_EQ(it->second.status, want) << "wr_id " << id << ": " << to_string(it->second.status)
                                       << ", want " << to_string(want);
    EXPECT_EQ(it->second.vendor_err, vendor_err) << "wr_id " << id;
  }
}

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
