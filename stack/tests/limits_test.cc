// The engine at its resource limits (issue 6): every limit answers with a
// clear error or back-pressure, the work it accepted completes with correct
// data, and it works again once the resource is free. Never corruption.
//
//   Limits/*          over kernel TCP (Kernel/) and the DPDK path (Dpdk/: two
//                     engines of this process over lwIP; traffic between
//                     them loops inside lwIP, through its pools):
//                     SQ and RQ full, CQ overrun, Reads beyond ORD, more
//                     connections than the transport has (fds / lwIP PCBs)
//   DpdkMbufs.*       the DPDK mbuf pool runs dry: a receiver that does not
//                     consume holds 8 connections' frames from a peer process
//                     (this binary, re-executed) on the memif mesh
//
// The engines run with no watchdog (EngineConfig::watchdog_us = 0): nothing
// moves unless the test calls progress() or posts, so queue occupancy is
// exact when a post is refused.
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "stack/net/dpdk/port.h"
#include "stack/net/lwip/lwip_transport.h"
#include "stack/tests/fd_limit.h"
#include "stack/tests/loopback.h"

namespace softrdma {
namespace {

using testing::loopback;
using testing::pattern;
using testing::run_until;

EngineConfig config_for(const std::string& transport) {
  EngineConfig c;
  c.transport = transport;
  c.watchdog_us = 0;  // nothing moves behind the test's back
  return c;
}

// Registered memory cut into equal slots, slot i filled with pattern(i) (a
// source) or zeros (a sink).
struct Slots {
  std::vector<uint8_t> buf;
  size_t slot;
  Mr* mr = nullptr;
  Slots(Engine& e, Pd* pd, size_t n, size_t slot_len, bool fill, uint32_t access)
      : buf(n * slot_len, 0), slot(slot_len) {
    for (size_t i = 0; fill && i < n; ++i) {
      std::vector<uint8_t> p = pattern(slot_len, static_cast<uint32_t>(i + 1));
      std::copy(p.begin(), p.end(), buf.begin() + static_cast<long>(i * slot_len));
    }
    mr = e.reg_mr(pd, buf.data(), buf.size(), access);
  }
  uint8_t* at(size_t i) { return buf.data() + i * slot; }
  Sge sge(size_t i) { return Sge{reinterpret_cast<uint64_t>(at(i)), static_cast<uint32_t>(slot), mr->stag}; }
  // True if slot i holds pattern(seed).
  bool holds(size_t i, uint32_t seed) {
    std::vector<uint8_t> p = pattern(slot, seed);
    return std::equal(p.begin(), p.end(), at(i));
  }
};

// One engine, its PD, and QPs on CQs of chosen depths.
struct Node {
  std::unique_ptr<Engine> eng;
  Pd* pd;
  explicit Node(const EngineConfig& c) : eng(std::make_unique<Engine>(c)), pd(eng->alloc_pd()) {}
  Qp* qp(Cq* scq, Cq* rcq, uint32_t sq, uint32_t rq, uint16_t ord = 16, uint16_t ird = 16) {
    return eng->create_qp({.pd = pd, .send_cq = scq, .recv_cq = rcq, .sq_depth = sq,
                           .rq_depth = rq, .ord = ord, .ird = ird});
  }
  // Moves every completion of cq into out; returns how many.
  size_t drain(Cq* cq, std::vector<Wc>* out) {
    Wc wc[64];
    size_t got = 0;
    for (int n; (n = eng->poll_cq(cq, wc, 64)) > 0; got += static_cast<size_t>(n))
      out->insert(out->end(), wc, wc + n);
    return got;
  }
};

// Connects qa of a (the initiator) to qb of b through b's listener l.
// Returns 0 once both are established, else the error: Engine::connect's,
// the failing CM event's status, or -ETIME if nothing happened in time.
int connect_pair(Node& a, Qp* qa, Node& b, Listener* l, Qp* qb) {
  if (int rc = a.eng->connect(qa, b.eng->listen_addr(l), nullptr, 0); rc != 0) return rc;
  bool a_up = false, b_up = false;
  int err = 0;
  bool done = run_until({a.eng.get(), b.eng.get()}, [&] {
    CmEvent ev;
    while (b.eng->poll_cm(&ev)) {
      if (ev.type == CmEventType::kConnectRequest) b.eng->accept(ev.req, qb, nullptr, 0);
      b_up |= ev.type == CmEventType::kEstablished && ev.qp == qb;
    }
    while (a.eng->poll_cm(&ev)) {
      if (ev.type == CmEventType::kEstablished) a_up = true;
      else err = ev.status ? ev.status : -ECONNABORTED;
    }
    return err != 0 || (a_up && b_up);
  });
  return err ? err : done ? 0 : -ETIME;
}

// Checks a list of completions: each of the ids exactly once, successful,
// of the given opcode; returns a description of what is wrong, "" if fine.
std::string check_once(const std::vector<Wc>& wcs, const std::vector<uint64_t>& ids, WcOpcode op) {
  std::multiset<uint64_t> seen;
  for (const Wc& wc : wcs) {
    if (wc.status != WcStatus::kSuccess)
      return "wr " + std::to_string(wc.wr_id) + ": " + to_string(wc.status);
    if (wc.opcode != op) return "wr " + std::to_string(wc.wr_id) + ": opcode " + to_string(wc.opcode);
    seen.insert(wc.wr_id);
  }
  if (seen != std::multiset<uint64_t>(ids.begin(), ids.end()))
    return std::to_string(wcs.size()) + " completions for " + std::to_string(ids.size()) + " ids";
  return "";
}

SendWr send_of(uint64_t id, const Sge& s) {
  SendWr wr{.wr_id = id, .opcode = WrOpcode::kSend, .num_sge = 1};
  wr.sg_list[0] = s;
  return wr;
}
RecvWr recv_of(uint64_t id, const Sge& s) {
  RecvWr wr{.wr_id = id, .num_sge = 1};
  wr.sg_list[0] = s;
  return wr;
}

class Limits : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    a_ = std::make_unique<Node>(config_for(GetParam()));
    b_ = std::make_unique<Node>(config_for(GetParam()));
    ASSERT_TRUE(a_->eng->ok() && b_->eng->ok());
    ASSERT_STREQ(a_->eng->transport_name(), GetParam() == "kernel" ? "kernel-tcp" : "dpdk");
    ASSERT_EQ(b_->eng->listen(loopback(0), 64, &l_), 0);
  }
  void TearDown() override {
    if (l_) b_->eng->close_listener(l_);
  }
  bool run(const std::function<bool()>& pred, int ms = 30000) {
    return run_until({a_->eng.get(), b_->eng.get()}, pred, ms);
  }
  Node& a() { return *a_; }
  Node& b() { return *b_; }

  // Sends n messages from qa's slots [first, first + n) into receives
  // posted on qb's slots of the same index (wr_ids = slot index), and waits
  // for every completion on both sides, each checked once; then the data.
  void send_and_check(Qp* qa, Cq* acq, Slots& src, Qp* qb, Cq* bcq, Slots& dst, size_t first,
                      size_t n) {
    std::vector<uint64_t> ids;
    for (size_t i = first; i < first + n; ++i) {
      ASSERT_EQ(b().eng->post_recv(qb, recv_of(i, dst.sge(i))), 0) << "receive " << i;
      ASSERT_EQ(a().eng->post_send(qa, send_of(i, src.sge(i))), 0) << "send " << i;
      ids.push_back(i);
    }
    await_checked(acq, bcq, ids, ids, dst);
  }
  // Waits until acq holds the send completions of send_ids and bcq the
  // receive completions of recv_ids, checks both lists and the received data.
  void await_checked(Cq* acq, Cq* bcq, const std::vector<uint64_t>& send_ids,
                     const std::vector<uint64_t>& recv_ids, Slots& dst) {
    std::vector<Wc> sw, rw;
    ASSERT_TRUE(run([&] {
      a().drain(acq, &sw);
      b().drain(bcq, &rw);
      return sw.size() >= send_ids.size() && rw.size() >= recv_ids.size();
    })) << "sends " << sw.size() << "/" << send_ids.size() << ", receives " << rw.size() << "/"
        << recv_ids.size();
    EXPECT_EQ(check_once(sw, send_ids, WcOpcode::kSend), "");
    EXPECT_EQ(check_once(rw, recv_ids, WcOpcode::kRecv), "");
    for (const Wc& wc : rw) {
      EXPECT_EQ(wc.byte_len, dst.slot);
      EXPECT_TRUE(dst.holds(wc.wr_id, static_cast<uint32_t>(wc.wr_id + 1))) << "slot " << wc.wr_id;
    }
  }

  std::unique_ptr<Node> a_, b_;
  Listener* l_ = nullptr;
};

// SQ depth 64, the receiver not progressing: Sends go out until the
// transport's buffers are full, then wait in the SQ. A post is refused with
// -EAGAIN exactly when 64 WRs are outstanding (posted minus completions the
// engine produced), everything accepted arrives intact, and after the
// completions the SQ takes 64 more.
TEST_P(Limits, SendQueueFull) {
  constexpr uint32_t kDepth = 64;
  constexpr size_t kSlots = 1024, kLen = 64 << 10;  // more than the transport can buffer
  Cq* acq = a().eng->create_cq(4096);
  Cq* bcq = b().eng->create_cq(4096);
  Qp* qa = a().qp(acq, acq, kDepth, 16);
  Qp* qb = b().qp(bcq, bcq, 16, kSlots);
  ASSERT_EQ(connect_pair(a(), qa, b(), l_, qb), 0);
  Slots src(*a().eng, a().pd, kSlots, kLen, true, 0);
  Slots dst(*b().eng, b().pd, kSlots, kLen, false, kAccessLocalWrite);
  for (size_t i = 0; i < kSlots; ++i) ASSERT_EQ(b().eng->post_recv(qb, recv_of(i, dst.sge(i))), 0);

  size_t posted = 0;
  for (;; ++posted) {
    ASSERT_LT(posted, kSlots) << "the SQ never filled";
    const size_t outstanding = posted - acq->size();
    int rc = a().eng->post_send(qa, send_of(posted, src.sge(posted)));
    if (rc == -EAGAIN) {
      EXPECT_EQ(outstanding, kDepth) << "refused at " << posted;
      break;
    }
    ASSERT_EQ(rc, 0);
    ASSERT_LT(outstanding, kDepth) << "accepted beyond the depth at " << posted;
  }
  std::printf("[ limits ] %s: SQ depth %u: post %zu refused (-EAGAIN), %zu sent meanwhile\n",
              GetParam().c_str(), kDepth, posted + 1, acq->size());
  EXPECT_EQ(a().eng->post_send(qa, send_of(posted, src.sge(posted))), -EAGAIN) << "still full";

  std::vector<uint64_t> sent(posted);
  std::iota(sent.begin(), sent.end(), 0);
  ASSERT_NO_FATAL_FAILURE(await_checked(acq, bcq, sent, sent, dst));
  EXPECT_EQ(qa->state(), QpState::kRts);
  // The SQ is empty again: a full depth's worth is accepted at once.
  for (size_t i = posted; i < posted + kDepth; ++i)
    ASSERT_EQ(a().eng->post_send(qa, send_of(i, src.sge(i))), 0) << i;
  std::vector<uint64_t> more(kDepth);
  std::iota(more.begin(), more.end(), posted);
  ASSERT_NO_FATAL_FAILURE(await_checked(acq, bcq, more, more, dst));
}

// RQ depth 64: the 65th receive is refused with -EAGAIN; 64 Sends fill the
// 64 receives with the right data, after which 64 receives fit again.
TEST_P(Limits, RecvQueueFull) {
  constexpr uint32_t kDepth = 64;
  constexpr size_t kLen = 4096;
  Cq* acq = a().eng->create_cq(1024);
  Cq* bcq = b().eng->create_cq(1024);
  Qp* qa = a().qp(acq, acq, 256, 16);
  Qp* qb = b().qp(bcq, bcq, 16, kDepth);
  ASSERT_EQ(connect_pair(a(), qa, b(), l_, qb), 0);
  Slots src(*a().eng, a().pd, 2 * kDepth + 1, kLen, true, 0);
  Slots dst(*b().eng, b().pd, 2 * kDepth + 1, kLen, false, kAccessLocalWrite);
  for (uint32_t round = 0; round < 2; ++round) {
    const size_t first = round * kDepth;
    std::vector<uint64_t> ids;
    for (size_t i = first; i < first + kDepth; ++i) {
      ASSERT_EQ(b().eng->post_recv(qb, recv_of(i, dst.sge(i))), 0) << i;
      ids.push_back(i);
    }
    EXPECT_EQ(b().eng->post_recv(qb, recv_of(999, dst.sge(2 * kDepth))), -EAGAIN)
        << "round " << round << ": a receive beyond the depth";
    for (size_t i = first; i < first + kDepth; ++i)
      ASSERT_EQ(a().eng->post_send(qa, send_of(i, src.sge(i))), 0) << i;
    ASSERT_NO_FATAL_FAILURE(await_checked(acq, bcq, ids, ids, dst));
  }
  EXPECT_TRUE(std::all_of(dst.at(2 * kDepth), dst.at(2 * kDepth) + kLen, [](uint8_t v) { return v == 0; }))
      << "the refused receive's buffer was written";
}

// CQs of depth 8 fed 200 completions each (Sends on one side, receives on
// the other) before anyone polls: both report overrun, and polling yields
// every completion exactly once, in order, with the data in place; the
// CQs go on working afterwards.
TEST_P(Limits, CqOverrun) {
  constexpr uint32_t kCqDepth = 8;
  constexpr size_t kMsgs = 200, kLen = 1000;
  Cq* acq = a().eng->create_cq(kCqDepth);
  Cq* bcq = b().eng->create_cq(kCqDepth);
  Qp* qa = a().qp(acq, acq, 512, 16);
  Qp* qb = b().qp(bcq, bcq, 16, 512);
  ASSERT_EQ(connect_pair(a(), qa, b(), l_, qb), 0);
  Slots src(*a().eng, a().pd, kMsgs + 1, kLen, true, 0);
  Slots dst(*b().eng, b().pd, kMsgs + 1, kLen, false, kAccessLocalWrite);
  EXPECT_FALSE(acq->overrun());
  for (size_t i = 0; i < kMsgs; ++i) {
    ASSERT_EQ(b().eng->post_recv(qb, recv_of(i, dst.sge(i))), 0);
    ASSERT_EQ(a().eng->post_send(qa, send_of(i, src.sge(i))), 0);
  }
  // Nobody polls: the completions pile up past the depth.
  ASSERT_TRUE(run([&] { return acq->size() == kMsgs && bcq->size() == kMsgs; }))
      << acq->size() << " " << bcq->size();
  EXPECT_TRUE(acq->overrun());
  EXPECT_TRUE(bcq->overrun());
  EXPECT_EQ(acq->depth(), kCqDepth);

  std::vector<Wc> sw, rw;
  a().drain(acq, &sw);
  b().drain(bcq, &rw);
  std::vector<uint64_t> ids(kMsgs);
  std::iota(ids.begin(), ids.end(), 0);
  EXPECT_EQ(check_once(sw, ids, WcOpcode::kSend), "");
  EXPECT_EQ(check_once(rw, ids, WcOpcode::kRecv), "");
  for (size_t i = 0; i < sw.size() && i < rw.size(); ++i) {  // in posting order
    EXPECT_EQ(sw[i].wr_id, i);
    EXPECT_EQ(rw[i].wr_id, i);
    EXPECT_TRUE(dst.holds(rw[i].wr_id, static_cast<uint32_t>(rw[i].wr_id + 1))) << i;
  }
  EXPECT_EQ(acq->size(), 0u);
  // Still usable: one more message goes through both CQs.
  ASSERT_NO_FATAL_FAILURE(send_and_check(qa, acq, src, qb, bcq, dst, kMsgs, 1));
}

// ORD: the requester asks for 16, the responder grants IRD 2 (MPA
// negotiation: ORD = min), and 24 Reads are posted at once. The responder
// answers a Read beyond its IRD with a Terminate, so all 24 succeeding with
// no Terminate on either side shows the requester held the excess back.
// Reads waiting for their response count against the SQ depth (24): the
// 25th post is refused with -EAGAIN.
TEST_P(Limits, ReadsBeyondOrd) {
  constexpr uint32_t kDepth = 24;
  constexpr size_t kLen = 100000;
  Cq* acq = a().eng->create_cq(256);
  Cq* bcq = b().eng->create_cq(256);
  Qp* qa = a().qp(acq, acq, kDepth, 16, /*ord=*/16, /*ird=*/16);
  Qp* qb = b().qp(bcq, bcq, 16, 16, /*ord=*/16, /*ird=*/2);
  ASSERT_EQ(connect_pair(a(), qa, b(), l_, qb), 0);
  EXPECT_EQ(qa->mpa().ord, 2);
  Slots remote(*b().eng, b().pd, 2 * kDepth, kLen, true, kAccessRemoteRead);
  Slots local(*a().eng, a().pd, 2 * kDepth, kLen, false, kAccessLocalWrite);
  auto read_of = [&](size_t i) {
    SendWr wr{.wr_id = i, .opcode = WrOpcode::kRead, .num_sge = 1,
              .remote_addr = reinterpret_cast<uint64_t>(remote.at(i)), .rkey = remote.mr->stag};
    wr.sg_list[0] = local.sge(i);
    return wr;
  };
  for (uint32_t round = 0; round < 2; ++round) {
    std::vector<uint64_t> ids;
    for (size_t i = round * kDepth; i < (round + 1) * kDepth; ++i) {
      ASSERT_EQ(a().eng->post_send(qa, read_of(i)), 0) << i;
      ids.push_back(i);
    }
    EXPECT_EQ(a().eng->post_send(qa, read_of(2 * kDepth - 1)), -EAGAIN) << "round " << round;
    std::vector<Wc> wcs;
    ASSERT_TRUE(run([&] { return a().drain(acq, &wcs), wcs.size() >= ids.size(); }))
        << wcs.size() << " of " << ids.size() << " Reads";
    EXPECT_EQ(check_once(wcs, ids, WcOpcode::kRead), "");
    for (size_t k = 0; k < wcs.size(); ++k) {
      EXPECT_EQ(wcs[k].wr_id, ids[k]) << "Reads complete in order";
      EXPECT_TRUE(local.holds(wcs[k].wr_id, static_cast<uint32_t>(wcs[k].wr_id + 1))) << wcs[k].wr_id;
    }
  }
  Stats sa = a().eng->stats(), sb = b().eng->stats();
  EXPECT_EQ(sa.terminates_tx + sa.terminates_rx + sb.terminates_tx + sb.terminates_rx, 0u);
  EXPECT_EQ(qa->state(), QpState::kRts);
  EXPECT_EQ(qb->state(), QpState::kRts);
}

using softrdma::testing::FdLimit;

// More connections than the transport has room for: kernel TCP with the
// process's descriptors capped at 64 connections' worth (two sockets each,
// both ends being in this process), the DPDK path with lwIP's
// MEMP_NUM_TCP_PCB = 16384 PCBs (two per connection). The first connection
// beyond fails with a clear error (-EMFILE / -ENOMEM) at once, every
// established one still carries checked data, and closing one makes room
// for a new one.
TEST_P(Limits, TooManyConnections) {
  const bool kernel = GetParam() == "kernel";
  constexpr size_t kKernelConns = 64;
  std::unique_ptr<FdLimit> cap;
  if (kernel) cap = std::make_unique<FdLimit>(2 * kKernelConns);
  Cq* acq = a().eng->create_cq(4096);
  Cq* bcq = b().eng->create_cq(4096);
  std::vector<std::pair<Qp*, Qp*>> up;
  int err = 0;
  while (up.size() <= 8192) {
    Qp* qa = a().qp(acq, acq, 8, 8);
    Qp* qb = b().qp(bcq, bcq, 8, 8);
    err = connect_pair(a(), qa, b(), l_, qb);
    if (err != 0) {
      a().eng->destroy_qp(qa);
      b().eng->destroy_qp(qb);
      break;
    }
    up.emplace_back(qa, qb);
  }
  std::printf("[ limits ] %s: %zu connections up, the next refused: %s\n", GetParam().c_str(),
              up.size(), std::strerror(-err));
  if (kernel) {
    EXPECT_EQ(up.size(), kKernelConns);
    EXPECT_EQ(err, -EMFILE);
  } else {
    EXPECT_EQ(up.size(), 8192u);  // 16384 PCBs, two per in-process connection
    EXPECT_EQ(err, -ENOMEM);
  }

  // Every established connection still works: one checked message each.
  const size_t n = up.size();
  ASSERT_GT(n, 0u);
  Slots src(*a().eng, a().pd, n + 1, 256, true, 0);
  Slots dst(*b().eng, b().pd, n + 1, 256, false, kAccessLocalWrite);
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(b().eng->post_recv(up[i].second, recv_of(i, dst.sge(i))), 0);
    ASSERT_EQ(a().eng->post_send(up[i].first, send_of(i, src.sge(i))), 0);
    ids.push_back(i);
  }
  ASSERT_NO_FATAL_FAILURE(await_checked(acq, bcq, ids, ids, dst));
  for (auto& [qa, qb] : up) EXPECT_TRUE(qa->state() == QpState::kRts && qb->state() == QpState::kRts);

  // Closing one makes room (under the same cap): a new connection carries data.
  a().eng->destroy_qp(up.back().first);
  b().eng->destroy_qp(up.back().second);
  Qp* qa = a().qp(acq, acq, 8, 8);
  Qp* qb = b().qp(bcq, bcq, 8, 8);
  ASSERT_EQ(connect_pair(a(), qa, b(), l_, qb), 0);
  ASSERT_NO_FATAL_FAILURE(send_and_check(qa, acq, src, qb, bcq, dst, n, 1));
}

// Kernel TCP out of descriptors on the accepting side only: the listener
// spends its reserve descriptor to take the pending connection and close
// it, so the connecting side fails within a second instead of waiting out
// the MPA timeout (20 s) while the listener's readable fd spins progress.
// (lwIP holds no descriptor per connection: kernel TCP only.)
using KernelLimits = Limits;
TEST_P(KernelLimits, AcceptWithoutDescriptorsFailsFast) {
  Cq* acq = a().eng->create_cq(16);
  Cq* bcq = b().eng->create_cq(16);
  Qp* qa = a().qp(acq, acq, 8, 8);
  Qp* qb = b().qp(bcq, bcq, 8, 8);
  int err = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    FdLimit cap(1);  // the connecting socket takes the last one
    err = connect_pair(a(), qa, b(), l_, qb);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ limits ] accept without descriptors: %s after %.3f s\n", std::strerror(-err), secs);
  EXPECT_NE(err, 0);
  EXPECT_NE(err, -ETIMEDOUT);
  EXPECT_LT(secs, 1.0);
  // With descriptors again, the same pair of engines connects and carries data.
  a().eng->destroy_qp(qa);
  b().eng->destroy_qp(qb);
  qa = a().qp(acq, acq, 8, 8);
  qb = b().qp(bcq, bcq, 8, 8);
  ASSERT_EQ(connect_pair(a(), qa, b(), l_, qb), 0);
  Slots src(*a().eng, a().pd, 1, 256, true, 0);
  Slots dst(*b().eng, b().pd, 1, 256, false, kAccessLocalWrite);
  ASSERT_NO_FATAL_FAILURE(send_and_check(qa, acq, src, qb, bcq, dst, 0, 1));
}

INSTANTIATE_TEST_SUITE_P(Kernel, Limits, ::testing::Values("kernel"));
INSTANTIATE_TEST_SUITE_P(Dpdk, Limits, ::testing::Values("dpdk"));
INSTANTIATE_TEST_SUITE_P(Kernel, KernelLimits, ::testing::Values("kernel"));

// --- DPDK mbuf pool ---------------------------------------------------

constexpr int kPeerConns = 8;
constexpr size_t kPeerRegion = 4 << 20;  // per connection
constexpr size_t kChunk = 256 << 10;     // one RDMA Write / Read
constexpr uint32_t kSmallPool = 256;     // mbufs: fewer than the 512 a link may queue

struct PeerInfo {
  uint16_t port;
  uint64_t addr;
  uint32_t stag;
};

bool read_full(int fd, void* p, size_t n, int timeout_ms) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    ssize_t r = ::read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The peer process: connects kPeerConns QPs to the parent's listener,
// waits for 'g', RDMA-Writes slot i of its pattern source to slot i of the
// parent's region (kPeerRegion per connection, in kChunk Writes), and says
// how that went (one byte, 0: every Write completed successfully); then
// keeps progressing (the link must stay served) until 'q'.
int peer_main(int fd) {
  PeerInfo info{};
  if (!read_full(fd, &info, sizeof(info), 30000)) return 2;
  Node n(config_for("dpdk"));
  if (!n.eng->ok()) return 3;
  Cq* cq = n.eng->create_cq(4096);
  std::vector<Qp*> qps;
  for (int i = 0; i < kPeerConns; ++i) {
    qps.push_back(n.qp(cq, cq, 64, 16));
    if (n.eng->connect(qps.back(), loopback(info.port), nullptr, 0) != 0) return 4;
  }
  int up = 0;
  if (!run_until({n.eng.get()}, [&] {
        CmEvent ev;
        while (n.eng->poll_cm(&ev)) up += ev.type == CmEventType::kEstablished;
        return up == kPeerConns;
      }))
    return 5;
  constexpr size_t kPerConn = kPeerRegion / kChunk;
  Slots src(*n.eng, n.pd, kPeerConns * kPerConn, kChunk, true, 0);
  char go = 0;
  if (!read_full(fd, &go, 1, 30000) || go != 'g') return 6;
  for (size_t i = 0; i < kPeerConns * kPerConn; ++i) {
    SendWr wr{.wr_id = i, .opcode = WrOpcode::kWrite, .num_sge = 1,
              .remote_addr = info.addr + i * kChunk, .rkey = info.stag};
    wr.sg_list[0] = src.sge(i);
    if (n.eng->post_send(qps[i / kPerConn], wr) != 0) return 7;
  }
  std::vector<Wc> wcs;
  bool done = run_until({n.eng.get()}, [&] {
    return n.drain(cq, &wcs), wcs.size() >= kPeerConns * kPerConn;
  }, 60000);
  uint8_t verdict = done && std::all_of(wcs.begin(), wcs.end(), [](const Wc& w) {
                      return w.status == WcStatus::kSuccess;
                    }) ? 0 : 1;
  if (::write(fd, &verdict, 1) != 1) return 8;
  char quit = 0;
  run_until({n.eng.get()}, [&] {
    pollfd pfd{fd, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 1 && ::read(fd, &quit, 1) >= 0;
  }, 60000);
  for (Qp* q : qps) verdict |= q->state() != QpState::kRts;
  return verdict;
}

// Starts this binary again as the peer; returns its pid and our end of a
// socketpair in *fd.
pid_t spawn_peer(int* fd) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  pid_t pid = ::fork();
  if (pid == 0) {  // exec at once: this process may have started DPDK
    std::string arg = "--limits-peer=" + std::to_string(::dup(sv[1]));
    ::execl(self.c_str(), self.c_str(), arg.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(sv[1]);
  *fd = sv[0];
  return pid;
}

int wait_child(pid_t pid, int timeout_ms) {
  int status = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// An engine that does not progress: this process holds 8 connections from
// a peer process (over the memif mesh) on engine `r`, which it never
// progresses while the peer writes, and engine `d` (no connections) keeps
// running the process's one pass. That pass hands r's bytes to r's QPs as
// it takes them in (one pass serves every engine of the process), so with
// a pool of 256 mbufs, fewer than one connection's window of frames, every
// Write lands (the region is checked against the peer's patterns), the
// peer's Writes all complete, no connection fails, and the pool returns to
// its idle level: nothing waits in lwIP for r.
TEST(DpdkMbufs, IdleEngineIsServedByTheProcessPass) {
  ASSERT_EQ(::setenv("FI_SOFTRDMA_MBUFS", std::to_string(kSmallPool).c_str(), 1), 0);
  Node r(config_for("dpdk")), d(config_for("dpdk"));
  ASSERT_TRUE(r.eng->ok() && d.eng->ok());
  ASSERT_EQ(net::dpdk_mbuf_pool_info().size, kSmallPool) << "the pool predates FI_SOFTRDMA_MBUFS";
  Listener* l = nullptr;
  ASSERT_EQ(r.eng->listen(loopback(0), 64, &l), 0);
  constexpr size_t kPerConn = kPeerRegion / kChunk;
  Slots region(*r.eng, r.pd, kPeerConns * kPerConn, kChunk, false,
               kAccessLocalWrite | kAccessRemoteWrite);
  Cq* cq = r.eng->create_cq(1024);

  int fd = -1;
  pid_t peer = spawn_peer(&fd);
  ASSERT_GT(peer, 0);
  struct Reap {  // the peer never outlives the test
    pid_t pid;
    ~Reap() {
      if (pid > 0 && wait_child(pid, 100) < 0) std::fprintf(stderr, "peer killed\n");
    }
  } reap{peer};
  PeerInfo info;
  std::memset(&info, 0, sizeof(info));  // padding too: it crosses the pipe
  info.port = ntohs(r.eng->listen_addr(l).sin_port);
  info.addr = reinterpret_cast<uint64_t>(region.at(0));
  info.stag = region.mr->stag;
  ASSERT_EQ(::write(fd, &info, sizeof(info)), static_cast<ssize_t>(sizeof(info)));
  std::vector<Qp*> qps;
  size_t up = 0;
  ASSERT_TRUE(run_until({r.eng.get()}, [&] {
    CmEvent ev;
    while (r.eng->poll_cm(&ev)) {
      if (ev.type == CmEventType::kConnectRequest) {
        qps.push_back(r.qp(cq, cq, 16, 16));
        r.eng->accept(ev.req, qps.back(), nullptr, 0);
      }
      up += ev.type == CmEventType::kEstablished;
    }
    return up == kPeerConns;
  }));
  run_until({r.eng.get()}, [] { return false; }, 50);  // handshake frames come home
  const uint32_t idle = net::dpdk_mbuf_pool_info().available;
  const net::LwipCounters c0 = net::LwipStack::get().counters();

  ASSERT_EQ(::write(fd, "g", 1), 1);
  // Only d runs until the peer's Writes have completed and every one landed.
  uint32_t lowest = idle;
  uint64_t held = 0;
  uint8_t verdict = 0xff;
  bool placed = false;
  ASSERT_TRUE(run_until({d.eng.get()}, [&] {
    lowest = std::min(lowest, net::dpdk_mbuf_pool_info().available);
    held = std::max(held, net::LwipStack::get().counters().rx_frames_held);
    pollfd pfd{fd, POLLIN, 0};
    if (verdict == 0xff && ::poll(&pfd, 1, 0) == 1 && ::read(fd, &verdict, 1) != 1) verdict = 0xfe;
    if (verdict == 0 && !placed) {
      placed = true;
      for (size_t i = 0; i < region.buf.size() / kChunk && placed; ++i)
        placed = region.holds(i, static_cast<uint32_t>(i + 1));
    }
    return verdict != 0xff && (verdict != 0 || placed);
  }, 60000)) << "the peer's Writes did not complete while only another engine ran";
  const net::LwipCounters c1 = net::LwipStack::get().counters();
  std::printf("[ limits ] mbuf pool %u: idle %u available, lowest %u while r stood still; "
              "at most %llu frames held by lwIP, %llu frames not sent for want of an mbuf\n",
              kSmallPool, idle, lowest, static_cast<unsigned long long>(held),
              static_cast<unsigned long long>(c1.tx_no_buffer - c0.tx_no_buffer));
  EXPECT_EQ(verdict, 0) << "a Write failed at the peer";
  EXPECT_TRUE(placed);
  std::vector<Wc> wcs;
  r.drain(cq, &wcs);
  EXPECT_TRUE(wcs.empty()) << "unexpected completion, status " << to_string(wcs[0].status);
  for (Qp* q : qps) EXPECT_EQ(q->state(), QpState::kRts);
  // Every mbuf comes home.
  EXPECT_TRUE(run_until({r.eng.get(), d.eng.get()},
                        [&] { return net::dpdk_mbuf_pool_info().available >= idle; }, 5000))
      << net::dpdk_mbuf_pool_info().available << " of " << idle;
  EXPECT_EQ(net::LwipStack::get().counters().rx_frames_held, 0u);

  ASSERT_EQ(::write(fd, "q", 1), 1);
  EXPECT_EQ(wait_child(peer, 10000), 0) << "the peer saw an error";
  reap.pid = -1;
  ::close(fd);
}

}  // namespace
}  // namespace softrdma

// googletest, or the peer of DpdkMbufs (--limits-peer=<fd>).
int main(int argc, char** argv) {
  if (argc == 2 && std::strncmp(argv[1], "--limits-peer=", 14) == 0)
    return softrdma::peer_main(std::atoi(argv[1] + 14));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
