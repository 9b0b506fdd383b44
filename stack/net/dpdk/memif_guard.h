// A guard against DPDK 22.11 memif unmapping a link's shared rings under a
// burst in progress (see memif_guard.cc). POSIX and ELF only: no DPDK here.
#pragma once

#include <atomic>
#include <cstddef>

namespace softrdma::net::memif_guard {

// Points the loaded memif driver's munmap import at a wrapper that waits
// until no thread is inside a marked burst. Idempotent; false (and the
// driver left as it was) when the driver is not loaded or not patchable.
bool install();
bool installed();

// Waits until no thread is inside a Burst (what the wrapper does first).
void quiesce();

namespace detail {
struct Slot {
  alignas(64) std::atomic<int> in{0};
  int tid = 0;  // for the diagnostic of a wait that lasts
};
Slot& slot();  // this thread's, registered on first use
extern std::atomic<bool> g_asymmetric;  // membarrier() serves the waiter: no fence in bursts
}  // namespace detail

// Marks the calling thread as inside a memif burst for its lifetime.
class Burst {
 public:
  Burst() : s_(detail::slot()) {
    s_.in.store(1, std::memory_order_relaxed);
    // The driver's CONNECTED check must not be read before the mark is
    // visible: membarrier() in the waiter orders it, else a fence here.
    if (detail::g_asymmetric.load(std::memory_order_relaxed)) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  ~Burst() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    s_.in.store(0, std::memory_order_release);
  }
  Burst(const Burst&) = delete;
  Burst& operator=(const Burst&) = delete;

 private:
  detail::Slot& s_;
};

}  // namespace softrdma::net::memif_guard
