// Frame buffers of one size, allocated once and handed out from a free
// list; their pages are touched only as buffers are used, so a pool sized
// for the worst case costs what the traffic uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace softrdma::net {

class FramePool {
 public:
  FramePool() = default;
  FramePool(size_t stride, size_t n) { init(stride, n); }
  void init(size_t stride, size_t n) {
    stride_ = stride;
    n_ = n;
    mem_.reset(static_cast<uint8_t*>(::operator new[](stride * n, kAlign)));
    free_.clear();
    free_.reserve(n);
    for (size_t i = n; i-- > 0;) free_.push_back(mem_.get() + i * stride);
  }
  // A buffer (64-byte aligned), or null when all are out.
  template <typename T = uint8_t>
  T* get() {
    if (free_.empty()) return nullptr;
    uint8_t* b = free_.back();
    free_.pop_back();
    return reinterpret_cast<T*>(b);
  }
  void put(void* b) { free_.push_back(static_cast<uint8_t*>(b)); }
  bool owns(const void* p) const {
    auto* b = static_cast<const uint8_t*>(p);
    return b >= mem_.get() && b < mem_.get() + stride_ * n_;
  }
  size_t stride() const { return stride_; }
  size_t available() const { return free_.size(); }

 private:
  static constexpr std::align_val_t kAlign{64};
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete[](p, kAlign); }
  };
  std::unique_ptr<uint8_t[], Free> mem_;
  size_t stride_ = 0, n_ = 0;
  std::vector<uint8_t*> free_;
};

}  // namespace softrdma::net
