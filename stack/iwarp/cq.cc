#include "stack/iwarp/cq.h"

#include <algorithm>

namespace softrdma::iwarp {

void Cq::push(const Wc& wc) {
  {
    std::lock_guard g(mu_);
    push_locked(wc);
  }
  if (on_push) on_push();
}

void Cq::push_locked(const Wc& wc) {
  if (count_ < ring_.size() && spill_.empty()) {
    ring_[(head_ + count_) % ring_.size()] = wc;
    ++count_;
  } else {
    overrun_ = true;
    spill_.push_back(wc);
  }
  held_.store(count_ + spill_.size());
}

int Cq::poll(Wc* out, int n) {
  if (held_.load() == 0) return 0;
  std::lock_guard g(mu_);
  int got = 0;
  for (int pass = 0; pass < 2; ++pass) {
    while (got < n && count_ > 0) {
      out[got++] = ring_[head_];
      head_ = (head_ + 1) % ring_.size();
      --count_;
    }
    // Refill the ring from the spill, oldest first, then drain again.
    size_t move = std::min(spill_.size(), ring_.size() - count_);
    for (size_t i = 0; i < move; ++i) ring_[(head_ + count_++) % ring_.size()] = spill_[i];
    spill_.erase(spill_.begin(), spill_.begin() + static_cast<long>(move));
  }
  held_.store(count_ + spill_.size());
  return got;
}

}  // namespace softrdma::iwarp
