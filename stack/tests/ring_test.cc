// Ring: FIFO order across wrap-around and growth, iteration, clear.
#include "stack/common/ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

namespace softrdma {
namespace {

TEST(Ring, KeepsFifoOrderThroughWrapAndGrowth) {
  Ring<int> r;
  std::deque<int> ref;  // the behaviour it replaces
  std::mt19937 rng(7);
  int next = 0;
  for (int step = 0; step < 20000; ++step) {
    // Bursts of pushes and pops, so growth happens while head is mid-array.
    if (rng() % 3 != 0 || ref.empty()) {
      r.push_back(next);
      ref.push_back(next++);
    } else {
      ASSERT_EQ(r.front(), ref.front());
      r.pop_front();
      ref.pop_front();
    }
    ASSERT_EQ(r.size(), ref.size());
    if (step % 997 == 0) {
      size_t i = 0;
      for (int v : r) ASSERT_EQ(v, ref[i++]);
      ASSERT_EQ(i, ref.size());
    }
  }
  while (!ref.empty()) {
    ASSERT_EQ(r.front(), ref.front());
    r.pop_front();
    ref.pop_front();
  }
  EXPECT_TRUE(r.empty());
}

TEST(Ring, GrowsWhenFullAfterWrapping) {
  using V = std::vector<int>;  // not trivially copyable: moved on growth
  Ring<V> r;
  for (int i = 0; i < 16; ++i) r.push_back(V{i});
  for (int i = 0; i < 10; ++i) r.pop_front();  // head at 10
  for (int i = 16; i < 40; ++i) r.push_back(V{i});  // wraps, then grows
  ASSERT_EQ(r.size(), 30u);
  int want = 10;
  for (const V& v : r) EXPECT_EQ(v, V{want++});
  r.front() = V{-1};
  EXPECT_EQ(r[0], V{-1});
  EXPECT_EQ(r[29], V{39});
  r.clear();
  EXPECT_TRUE(r.empty());
  r.push_back(V{1, 2});
  EXPECT_EQ(r.front(), (V{1, 2}));
  EXPECT_EQ(r.size(), 1u);
}

TEST(Ring, EraseIfKeepsTheOthersInOrder) {
  Ring<int> r;
  for (int i = 0; i < 12; ++i) r.push_back(i);
  for (int i = 0; i < 6; ++i) r.pop_front();
  for (int i = 12; i < 24; ++i) r.push_back(i);  // wraps: 6..23 across the end
  r.erase_if([](int v) { return v % 3 == 0; });
  std::vector<int> got(r.begin(), r.end());
  std::vector<int> want;
  for (int i = 6; i < 24; ++i)
    if (i % 3 != 0) want.push_back(i);
  EXPECT_EQ(got, want);
  r.erase_if([](int) { return true; });
  EXPECT_TRUE(r.empty());
  r.push_back(99);  // still usable after emptying
  EXPECT_EQ(r.front(), 99);
}

}  // namespace
}  // namespace softrdma
