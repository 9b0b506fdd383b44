#include "stack/common/big_lock.h"

#include <atomic>

namespace softrdma::big_lock {

namespace {

// A flag with C++20 atomic wait rather than a pthread mutex: uncontended,
// one exchange to lock and one store to unlock, and no system call while
// nobody waits; nested takes (the stack's guards inside an engine's
// critical section) only count (big_lock.h).
std::atomic_flag g_flag;
std::atomic<void (*)()> g_hook{nullptr};

}  // namespace

void detail::acquire() {
  while (g_flag.test_and_set(std::memory_order_acquire)) g_flag.wait(true, std::memory_order_relaxed);
}

bool detail::try_acquire() { return !g_flag.test_and_set(std::memory_order_acquire); }

void detail::release() {
  // Still held while the hook runs: what it calls may lock again (nested).
  ++t_depth;
  if (auto* hook = g_hook.load(std::memory_order_relaxed)) hook();
  --t_depth;
  g_flag.clear(std::memory_order_release);
  g_flag.notify_one();
}

void set_release_hook(void (*hook)()) { g_hook.store(hook, std::memory_order_relaxed); }

}  // namespace softrdma::big_lock
