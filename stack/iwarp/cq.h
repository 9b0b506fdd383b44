// Completion queue: a fixed ring of work completions. When it is full the
// completion that does not fit is kept aside and the CQ reports overrun
// (like an RNIC's CQ overflow async error) instead of dropping silently.
// It is guarded by the process lock (big_lock.h), which every pusher (a QP's
// receive or transmit) already holds, so a push only counts a nested take;
// a poll that finds it empty takes no lock at all.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "stack/common/big_lock.h"
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
    big_lock::Guard g;
    return overrun_;
  }

  // For a consumer that must see each completion when it arrives but takes
  // it out later (the libfabric provider counts on arrival and translates on
  // read, with no queue of its own): fn(Wc&) runs under the process lock on
  // every completion not visited yet, oldest first, and may rewrite it.
  template <typename F>
  void visit(F&& fn);
  // Takes out the oldest completion if it has been visited.
  bool pop_visited(Wc* out);
  // The next push writes 1 to the eventfd fd, once. A waiter arms before
  // its last look at the CQ (seq_cst on both sides: either that look sees
  // the completion or the push sees the fd).
  void arm_notify(int fd) { notify_fd_.store(fd); }

 private:
  void push_locked(const Wc& wc);
  void pop_locked(Wc* out);
  size_t slot(size_t i) const {  // ring index of the i-th oldest (i < depth)
    const size_t j = head_ + i;
    return j < ring_.size() ? j : j - ring_.size();
  }
  Wc& at_locked(size_t i) {  // i-th oldest completion
    return i < count_ ? ring_[slot(i)] : spill_[i - count_];
  }
  std::vector<Wc> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  std::deque<Wc> spill_;  // completions past depth, delivered after the ring
  bool overrun_ = false;
  // count_ + spill_.size(), readable without the lock: an empty CQ is
  // polled on every progress pass, and answers without locking. seq_cst, so
  // a waiter that arms its wakeup and then finds the CQ empty is sure the
  // next push sees it armed.
  std::atomic<size_t> held_{0};
  // How many of the newest completions visit() has not seen; written under
  // the lock, read without it for the common nothing-new case.
  std::atomic<size_t> fresh_{0};
  std::atomic<int> notify_fd_{-1};
};

template <typename F>
void Cq::visit(F&& fn) {
  if (fresh_.load() == 0) return;
  big_lock::Guard g;
  const size_t held = count_ + spill_.size();
  for (size_t i = held - fresh_.load(); i < held; ++i) fn(at_locked(i));
  fresh_.store(0);
}

}  // namespace softrdma::iwarp
