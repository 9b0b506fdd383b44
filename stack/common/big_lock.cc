#include "stack/common/big_lock.h"

#include <pthread.h>

#include <atomic>

namespace softrdma::big_lock {

namespace {

// A flag with C++20 atomic wait rather than a pthread mutex: the lock is
// taken a few times per progress pass, and uncontended this is one exchange
// to lock and one store to unlock (notify makes no system call while nobody
// waits). The holder is known by its pthread id, not by a thread_local: this
// code also lives in a dlopen'ed provider, where TLS is a function call.
std::atomic_flag g_flag;
std::atomic<pthread_t> g_owner{};  // only the holder stores its own id here
uint32_t g_depth = 0;               // under the lock
std::atomic<void (*)()> g_hook{nullptr};

}  // namespace

void lock() {
  const pthread_t me = pthread_self();
  if (g_owner.load(std::memory_order_relaxed) == me) {
    ++g_depth;
    return;
  }
  while (g_flag.test_and_set(std::memory_order_acquire)) g_flag.wait(true, std::memory_order_relaxed);
  g_owner.store(me, std::memory_order_relaxed);
  g_depth = 1;
}

void unlock() {
  if (g_depth > 1) {
    --g_depth;
    return;
  }
  // Still held while the hook runs: what it calls may lock again (nested).
  if (auto* hook = g_hook.load(std::memory_order_relaxed)) hook();
  g_depth = 0;
  g_owner.store(pthread_t{}, std::memory_order_relaxed);
  g_flag.clear(std::memory_order_release);
  g_flag.notify_one();
}

bool held() { return g_owner.load(std::memory_order_relaxed) == pthread_self(); }

void set_release_hook(void (*hook)()) { g_hook.store(hook, std::memory_order_relaxed); }

}  // namespace softrdma::big_lock
