// Completion queue: a fixed ring of work completions. When it is full the
// completion that does not fit is kept aside and the CQ reports overrun
// (like an RNIC's CQ overflow async error) instead of dropping silently.
// It has its own small lock, so that an application thread polling it never
// contends for the engine lock with the c1/c3 I/O thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "stack/verbs.h"

namespace softrdma::iwarp {

class Cq {
 public:
  explicit Cq(uint32_t depth) : ring_(depth ? depth : 1) {}

  void push(const Wc& wc);
  // Moves up to n completions into out; returns how many.
  int poll(Wc* out, int n);
  size_t size() const { return held_.load(); }
  uint32_t depth() const { return static_cast<uint32_t>(ring_.size()); }
  // True once a completion did not fit the ring (it is kept, not lost).
  bool overrun() const {
    std::lock_guard g(mu_);
    return overrun_;
  }

  // Called after each push (the provider hangs its wait-object signal here).
  std::function<void()> on_push;
  void* user = nullptr;

 private:
  void push_locked(const Wc& wc);
  mutable std::mutex mu_;
  std::vector<Wc> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<Wc> spill_;  // completions past depth, delivered after the ring
  bool overrun_ = false;
  // count_ + spill_.size(), readable without the lock: an empty CQ is
  // polled on every progress pass, and answers without locking. seq_cst, so
  // a waiter that arms its wakeup and then finds the CQ empty is sure the
  // next push sees it armed (prov/wait.cc).
  std::atomic<size_t> held_{0};
};

}  // namespace softrdma::iwarp
