// c2's watchdog stands in for an application that stops calling progress:
// b's test thread never progresses b, so every RDMA Read that a completes
// was answered by b's watchdog, after b had been busy long enough for the
// watchdog to back off as far as it goes. The bound checks that back-off
// stays bounded (16 periods of 1 ms; with a nap that kept doubling, the
// reads after 1.5 s of polling took 548 ms).
#include <gtest/gtest.h>

#include "stack/tests/loopback.h"

using namespace softrdma;
using namespace softrdma::testing;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kBound = std::chrono::milliseconds(300);

// Reads `remote` (on b) into `local` (on a), progressing only a; returns
// how long the read took, or a negative duration on a timeout.
Clock::duration read_with_b_idle(Pair& p, std::vector<uint8_t>& local, Mr* ml,
                                 std::vector<uint8_t>& remote, Mr* mr, uint64_t id) {
  SendWr r{.wr_id = id, .opcode = WrOpcode::kRead, .num_sge = 1,
           .remote_addr = reinterpret_cast<uint64_t>(remote.data()), .rkey = mr->stag};
  r.sg_list[0] = sge(local, ml);
  const size_t before = p.a.wcs.size();
  const auto t0 = Clock::now();
  if (p.a.eng->post_send(p.a.qp, r) != 0) return Clock::duration(-1);
  const bool done = run_until({p.a.eng.get()}, [&] {
    p.a.reap();
    return p.a.wcs.size() > before;
  }, 5000);
  return done ? Clock::now() - t0 : Clock::duration(-1);
}

TEST(Watchdog, StandsInForAnIdleApplicationAfterABusySpell) {
  EngineConfig cfg;
  ASSERT_EQ(cfg.threading, Threading::kC2);
  cfg.watchdog_us = 1000;
  Pair p(cfg);
  ASSERT_TRUE(p.connect());
  std::vector<uint8_t> remote = pattern(256 << 10, 5), local(remote.size());
  Mr* mr = p.b.reg(remote, kAccessRemoteRead);
  Mr* ml = p.a.reg(local, kAccessLocalWrite);

  for (int round = 0; round < 3; ++round) {
    // Busy: b's application polls for 1.5 s (the watchdog backs off).
    const auto busy_until = Clock::now() + std::chrono::milliseconds(1500);
    ASSERT_TRUE(p.run([&] { return Clock::now() >= busy_until; }, 5000));
    std::fill(local.begin(), local.end(), 0);
    if (round == 2) p.b.eng->expect_idle();  // as fi_trywait does before a sleep
    const Clock::duration took = read_with_b_idle(p, local, ml, remote, mr, 10 + round);
    ASSERT_GE(took.count(), 0) << "round " << round << ": the read never completed";
    EXPECT_LT(took, kBound) << "round " << round << ": "
                            << std::chrono::duration<double, std::milli>(took).count() << " ms";
    const Wc& wc = p.a.wcs.back();
    EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
    EXPECT_EQ(wc.wr_id, uint64_t(10 + round));
    EXPECT_EQ(local, remote) << "round " << round;
  }
}

// With the watchdog off, nothing answers: the same read waits for b.
TEST(Watchdog, WithoutItAnIdlePeerDoesNotAnswer) {
  EngineConfig cfg;
  cfg.watchdog_us = 0;
  Pair p(cfg);
  ASSERT_TRUE(p.connect());
  std::vector<uint8_t> remote = pattern(4096, 6), local(remote.size());
  Mr* mr = p.b.reg(remote, kAccessRemoteRead);
  Mr* ml = p.a.reg(local, kAccessLocalWrite);
  SendWr r{.wr_id = 1, .opcode = WrOpcode::kRead, .num_sge = 1,
           .remote_addr = reinterpret_cast<uint64_t>(remote.data()), .rkey = mr->stag};
  r.sg_list[0] = sge(local, ml);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, r), 0);
  EXPECT_FALSE(run_until({p.a.eng.get()}, [&] { return p.a.reap() > 0; }, 200));
  // Once b progresses, the read completes with b's data.
  ASSERT_TRUE(p.run([&] { return !p.a.wcs.empty(); }, 5000));
  EXPECT_EQ(p.a.wcs.back().status, WcStatus::kSuccess);
  EXPECT_EQ(local, remote);
}

}  // namespace
