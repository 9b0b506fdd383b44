// Two QPs over kernel TCP on 127.0.0.1: every operation from 0 bytes to
// 64 MiB, data verified byte for byte, with CRC on and off and with MPA
// markers, and thousands of operations outstanding at once.
#include <gtest/gtest.h>

#include <numeric>

#include "stack/tests/loopback.h"

using namespace softrdma;
using namespace softrdma::testing;

namespace {

struct Mode {
  bool crc;
  bool markers;
};

class Integration : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    EngineConfig cfg;
    cfg.crc = GetParam().crc;
    cfg.markers = GetParam().markers;
    p_ = std::make_unique<Pair>(cfg, 4096);
    ASSERT_TRUE(p_->connect());
  }
  Pair& p() { return *p_; }

  // Posts wr on a and waits for n completions on a and m on b.
  void run_op(const SendWr& wr, size_t a_done, size_t b_done) {
    ASSERT_EQ(p().a.eng->post_send(p().a.qp, wr), 0);
    ASSERT_TRUE(p().run([&] { return p().a.wcs.size() >= a_done && p().b.wcs.size() >= b_done; }))
        << "timed out: a=" << p().a.wcs.size() << " b=" << p().b.wcs.size();
  }
  static void expect_ok(const Wc& wc, WcOpcode op) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess) << to_string(wc.status);
    EXPECT_EQ(wc.opcode, op) << to_string(wc.opcode);
  }

  std::unique_ptr<Pair> p_;
};

const size_t kSizes[] = {0, 1, 7, 4096, 65536, (1 << 20) + 3, 64u << 20};

TEST_P(Integration, SendAllSizes) {
  for (size_t n : kSizes) {
    std::vector<uint8_t> src = pattern(n, 11), dst(n + 16, 0xee);
    Mr* ms = p().a.reg(src, 0);
    Mr* md = p().b.reg(dst, kAccessLocalWrite);
    RecvWr rw{.wr_id = 100 + n, .num_sge = 1};
    rw.sg_list[0] = sge(dst, md);
    ASSERT_EQ(p().b.eng->post_recv(p().b.qp, rw), 0);
    SendWr sw{.wr_id = n, .opcode = WrOpcode::kSend, .num_sge = 1};
    sw.sg_list[0] = sge(src, ms);
    size_t a0 = p().a.wcs.size(), b0 = p().b.wcs.size();
    run_op(sw, a0 + 1, b0 + 1);
    expect_ok(p().a.wcs[a0], WcOpcode::kSend);
    expect_ok(p().b.wcs[b0], WcOpcode::kRecv);
    EXPECT_EQ(p().b.wcs[b0].wr_id, 100 + n);
    EXPECT_EQ(p().b.wcs[b0].byte_len, n);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "size " << n;
    EXPECT_TRUE(std::all_of(dst.begin() + static_cast<long>(n), dst.end(),
                            [](uint8_t b) { return b == 0xee; }));
  }
}

TEST_P(Integration, WriteAndReadAllSizes) {
  for (size_t n : kSizes) {
    std::vector<uint8_t> src = pattern(n, 22), remote(n, 0), back(n, 0);
    Mr* ms = p().a.reg(src, 0);
    Mr* mb = p().a.reg(back, kAccessLocalWrite);
    Mr* mr = p().b.reg(remote, kAccessRemoteWrite | kAccessRemoteRead);
    SendWr w{.wr_id = 1, .opcode = WrOpcode::kWrite, .num_sge = 1,
             .remote_addr = reinterpret_cast<uint64_t>(remote.data()), .rkey = mr->stag};
    w.sg_list[0] = sge(src, ms);
    size_t a0 = p().a.wcs.size();
    run_op(w, a0 + 1, 0);
    expect_ok(p().a.wcs[a0], WcOpcode::kWrite);
    SendWr r{.wr_id = 2, .opcode = WrOpcode::kRead, .num_sge = 1,
             .remote_addr = reinterpret_cast<uint64_t>(remote.data()), .rkey = mr->stag};
    r.sg_list[0] = sge(back, mb);
    run_op(r, a0 + 2, 0);
    expect_ok(p().a.wcs[a0 + 1], WcOpcode::kRead);
    EXPECT_EQ(p().a.wcs[a0 + 1].byte_len, n);
    EXPECT_EQ(remote, src) << "write, size " << n;
    EXPECT_EQ(back, src) << "read, size " << n;
  }
}

TEST_P(Integration, ReadIntoManySges) {
  std::vector<uint8_t> remote = pattern(300000, 5), back(300000, 0);
  Mr* mr = p().b.reg(remote, kAccessRemoteRead);
  Mr* mb = p().a.reg(back, kAccessLocalWrite);
  SendWr r{.wr_id = 9, .opcode = WrOpcode::kRead, .num_sge = 4,
           .remote_addr = reinterpret_cast<uint64_t>(remote.data()), .rkey = mr->stag};
  const size_t cuts[] = {0, 1, 100000, 299999, 300000};
  for (int i = 0; i < 4; ++i) r.sg_list[i] = sge(back, mb, cuts[i], cuts[i + 1] - cuts[i]);
  run_op(r, 1, 0);
  expect_ok(p().a.wcs[0], WcOpcode::kRead);
  EXPECT_EQ(back, remote);
}

// Verbs complete a send queue in posting order: a Write and a Send posted
// behind a large Read finish transmitting long before the Read's response
// is in, and still complete after it; an atomic behind them likewise waits
// for nothing earlier and completes last. Unsignaled WRs take their place
// in the order without a completion.
TEST_P(Integration, SendQueueCompletesInOrder) {
  constexpr size_t kBig = 8u << 20;
  std::vector<uint8_t> remote = pattern(kBig, 7), back(kBig, 0), small = pattern(4096, 8);
  std::vector<uint8_t> rsink(4096, 0), rbuf(4096, 0), word(8, 0), result(8, 0);
  Mr* mr = p().b.reg(remote, kAccessRemoteRead);
  Mr* mb = p().a.reg(back, kAccessLocalWrite);
  Mr* ms = p().a.reg(small, 0);
  Mr* mrs = p().b.reg(rsink, kAccessRemoteWrite);
  Mr* mrb = p().b.reg(rbuf, kAccessLocalWrite);
  Mr* mw = p().b.reg(word, kAccessRemoteAtomic);
  Mr* mres = p().a.reg(result, kAccessLocalWrite);
  RecvWr rw{.wr_id = 90, .num_sge = 1};
  rw.sg_list[0] = sge(rbuf, mrb);
  ASSERT_EQ(p().b.eng->post_recv(p().b.qp, rw), 0);

  SendWr read{.wr_id = 1, .opcode = WrOpcode::kRead, .num_sge = 1,
              .remote_addr = reinterpret_cast<uint64_t>(remote.data()), .rkey = mr->stag};
  read.sg_list[0] = sge(back, mb);
  SendWr write{.wr_id = 2, .opcode = WrOpcode::kWrite, .num_sge = 1,
               .remote_addr = reinterpret_cast<uint64_t>(rsink.data()), .rkey = mrs->stag};
  write.sg_list[0] = sge(small, ms);
  SendWr quiet = write;  // unsignaled: no completion, but keeps its place
  quiet.wr_id = 3;
  quiet.flags = 0;
  SendWr send{.wr_id = 4, .opcode = WrOpcode::kSend, .num_sge = 1};
  send.sg_list[0] = sge(small, ms);
  SendWr fadd{.wr_id = 5, .opcode = WrOpcode::kAtomicFetchAdd, .num_sge = 1,
              .remote_addr = reinterpret_cast<uint64_t>(word.data()), .rkey = mw->stag,
              .compare_add = 3};
  fadd.sg_list[0] = sge(result, mres);
  for (const SendWr* wr : {&read, &write, &quiet, &send, &fadd})
    ASSERT_EQ(p().a.eng->post_send(p().a.qp, *wr), 0);
  ASSERT_TRUE(p().run([&] { return p().a.wcs.size() >= 4 && p().b.wcs.size() >= 1; }));
  ASSERT_EQ(p().a.wcs.size(), 4u);
  const uint64_t order[] = {1, 2, 4, 5};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p().a.wcs[i].wr_id, order[i]) << "completion " << i;
    EXPECT_EQ(p().a.wcs[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(p().a.wcs[0].byte_len, kBig);
  EXPECT_EQ(back, remote);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), rsink.begin()));
  EXPECT_TRUE(std::equal(small.begin(), small.end(), rbuf.begin()));
}

TEST_P(Integration, ImmediateData) {
  std::vector<uint8_t> src = pattern(5000, 3), remote(5000, 0), rbuf(64, 0);
  Mr* mr = p().b.reg(remote, kAccessRemoteWrite);
  Mr* mrb = p().b.reg(rbuf, kAccessLocalWrite);
  for (int i = 0; i < 2; ++i) {
    RecvWr rw{.wr_id = 50u + static_cast<uint64_t>(i), .num_sge = 1};
    rw.sg_list[0] = sge(rbuf, mrb);
    ASSERT_EQ(p().b.eng->post_recv(p().b.qp, rw), 0);
  }
  SendWr w{.wr_id = 1, .opcode = WrOpcode::kWriteWithImm, .num_sge = 1,
           .remote_addr = reinterpret_cast<uint64_t>(remote.data()), .rkey = mr->stag,
           .imm_data = 0x1122334455667788ull};
  w.sg_list[0] = sge(src, nullptr);
  run_op(w, 1, 1);
  expect_ok(p().a.wcs[0], WcOpcode::kWrite);
  expect_ok(p().b.wcs[0], WcOpcode::kRecvRdmaImm);
  EXPECT_EQ(p().b.wcs[0].wr_id, 50u);
  EXPECT_TRUE(p().b.wcs[0].flags & kWcWithImm);
  EXPECT_EQ(p().b.wcs[0].imm_data, 0x1122334455667788ull);
  EXPECT_EQ(remote, src);  // the Write landed before its Immediate Data completed

  SendWr imm{.wr_id = 2, .opcode = WrOpcode::kImmData, .imm_data = 42};
  run_op(imm, 2, 2);
  expect_ok(p().a.wcs[1], WcOpcode::kImmData);
  EXPECT_EQ(p().b.wcs[1].imm_data, 42u);
  EXPECT_EQ(p().b.wcs[1].wr_id, 51u);
}

TEST_P(Integration, Atomics) {
  alignas(8) uint64_t counter = 1000;
  alignas(8) uint64_t result = 0;
  Mr* mc = p().b.eng->reg_mr(p().b.pd, &counter, 8, kAccessRemoteAtomic);
  Mr* mres = p().a.eng->reg_mr(p().a.pd, &result, 8, kAccessLocalWrite);
  const int kN = 1000;
  for (int i = 0; i < kN; ++i) {
    SendWr fa{.wr_id = static_cast<uint64_t>(i), .opcode = WrOpcode::kAtomicFetchAdd, .num_sge = 1,
              .remote_addr = reinterpret_cast<uint64_t>(&counter), .rkey = mc->stag,
              .compare_add = 3};
    fa.sg_list[0] = Sge{reinterpret_cast<uint64_t>(&result), 8, mres->stag};
    run_op(fa, static_cast<size_t>(i) + 1, 0);
    ASSERT_EQ(result, 1000u + 3u * static_cast<uint64_t>(i));
  }
  EXPECT_EQ(counter, 1000u + 3u * kN);
  // Compare-and-swap: the first matches, the second does not.
  SendWr cas{.wr_id = 7, .opcode = WrOpcode::kAtomicCmpSwap, .num_sge = 1,
             .remote_addr = reinterpret_cast<uint64_t>(&counter), .rkey = mc->stag,
             .compare_add = 1000u + 3u * kN, .swap = 77};
  cas.sg_list[0] = Sge{reinterpret_cast<uint64_t>(&result), 8, mres->stag};
  run_op(cas, kN + 1, 0);
  EXPECT_EQ(counter, 77u);
  EXPECT_EQ(result, 1000u + 3u * kN);
  run_op(cas, kN + 2, 0);
  EXPECT_EQ(counter, 77u);
  EXPECT_EQ(result, 77u);
  expect_ok(p().a.wcs[kN + 1], WcOpcode::kCmpSwap);
}

// RFC 7306's Swap, and the masks that make 32-bit fields of the 64-bit
// word: each op changes only its half, and the response is the whole word.
TEST_P(Integration, SwapAndMaskedAtomics) {
  alignas(8) uint64_t word = 0x00000005FFFFFFFFull;
  alignas(8) uint64_t result = 0;
  Mr* mw = p().b.eng->reg_mr(p().b.pd, &word, 8, kAccessRemoteAtomic);
  Mr* mres = p().a.eng->reg_mr(p().a.pd, &result, 8, kAccessLocalWrite);
  auto op = [&](uint64_t id, SendWr wr) {
    wr.wr_id = id;
    wr.num_sge = 1;
    wr.remote_addr = reinterpret_cast<uint64_t>(&word);
    wr.rkey = mw->stag;
    wr.sg_list[0] = Sge{reinterpret_cast<uint64_t>(&result), 8, mres->stag};
    run_op(wr, id + 1, 0);
  };
  const uint64_t low = 0xFFFFFFFFull, high = low << 32, ends = 1ull << 31 | 1ull << 63;
  // Low half +1 wraps to 0 without carrying into the high half.
  op(0, {.opcode = WrOpcode::kAtomicFetchAdd, .compare_add = 1, .add_mask = ends});
  EXPECT_EQ(result, 0x00000005FFFFFFFFull);
  EXPECT_EQ(word, 0x0000000500000000ull);
  // High half +3.
  op(1, {.opcode = WrOpcode::kAtomicFetchAdd, .compare_add = 3ull << 32, .add_mask = ends});
  EXPECT_EQ(word, 0x0000000800000000ull);
  // Swap of the low half only.
  op(2, {.opcode = WrOpcode::kAtomicSwap, .swap = 0xAAAAAAAA12345678ull, .swap_mask = low});
  EXPECT_EQ(result, 0x0000000800000000ull);
  EXPECT_EQ(word, 0x0000000812345678ull);
  // Compare-swap of the high half: compares and replaces only it.
  op(3, {.opcode = WrOpcode::kAtomicCmpSwap, .compare_add = 8ull << 32, .swap = 9ull << 32,
         .swap_mask = high, .compare_mask = high});
  EXPECT_EQ(word, 0x0000000912345678ull);
  op(4, {.opcode = WrOpcode::kAtomicCmpSwap, .compare_add = 8ull << 32, .swap = 7ull << 32,
         .swap_mask = high, .compare_mask = high});
  EXPECT_EQ(result, 0x0000000912345678ull);
  EXPECT_EQ(word, 0x0000000912345678ull);  // no match: unchanged
  // A full swap.
  op(5, {.opcode = WrOpcode::kAtomicSwap, .swap = 42});
  EXPECT_EQ(result, 0x0000000912345678ull);
  EXPECT_EQ(word, 42u);
  expect_ok(p().a.wcs[5], WcOpcode::kSwap);
}

// Thousands in flight: 4000 sends, 4000 writes and reads posted before any
// progress, completing in order with every byte right.
TEST_P(Integration, ThousandsOutstanding) {
  const int kN = 4000;
  const size_t kLen = 256;
  std::vector<uint8_t> src = pattern(kN * kLen, 9), dst(kN * kLen, 0), remote(kN * kLen, 0),
                       back(kN * kLen, 0);
  Mr* ms = p().a.reg(src, 0);
  Mr* md = p().b.reg(dst, kAccessLocalWrite);
  Mr* mr = p().b.reg(remote, kAccessRemoteWrite | kAccessRemoteRead);
  Mr* mb = p().a.reg(back, kAccessLocalWrite);
  for (int i = 0; i < kN; ++i) {
    RecvWr rw{.wr_id = static_cast<uint64_t>(i), .num_sge = 1};
    rw.sg_list[0] = sge(dst, md, i * kLen, kLen);
    ASSERT_EQ(p().b.eng->post_recv(p().b.qp, rw), 0);
  }
  for (int i = 0; i < kN; ++i) {
    SendWr sw{.wr_id = static_cast<uint64_t>(i), .opcode = WrOpcode::kSend, .num_sge = 1};
    sw.sg_list[0] = sge(src, ms, i * kLen, kLen);
    ASSERT_EQ(p().a.eng->post_send(p().a.qp, sw), 0);
  }
  ASSERT_TRUE(p().run([&] { return p().a.wcs.size() == kN && p().b.wcs.size() == kN; }));
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(p().b.wcs[i].wr_id, static_cast<uint64_t>(i));
    ASSERT_EQ(p().b.wcs[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(dst, src);
  p().a.wcs.clear();
  for (int i = 0; i < kN; ++i) {
    SendWr w{.wr_id = static_cast<uint64_t>(i), .opcode = WrOpcode::kWrite, .num_sge = 1,
             .remote_addr = reinterpret_cast<uint64_t>(remote.data() + i * kLen),
             .rkey = mr->stag};
    w.sg_list[0] = sge(src, ms, i * kLen, kLen);
    ASSERT_EQ(p().a.eng->post_send(p().a.qp, w), 0);
  }
  // A Write completes when sent; its bytes land when the stream delivers them.
  ASSERT_TRUE(p().run([&] { return p().a.wcs.size() == kN && remote == src; }));
  p().a.wcs.clear();
  // Reads are bounded by ORD: the engine queues the rest behind them.
  for (int i = 0; i < kN; ++i) {
    SendWr r{.wr_id = static_cast<uint64_t>(i), .opcode = WrOpcode::kRead, .num_sge = 1,
             .remote_addr = reinterpret_cast<uint64_t>(remote.data() + i * kLen),
             .rkey = mr->stag};
    r.sg_list[0] = sge(back, mb, i * kLen, kLen);
    ASSERT_EQ(p().a.eng->post_send(p().a.qp, r), 0);
  }
  ASSERT_TRUE(p().run([&] { return p().a.wcs.size() == kN; }));
  for (const Wc& wc : p().a.wcs) ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(back, src);
}

// One copy on receive: every payload byte placed was copied exactly once.
TEST_P(Integration, OneCopyOnReceive) {
  std::vector<uint8_t> src = pattern(3 << 20, 4), dst(3 << 20, 0);
  Mr* md = p().b.reg(dst, kAccessLocalWrite | kAccessRemoteWrite);
  SendWr w{.wr_id = 1, .opcode = WrOpcode::kWrite, .num_sge = 1,
           .remote_addr = reinterpret_cast<uint64_t>(dst.data()), .rkey = md->stag};
  w.sg_list[0] = sge(src, nullptr);
  Stats before = p().b.eng->stats();
  run_op(w, 1, 0);
  ASSERT_TRUE(p().run([&] { return dst == src; }));
  Stats after = p().b.eng->stats();
  EXPECT_EQ(after.payload_rx - before.payload_rx, src.size());
  EXPECT_EQ(after.rx_copy_bytes - before.rx_copy_bytes, src.size());
}

INSTANTIATE_TEST_SUITE_P(Modes, Integration,
                         ::testing::Values(Mode{true, false}, Mode{false, false},
                                           Mode{true, true}),
                         [](const ::testing::TestParamInfo<Mode>& mode) {
                           return std::string(mode.param.crc ? "Crc" : "NoCrc") +
                                  (mode.param.markers ? "Markers" : "");
                         });

}  // namespace
