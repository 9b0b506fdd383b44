#include "stack/iwarp/cq.h"

#include <unistd.h>

#include <algorithm>

namespace softrdma::iwarp {

void Cq::push(const Wc& wc) {
  {
    big_lock::Guard g;
    push_locked(wc);
  }
  if (notify_fd_.load() < 0) return;
  if (int fd = notify_fd_.exchange(-1); fd >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
  }
}

void Cq::push_locked(const Wc& wc) {
  if (count_ < ring_.size() && spill_.empty()) {
    ring_[slot(count_)] = wc;
    ++count_;
  } else {
    overrun_ = true;
    spill_.push_back(wc);
  }
  // Written under the lock: only held_ needs seq_cst (the wakeup handshake).
  fresh_.store(fresh_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  held_.store(count_ + spill_.size());
}

// The ring's head goes out; the spill's oldest, if any, takes the freed slot.
void Cq::pop_locked(Wc* out) {
  *out = ring_[head_];
  if (++head_ == ring_.size()) head_ = 0;
  --count_;
  if (!spill_.empty()) {
    ring_[slot(count_++)] = spill_.front();
    spill_.pop_front();
  }
  // A pop wakes nobody: release suffices (a plain store on x86).
  const size_t held = count_ + spill_.size();
  held_.store(held, std::memory_order_release);
  const size_t fresh = fresh_.load(std::memory_order_relaxed);
  if (fresh > held) fresh_.store(held, std::memory_order_release);  // the unvisited are the newest
}

int Cq::poll(Wc* out, int n) {
  if (held_.load() == 0) return 0;
  big_lock::Guard g;
  int got = 0;
  while (got < n && count_ > 0) pop_locked(&out[got++]);
  return got;
}

bool Cq::pop_visited(Wc* out) {
  if (held_.load() == 0) return false;
  big_lock::Guard g;
  if (count_ == 0 || count_ + spill_.size() == fresh_.load()) return false;
  pop_locked(out);
  return true;
}

}  // namespace softrdma::iwarp
