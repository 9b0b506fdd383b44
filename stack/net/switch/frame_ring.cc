#include "stack/net/switch/frame_ring.h"

#include <cerrno>

namespace softrdma::net::sw {

struct FrameRing::Head {
  alignas(64) std::atomic<uint32_t> prod;
  alignas(64) std::atomic<uint32_t> cons;
  alignas(64) std::atomic<uint32_t> sleeping;
};

namespace {
constexpr size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }
}  // namespace

size_t FrameRing::bytes(uint32_t slots, uint32_t slot_size) {
  return sizeof(Head) + align64(size_t{slots} * sizeof(uint32_t)) + size_t{slots} * slot_size;
}

FrameRing::FrameRing(void* base, uint32_t slots, uint32_t slot_size)
    : head_(static_cast<Head*>(base)),
      lens_(reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(base) + sizeof(Head))),
      data_(static_cast<uint8_t*>(base) + sizeof(Head) + align64(size_t{slots} * sizeof(uint32_t))),
      slots_(slots),
      slot_size_(slot_size),
      filled_(slots, 0),
      released_(slots, 0) {
  static_assert(std::atomic<uint32_t>::is_always_lock_free);
  // Start where the shared indices are (a ring handed over mid-life).
  next_ = published_ = head_->prod.load(std::memory_order_relaxed);
  cons_ = freed_ = head_->cons.load(std::memory_order_relaxed);
}

uint8_t* FrameRing::reserve(uint32_t* slot) {
  const uint32_t cons = head_->cons.load(std::memory_order_acquire);
  if (next_ - cons >= slots_) return nullptr;  // full (or a lying consumer: stays full)
  *slot = next_++ & (slots_ - 1);
  filled_[*slot] = 0;
  return data_ + size_t{*slot} * slot_size_;
}

void FrameRing::commit(uint32_t slot, uint32_t len) {
  filled_[slot] = len == 0 ? 1 : len;  // a 0-octet frame never comes; keep "filled" non-zero
  bool any = false;
  while (published_ != next_) {
    const uint32_t s = published_ & (slots_ - 1);
    if (filled_[s] == 0) break;
    lens_[s] = filled_[s];
    filled_[s] = 0;
    ++published_;
    any = true;
  }
  if (any) head_->prod.store(published_, std::memory_order_release);
}

bool FrameRing::consumer_sleeping() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return head_->sleeping.load(std::memory_order_relaxed) != 0;
}

bool FrameRing::consumer_sane() const {
  return published_ - head_->cons.load(std::memory_order_relaxed) <= slots_;
}

int FrameRing::peek(const uint8_t** data, uint32_t* len) {
  const uint32_t prod = head_->prod.load(std::memory_order_acquire);
  if (prod == cons_) return 0;
  // Slots taken and not yet released are still ours: a producer index past
  // them (a lying rank) would hand us a frame that is still being sent.
  if (prod - freed_ > slots_ || prod - cons_ > slots_) return -EPROTO;
  const uint32_t s = cons_ & (slots_ - 1);
  const uint32_t l = lens_[s];  // read once: the producer may change it under us
  if (l == 0 || l > slot_size_) return -EPROTO;
  *data = data_ + size_t{s} * slot_size_;
  *len = l;
  return 1;
}

void FrameRing::pop() { release(take()); }

uint32_t FrameRing::take() { return cons_++ & (slots_ - 1); }

void FrameRing::release(uint32_t slot) {
  released_[slot] = 1;
  const uint32_t before = freed_;
  for (uint32_t s; freed_ != cons_ && released_[s = freed_ & (slots_ - 1)]; ++freed_)
    released_[s] = 0;
  if (freed_ != before) head_->cons.store(freed_, std::memory_order_release);
}

void FrameRing::set_sleeping(bool on) {
  head_->sleeping.store(on ? 1 : 0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace softrdma::net::sw
