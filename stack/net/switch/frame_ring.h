// A one-way ring of Ethernet frames in memory shared by the switch and one
// rank: one producer, one consumer, fixed slots. Each side keeps its own
// index privately and trusts nothing the other side wrote: a rank is another
// user's process, so the switch checks every index and length it reads.
//
// Sleeping: a consumer with nothing to do sets `sleeping`, looks once more,
// then waits on its eventfd; a producer that published checks `sleeping`
// after a full fence and kicks the eventfd only then (no syscall while both
// sides are busy).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace softrdma::net::sw {

class FrameRing {
 public:
  // The shared octets a ring of slots x slot_size takes (cache-line aligned).
  static size_t bytes(uint32_t slots, uint32_t slot_size);
  // base: the ring's shared memory, bytes(slots, slot_size) of it; zeroed by
  // whoever created it. slots is a power of two.
  FrameRing(void* base, uint32_t slots, uint32_t slot_size);

  // --- producer ---
  // A slot to fill (in order), or null while the ring is full; *slot names it.
  uint8_t* reserve(uint32_t* slot);
  // Marks a reserved slot filled with len octets and publishes, in order,
  // every filled slot from the oldest one reserved.
  void commit(uint32_t slot, uint32_t len);
  // After publishing: whether the consumer sleeps and must be kicked.
  bool consumer_sleeping() const;
  // Whether the consumer's index makes sense (it is not another user's lie).
  bool consumer_sane() const;

  // --- consumer ---
  // 1 with the oldest frame in *data/*len (valid until pop), 0 when empty,
  // -EPROTO when the producer's index or a length is impossible.
  int peek(const uint8_t** data, uint32_t* len);
  void pop();
  // pop in two steps, for a frame still in use after the next peek: take
  // moves past it and returns its slot, which stays the consumer's until
  // release (slots come free in order, whatever the order of releases).
  uint32_t take();
  void release(uint32_t slot);
  uint32_t slot_of(const uint8_t* data) const {
    return static_cast<uint32_t>((data - data_) / slot_size_);
  }
  // Sets `sleeping` (true) or clears it; after setting, peek once more
  // before waiting.
  void set_sleeping(bool on);

  uint32_t slot_size() const { return slot_size_; }

 private:
  struct Head;
  Head* head_;
  uint32_t* lens_;
  uint8_t* data_;
  uint32_t slots_, slot_size_;
  uint32_t next_ = 0;       // producer: next slot to reserve
  uint32_t published_ = 0;  // producer: slots published
  std::vector<uint32_t> filled_;  // producer: commit lengths waiting their turn (0: not yet)
  uint32_t cons_ = 0;       // consumer: next slot to read
  uint32_t freed_ = 0;      // consumer: slots given back (the shared index)
  std::vector<uint8_t> released_;  // consumer: taken slots released out of turn
};

}  // namespace softrdma::net::sw
