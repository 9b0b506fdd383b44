// big_lock: try_lock takes a free lock, nests on its holder, refuses (without
// waiting) while another thread holds it, and its outermost unlock runs the
// release hook like lock()'s.
#include "stack/common/big_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace softrdma {
namespace {

std::atomic<int> g_hooks{0};

TEST(BigLock, TryLockTakesNestsAndRefusesAnotherThreadsHold) {
  ASSERT_TRUE(big_lock::try_lock());
  EXPECT_TRUE(big_lock::held());
  ASSERT_TRUE(big_lock::try_lock());  // nested on its holder
  big_lock::unlock();
  EXPECT_TRUE(big_lock::held());

  std::atomic<int> other{-1};
  std::thread t([&] {
    const bool got = big_lock::try_lock();
    if (got) big_lock::unlock();
    other = got ? 1 : 0;
  });
  t.join();  // returns at once: try_lock never waits
  EXPECT_EQ(other.load(), 0);

  big_lock::unlock();
  EXPECT_FALSE(big_lock::held());
  std::thread u([&] {
    const bool got = big_lock::try_lock();
    if (got) big_lock::unlock();
    other = got ? 1 : 0;
  });
  u.join();
  EXPECT_EQ(other.load(), 1);
}

TEST(BigLock, TryLockReleaseRunsTheHookOnce) {
  g_hooks = 0;
  big_lock::set_release_hook([] { ++g_hooks; });
  ASSERT_TRUE(big_lock::try_lock());
  big_lock::lock();
  big_lock::unlock();
  EXPECT_EQ(g_hooks.load(), 0);
  big_lock::unlock();
  EXPECT_EQ(g_hooks.load(), 1);
  big_lock::set_release_hook(nullptr);
}

TEST(BigLock, AWaiterGetsTheLockOnceItIsFree) {
  big_lock::lock();
  std::atomic<bool> got{false};
  std::thread t([&] {
    big_lock::lock();
    got = true;
    big_lock::unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load());
  big_lock::unlock();
  t.join();
  EXPECT_TRUE(got.load());
}

}  // namespace
}  // namespace softrdma
