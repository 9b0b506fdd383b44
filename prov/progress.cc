// Progress: the application's calls drive it (FI_PROGRESS_MANUAL), and for
// FI_PROGRESS_AUTO a thread of the core's own does too. Waiting happens in
// the engine without the process lock, so other threads keep posting.
#include <chrono>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

// Without a wait fd (a busy-polled transport: DPDK) the thread naps this
// long when a pass found nothing to do, instead of spinning a core.
constexpr auto kIdleNap = std::chrono::microseconds(100);
// With one, it sleeps on the transport this long at most per pass.
constexpr int kWaitSliceUs = 10000;

}  // namespace

void Core::progress(int timeout_us) {
  if (timeout_us == 0 && !engine_threaded()) {  // the pass and its routing under one take
    std::lock_guard g(mu);
    engine->progress(0);
    route();
    return;
  }
  engine->progress(timeout_us);  // waits, or yields to c1/c3's thread: without the lock
  route();
}

void Core::route() {
  std::lock_guard g(mu);
  dispatch_cm();
  for (Cq* cq : cqs) cq->settle();  // counters count without a CQ reader
}

bool Core::engine_threaded() const { return engine->config().threading != Threading::kC2; }

// The transport's fd is in every wait set (wait.cc) and the auto thread
// feeds them; an engine that progresses itself (an I/O thread, or c2's
// watchdog) pushes completions, which signal CQ wait fds, but only the
// provider turns its CM events into EQ entries.
bool Core::can_block(bool cm) const {
  if (engine->wait_fd() >= 0 || auto_thread.joinable()) return true;
  const EngineConfig& c = engine->config();
  return !cm && (c.threading != Threading::kC2 || c.watchdog_us > 0);
}

// Under mu (domain_open), so two domains asking at once start one thread.
void Core::start_auto_progress() {
  if (auto_thread.joinable()) return;
  auto_thread = std::thread([this] {
    const bool can_wait = engine->wait_fd() >= 0;
    while (!auto_stop.load(std::memory_order_relaxed)) {
      int n = engine->progress(can_wait ? kWaitSliceUs : 0);
      route();
      if (n <= 0 && !can_wait) std::this_thread::sleep_for(kIdleNap);
    }
  });
}

}  // namespace softrdma::prov
