// First light: connect two engines and move a Send, a Write and a Read.
#include <gtest/gtest.h>

#include "stack/tests/loopback.h"

using namespace softrdma;
using namespace softrdma::testing;

TEST(Smoke, SendWriteRead) {
  Pair p;
  ASSERT_TRUE(p.connect({1, 2, 3}, {4, 5}));
  ASSERT_EQ(p.events_b[0].private_data, (std::vector<uint8_t>{1, 2, 3}));
  ASSERT_EQ(p.events_a.back().private_data, (std::vector<uint8_t>{4, 5}));

  std::vector<uint8_t> src = pattern(100000, 1), dst(100000, 0);
  Mr* ms = p.a.reg(src, kAccessLocalWrite | kAccessRemoteRead);
  Mr* md = p.b.reg(dst, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);

  RecvWr rw{.wr_id = 7, .num_sge = 1};
  rw.sg_list[0] = sge(dst, md);
  ASSERT_EQ(p.b.eng->post_recv(p.b.qp, rw), 0);
  SendWr sw{.wr_id = 1, .opcode = WrOpcode::kSend, .num_sge = 1};
  sw.sg_list[0] = sge(src, ms);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, sw), 0);
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == 1 && p.b.wcs.size() == 1; }));
  EXPECT_EQ(p.b.wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(p.b.wcs[0].byte_len, src.size());
  EXPECT_EQ(dst, src);

  std::fill(dst.begin(), dst.end(), 0);
  SendWr ww{.wr_id = 2, .opcode = WrOpcode::kWrite, .num_sge = 1,
            .remote_addr = reinterpret_cast<uint64_t>(dst.data()), .rkey = md->stag};
  ww.sg_list[0] = sge(src, ms);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, ww), 0);
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == 2; }));
  // The Write completes locally when sent; a Read behind it returns its data.
  std::vector<uint8_t> back(100000, 0);
  Mr* mb = p.a.reg(back, kAccessLocalWrite);
  SendWr rd{.wr_id = 3, .opcode = WrOpcode::kRead, .num_sge = 1,
            .remote_addr = reinterpret_cast<uint64_t>(dst.data()), .rkey = md->stag};
  rd.sg_list[0] = sge(back, mb);
  ASSERT_EQ(p.a.eng->post_send(p.a.qp, rd), 0);
  ASSERT_TRUE(p.run([&] { return p.a.wcs.size() == 3; }));
  EXPECT_EQ(p.a.wcs[2].status, WcStatus::kSuccess);
  EXPECT_EQ(p.a.wcs[2].opcode, WcOpcode::kRead);
  EXPECT_EQ(back, src);
  EXPECT_EQ(dst, src);
}
