#include "stack/iwarp/unexpected.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace softrdma::iwarp {

void UnexpectedStore::put(const uint8_t* p, size_t n) {
  if (used_ + n > cap_) grow(used_ + n);
  uint64_t at = (head_ + used_) & (cap_ - 1);
  const uint64_t first = std::min<uint64_t>(n, cap_ - at);
  std::memcpy(buf_.get() + at, p, first);
  std::memcpy(buf_.get(), p + first, n - first);
  used_ += n;
  back().len += n;
}

// Only when the high-water mark rises: the contents move to the front.
void UnexpectedStore::grow(uint64_t need) {
  const uint64_t cap = std::bit_ceil(std::max<uint64_t>(need, 4096));
  auto buf = std::make_unique<uint8_t[]>(cap);
  const uint64_t first = std::min(used_, cap_ - head_);
  if (used_) {
    std::memcpy(buf.get(), buf_.get() + head_, first);
    std::memcpy(buf.get() + first, buf_.get(), used_ - first);
  }
  buf_ = std::move(buf);
  cap_ = cap;
  head_ = 0;
}

void UnexpectedStore::take(const Sge* sg, int nsge) {
  uint64_t left = msgs_.front().len;
  for (int i = 0; i < nsge && left > 0; ++i) {
    auto* dst = reinterpret_cast<uint8_t*>(sg[i].addr);
    for (uint64_t n = std::min<uint64_t>(left, sg[i].length); n > 0;) {
      const uint64_t run = std::min(n, cap_ - head_);
      std::memcpy(dst, buf_.get() + head_, run);
      dst += run;
      n -= run;
      left -= run;
      used_ -= run;
      head_ = (head_ + run) & (cap_ - 1);
    }
  }
  msgs_.pop_front();
}

void UnexpectedStore::clear() {
  msgs_.clear();
  head_ = used_ = 0;
}

}  // namespace softrdma::iwarp
