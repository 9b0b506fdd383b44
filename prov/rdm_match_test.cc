// RdmMatcher against fi_msg(3) and fi_tagged(3)'s matching rules.
#include "prov/rdm_match.h"

#include <gtest/gtest.h>

namespace softrdma::prov {
namespace {

// Records the matcher hands back: their addresses are all it sees.
int r1, r2, r3, m1, m2, m3;

MsgKey msg(fi_addr_t src, uint64_t tag) { return MsgKey{src, true, tag}; }
MsgKey untagged(fi_addr_t src) { return MsgKey{src, false, 0}; }
RecvSpec trecv(uint64_t tag, uint64_t ignore = 0, fi_addr_t src = FI_ADDR_UNSPEC) {
  return RecvSpec{src, true, tag, ignore};
}
RecvSpec recv(fi_addr_t src = FI_ADDR_UNSPEC) { return RecvSpec{src, false, 0, 0}; }

TEST(RdmMatch, TaggedAndUntaggedNeverMeet) {
  RdmMatcher m;
  m.queue_recv(trecv(0), &r1, false);
  EXPECT_EQ(m.take_recv(untagged(0)), nullptr);
  m.queue_message(untagged(0), &m1);
  EXPECT_EQ(m.take_message(trecv(0, ~0ULL)), nullptr);
  EXPECT_EQ(m.take_message(recv()), &m1);
  EXPECT_EQ(m.take_recv(msg(0, 0)), &r1);
  EXPECT_EQ(m.recvs_posted(), 0U);
  EXPECT_EQ(m.messages_waiting(), 0U);
}

TEST(RdmMatch, IgnoreBitsAreTheOnlyWildcard) {
  const RecvSpec s = trecv(0x1200, 0xFF);
  EXPECT_TRUE(s.accepts(msg(0, 0x12AB)));
  EXPECT_TRUE(s.accepts(msg(0, 0x1200)));
  EXPECT_FALSE(s.accepts(msg(0, 0x13AB)));
  EXPECT_FALSE(s.accepts(msg(0, 0x1001200)));
  EXPECT_TRUE(trecv(0, ~0ULL).accepts(msg(0, 0xDEADBEEFCAFEULL)));
  EXPECT_FALSE(trecv(7).accepts(msg(0, 6)));
}

TEST(RdmMatch, DirectedReceiveTakesOnlyItsSource) {
  EXPECT_TRUE(recv(2).accepts(untagged(2)));
  EXPECT_FALSE(recv(2).accepts(untagged(3)));
  EXPECT_FALSE(recv(2).accepts(untagged(FI_ADDR_NOTAVAIL)));
  EXPECT_TRUE(recv().accepts(untagged(FI_ADDR_NOTAVAIL)));
  EXPECT_FALSE(trecv(5, 0, 1).accepts(msg(2, 5)));
  EXPECT_TRUE(trecv(5, 0, 1).accepts(msg(1, 5)));

  // The first posted receive that accepts a message takes it, whatever
  // came later.
  RdmMatcher m;
  m.queue_recv(trecv(5, 0, 1), &r1, false);
  m.queue_recv(trecv(5), &r2, false);
  EXPECT_EQ(m.take_recv(msg(2, 5)), &r2);
  EXPECT_EQ(m.take_recv(msg(2, 5)), nullptr);
  EXPECT_EQ(m.take_recv(msg(1, 5)), &r1);
}

TEST(RdmMatch, ArrivalAndPostingOrder) {
  RdmMatcher m;
  m.queue_message(msg(1, 9), &m1);
  m.queue_message(msg(2, 9), &m2);
  m.queue_message(msg(1, 9), &m3);
  EXPECT_EQ(m.take_message(trecv(9, 0, 1)), &m1);
  EXPECT_EQ(m.take_message(trecv(9)), &m2);
  EXPECT_EQ(m.take_message(trecv(9)), &m3);
  EXPECT_EQ(m.take_message(trecv(9)), nullptr);

  m.queue_recv(trecv(9), &r1, false);
  m.queue_recv(trecv(9), &r2, false);
  m.queue_recv(trecv(9), &r3, false);
  EXPECT_EQ(m.take_recv(msg(4, 9)), &r1);
  EXPECT_EQ(m.take_recv(msg(4, 9)), &r2);
  EXPECT_EQ(m.take_recv(msg(4, 9)), &r3);
}

TEST(RdmMatch, MultiReceiveStaysUntilRetired) {
  RdmMatcher m;
  m.queue_recv(recv(), &r1, true);
  m.queue_recv(recv(), &r2, false);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.take_recv(untagged(1)), &r1);
  EXPECT_TRUE(m.remove_recv(&r1));
  EXPECT_EQ(m.take_recv(untagged(1)), &r2);
  EXPECT_EQ(m.take_recv(untagged(1)), nullptr);
}

TEST(RdmMatch, CancelTakesOnlyWhatIsPosted) {
  RdmMatcher m;
  m.queue_recv(trecv(1), &r1, false);
  m.queue_recv(trecv(1), &r2, false);
  EXPECT_FALSE(m.remove_recv(&r3));
  EXPECT_TRUE(m.remove_recv(&r1));
  EXPECT_FALSE(m.remove_recv(&r1));
  EXPECT_EQ(m.take_recv(msg(0, 1)), &r2);
}

TEST(RdmMatch, PeekLeavesTheMessage) {
  RdmMatcher m;
  MsgKey k;
  EXPECT_EQ(m.peek(trecv(3), &k), nullptr);
  m.queue_message(msg(6, 0x31), &m1);
  m.queue_message(msg(7, 0x32), &m2);
  EXPECT_EQ(m.peek(trecv(0x30, 0xF, 7), &k), &m2);
  EXPECT_EQ(k.src, 7U);
  EXPECT_EQ(k.tag, 0x32U);
  EXPECT_EQ(m.peek(trecv(0x30, 0xF), &k), &m1);
  EXPECT_EQ(m.messages_waiting(), 2U);
  EXPECT_EQ(m.take_message(trecv(0x30, 0xF)), &m1);
}

TEST(RdmMatch, ClaimReservesForOneContext) {
  RdmMatcher m;
  int ctx_a, ctx_b;
  m.queue_message(msg(1, 4), &m1);
  m.queue_message(msg(1, 4), &m2);
  ASSERT_EQ(m.peek(trecv(4), nullptr), &m1);
  m.claim(&m1, &ctx_a);
  // Hidden from peeks and ordinary receives, which find the next.
  EXPECT_EQ(m.peek(trecv(4), nullptr), &m2);
  EXPECT_EQ(m.take_claimed(&ctx_b), nullptr);
  EXPECT_EQ(m.take_message(trecv(4)), &m2);
  EXPECT_EQ(m.take_message(trecv(4)), nullptr);
  EXPECT_EQ(m.take_claimed(&ctx_a), &m1);
  EXPECT_EQ(m.take_claimed(&ctx_a), nullptr);

  // A null context claims too.
  m.queue_message(untagged(1), &m3);
  m.claim(&m3, nullptr);
  EXPECT_EQ(m.take_message(recv()), nullptr);
  EXPECT_EQ(m.take_claimed(nullptr), &m3);
}

TEST(RdmMatch, DiscardDropsOnlyThatMessage) {
  RdmMatcher m;
  m.queue_message(msg(1, 4), &m1);
  m.queue_message(msg(1, 4), &m2);
  m.remove_message(m.peek(trecv(4), nullptr));
  EXPECT_EQ(m.messages_waiting(), 1U);
  EXPECT_EQ(m.take_message(trecv(4)), &m2);
}

}  // namespace
}  // namespace softrdma::prov
