// Test frames for FrameLink tests: numbered Ethernet frames of the IEEE
// local-experimental type with a payload derived from the number, so every
// octet can be checked on receipt. Frames of other types (a kernel's
// neighbour discovery on a veth) are skipped.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "stack/net/frame_link.h"

namespace softrdma::net::frametest {

inline constexpr uint16_t kTestEtherType = 0x88b5;
inline constexpr uint32_t kMinTestFrame = 60;
using Clock = std::chrono::steady_clock;

inline uint8_t pattern(uint32_t seq, uint32_t i) { return static_cast<uint8_t>(seq * 31 + i * 7); }

inline void fill_test_frame(uint8_t* p, const uint8_t* dst, const uint8_t* src, uint32_t seq,
                            uint32_t len) {
  std::memcpy(p, dst, 6);
  std::memcpy(p + 6, src, 6);
  p[12] = kTestEtherType >> 8;
  p[13] = kTestEtherType & 0xff;
  std::memcpy(p + 14, &seq, 4);
  for (uint32_t i = 18; i < len; ++i) p[i] = pattern(seq, i);
}

inline bool is_test_frame(const uint8_t* p, uint32_t len) {
  return len >= 18 && p[12] == (kTestEtherType >> 8) && p[13] == (kTestEtherType & 0xff);
}

inline uint32_t test_frame_seq(const uint8_t* p) {
  uint32_t seq;
  std::memcpy(&seq, p + 14, 4);
  return seq;
}

inline bool test_frame_intact(const uint8_t* p, uint32_t len) {
  const uint32_t seq = test_frame_seq(p);
  for (uint32_t i = 18; i < len; ++i)
    if (p[i] != pattern(seq, i)) return false;
  return true;
}

inline bool send_test_frame(FrameLink& tx, const uint8_t* dst, uint32_t seq, uint32_t len) {
  void* h = nullptr;
  uint8_t* p = tx.tx_begin(len, &h);
  if (p == nullptr) return false;
  fill_test_frame(p, dst, tx.mac(), seq, len);
  tx.tx_commit(h, len);
  return true;
}

inline bool wait_link_up(FrameLink& a, FrameLink& b, std::chrono::milliseconds bound) {
  const auto end = Clock::now() + bound;
  while (!a.link_up() || !b.link_up()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Drops whatever is queued (and lets a memif client hand its ring buffers
// to the server: a client's ring has none until it first polls).
inline void drain(FrameLink& l) {
  RxFrame f[64];
  for (int n; (n = l.rx_burst(f, 64)) > 0;)
    for (int i = 0; i < n; ++i) l.rx_release(f[i].handle);
}

// Sends count numbered frames of random lengths in [min_len, max_len] from
// tx to rx and checks that all arrive, in order and intact, within bound.
inline ::testing::AssertionResult exchange(FrameLink& tx, FrameLink& rx, int count,
                                           uint32_t min_len, uint32_t max_len,
                                           std::chrono::milliseconds bound, uint32_t seed = 1) {
  drain(rx);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> len_of(min_len, max_len);
  const auto end = Clock::now() + bound;
  int sent = 0, got = 0;
  std::vector<uint32_t> lens(count);
  RxFrame f[64];
  while (got < count) {
    // A window of 32 in flight keeps every ring (memif 1024, af_packet 512)
    // from overflowing, so loss means a bug.
    for (; sent < count && sent - got < 32; ++sent) {
      const uint32_t len = sent == 0 ? max_len : len_of(rng);  // the largest goes first
      lens[sent] = len;
      if (!send_test_frame(tx, rx.mac(), static_cast<uint32_t>(sent), len))
        return ::testing::AssertionFailure() << "tx_begin failed at frame " << sent;
    }
    tx.tx_flush();
    const int n = rx.rx_burst(f, 64);
    for (int i = 0; i < n; ++i) {
      const RxFrame& r = f[i];
      if (is_test_frame(r.data, r.len)) {
        const uint32_t seq = test_frame_seq(r.data);
        if (seq != static_cast<uint32_t>(got) || r.len != lens[got] ||
            !test_frame_intact(r.data, r.len) ||
            std::memcmp(r.data, rx.mac(), 6) != 0 || std::memcmp(r.data + 6, tx.mac(), 6) != 0) {
          rx.rx_release(r.handle);
          for (int k = i + 1; k < n; ++k) rx.rx_release(f[k].handle);
          return ::testing::AssertionFailure()
                 << "frame " << got << ": got seq " << seq << " len " << r.len << " intact "
                 << test_frame_intact(r.data, r.len);
        }
        ++got;
      }
      rx.rx_release(r.handle);
    }
    if (Clock::now() > end)
      return ::testing::AssertionFailure() << "timeout: sent " << sent << " received " << got;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace softrdma::net::frametest
