// A FIFO in one growable circular array: the subset of std::deque the
// data path's queues use (push_back, front, pop_front, in-order iteration,
// erase_if) without the deque's per-block allocations. A deque block holds
// 512 bytes, two or three work requests, so posts and completions kept
// allocating and freeing blocks. Capacity doubles when full and is never given
// back: a queue allocates only while it grows to its high-water mark.
// Growing moves the entries: hold no reference into a ring across a push.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>

namespace softrdma {

template <class T>
class Ring {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }

  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (cap_ - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (cap_ - 1)]; }

  void push_back(const T& v) {
    if (n_ == cap_) grow();
    buf_[(head_ + n_) & (cap_ - 1)] = v;
    ++n_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (cap_ - 1);
    --n_;
  }
  void clear() { head_ = n_ = 0; }
  // Removes the entries pred selects; the others keep their order.
  template <class Pred>
  void erase_if(Pred pred) {
    size_t kept = 0;
    for (size_t i = 0; i < n_; ++i) {
      if (pred((*this)[i])) continue;
      if (kept != i) (*this)[kept] = std::move((*this)[i]);
      ++kept;
    }
    n_ = kept;
  }

  template <class R, class V>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iter(R* r, size_t i) : r_(r), i_(i) {}
    V& operator*() const { return (*r_)[i_]; }
    V* operator->() const { return &(*r_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iter& o) const { return i_ == o.i_; }

   private:
    R* r_;
    size_t i_;
  };
  auto begin() { return Iter<Ring, T>(this, 0); }
  auto end() { return Iter<Ring, T>(this, n_); }
  auto begin() const { return Iter<const Ring, const T>(this, 0); }
  auto end() const { return Iter<const Ring, const T>(this, n_); }

 private:
  void grow() {
    const size_t cap = cap_ == 0 ? 16 : cap_ * 2;  // a power of two: masks wrap
    auto buf = std::make_unique<T[]>(cap);
    for (size_t i = 0; i < n_; ++i) buf[i] = std::move((*this)[i]);
    buf_ = std::move(buf);
    cap_ = cap;
    head_ = 0;
  }

  std::unique_ptr<T[]> buf_;
  size_t cap_ = 0, head_ = 0, n_ = 0;
};

}  // namespace softrdma
