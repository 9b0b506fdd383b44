// A lock for critical sections of a few instructions (a completion copied
// in or out of a ring), where a pthread mutex's call and bookkeeping cost
// more than the work. Waiters spin briefly, then yield: on a machine with
// fewer cores than busy threads the holder may be the one descheduled.
#pragma once

#include <atomic>
#include <thread>

namespace softrdma {

class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire)) {
      for (int spins = 0; flag_.test(std::memory_order_relaxed); ++spins) {
        if (spins < 64) {
          __builtin_ia32_pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_;
};

}  // namespace softrdma
