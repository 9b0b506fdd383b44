// FrameRing: frames arrive in order; slots the consumer takes and releases
// out of order come free to the producer only in order, and never before
// their release; an impossible index from the other side is refused.
#include "stack/net/switch/frame_ring.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace softrdma::net::sw {
namespace {

constexpr uint32_t kSlots = 8, kSize = 256;

struct Rings {
  std::vector<uint8_t> mem = std::vector<uint8_t>(FrameRing::bytes(kSlots, kSize) + 64);
  void* base() {
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t{63});
  }
  FrameRing prod{base(), kSlots, kSize};
  FrameRing cons{base(), kSlots, kSize};
};

void put(FrameRing& r, uint8_t tag, uint32_t len) {
  uint32_t slot;
  uint8_t* p = r.reserve(&slot);
  ASSERT_NE(p, nullptr);
  std::memset(p, tag, len);
  r.commit(slot, len);
}

uint32_t fill(FrameRing& r) {
  uint32_t n = 0, slot;
  for (uint8_t* p; (p = r.reserve(&slot)) != nullptr; ++n) {
    *p = static_cast<uint8_t>(n);
    r.commit(slot, 1);
  }
  return n;
}

TEST(FrameRing, FramesArriveInOrderWithTheirLengths) {
  Rings r;
  for (uint8_t i = 1; i <= 5; ++i) put(r.prod, i, 10u * i);
  for (uint8_t i = 1; i <= 5; ++i) {
    const uint8_t* d;
    uint32_t len;
    ASSERT_EQ(r.cons.peek(&d, &len), 1);
    EXPECT_EQ(len, 10u * i);
    EXPECT_EQ(d[0], i);
    EXPECT_EQ(d[len - 1], i);
    r.cons.pop();
  }
  const uint8_t* d;
  uint32_t len;
  EXPECT_EQ(r.cons.peek(&d, &len), 0);
}

TEST(FrameRing, TakenSlotsComeFreeOnlyInOrderOfTheRing) {
  Rings r;
  ASSERT_EQ(fill(r.prod), kSlots);
  std::vector<uint32_t> taken;
  for (uint32_t i = 0; i < 3; ++i) {
    const uint8_t* d;
    uint32_t len;
    ASSERT_EQ(r.cons.peek(&d, &len), 1);
    EXPECT_EQ(d[0], i);  // take moves on: the next peek sees the next frame
    EXPECT_EQ(r.cons.slot_of(d), i);
    taken.push_back(r.cons.take());
  }
  EXPECT_EQ(fill(r.prod), 0u) << "taken slots are still the consumer's";
  r.cons.release(taken[2]);
  r.cons.release(taken[1]);
  EXPECT_EQ(fill(r.prod), 0u) << "the oldest taken slot holds the others back";
  r.cons.release(taken[0]);
  EXPECT_EQ(fill(r.prod), 3u) << "all three come free together";
}

TEST(FrameRing, PopBehindTakenSlotsWaitsForThem) {
  Rings r;
  ASSERT_EQ(fill(r.prod), kSlots);
  const uint32_t held = r.cons.take();
  r.cons.pop();  // a refused frame, dropped behind one still lent
  EXPECT_EQ(fill(r.prod), 0u);
  r.cons.release(held);
  EXPECT_EQ(fill(r.prod), 2u);
}

TEST(FrameRing, AnImpossibleProducerIndexIsRefused) {
  Rings r;
  put(r.prod, 1, 4);
  // The other side writes a producer index past a full ring.
  auto* prod = reinterpret_cast<uint32_t*>(r.base());
  *prod = kSlots + 5;
  const uint8_t* d;
  uint32_t len;
  EXPECT_EQ(r.cons.peek(&d, &len), -EPROTO);
}

TEST(FrameRing, AProducerIndexOverSlotsStillTakenIsRefused) {
  Rings r;
  ASSERT_EQ(fill(r.prod), kSlots);
  r.cons.take();  // lent, not released
  const uint8_t* d;
  uint32_t len;
  ASSERT_EQ(r.cons.peek(&d, &len), 1);
  // One frame past the ring from the consumer's read index, but over the
  // slot it still holds.
  *reinterpret_cast<uint32_t*>(r.base()) = kSlots + 1;
  EXPECT_EQ(r.cons.peek(&d, &len), -EPROTO);
}

}  // namespace
}  // namespace softrdma::net::sw
