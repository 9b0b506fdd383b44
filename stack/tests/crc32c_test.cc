#include "stack/common/crc32c.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace softrdma {
namespace {

// RFC 3720 §B.4 lists each CRC as the four octets sent on the wire, which are
// the little-endian encoding of the computed value.
uint32_t wire_crc(uint8_t b0, uint8_t b1, uint8_t b2, uint8_t b3) {
  return uint32_t{b0} | (uint32_t{b1} << 8) | (uint32_t{b2} << 16) | (uint32_t{b3} << 24);
}

using Update = uint32_t (*)(uint32_t, const void*, size_t);

// Every entry point that must agree with the RFC vectors on this machine.
std::vector<std::pair<const char*, Update>> implementations() {
  std::vector<std::pair<const char*, Update>> impls = {{"dispatch", &crc32c_update},
                                                       {"sw", &crc32c_update_sw}};
  if (crc32c_hw_available()) impls.emplace_back("hw", &crc32c_update_hw);
  if (crc32c_clmul_available()) impls.emplace_back("clmul", &crc32c_update_clmul);
  return impls;
}

void expect_vector(const uint8_t* data, size_t len, uint32_t expected) {
  EXPECT_EQ(crc32c(data, len), expected);
  for (const auto& [name, update] : implementations()) {
    EXPECT_EQ(crc32c_final(update(kCrc32cInit, data, len)), expected) << name;
  }
}

TEST(Crc32cTest, Rfc3720ThirtyTwoZeroes) {
  std::array<uint8_t, 32> data{};
  EXPECT_EQ(wire_crc(0xaa, 0x36, 0x91, 0x8a), 0x8a9136aau);
  expect_vector(data.data(), data.size(), wire_crc(0xaa, 0x36, 0x91, 0x8a));
}

TEST(Crc32cTest, Rfc3720ThirtyTwoOnes) {
  std::array<uint8_t, 32> data;
  data.fill(0xff);
  expect_vector(data.data(), data.size(), wire_crc(0x43, 0xab, 0xa8, 0x62));
}

TEST(Crc32cTest, Rfc3720Incrementing) {
  std::array<uint8_t, 32> data;
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  expect_vector(data.data(), data.size(), wire_crc(0x4e, 0x79, 0xdd, 0x46));
}

TEST(Crc32cTest, Rfc3720Decrementing) {
  std::array<uint8_t, 32> data;
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(31 - i);
  expect_vector(data.data(), data.size(), wire_crc(0x5c, 0xdb, 0x3f, 0x11));
}

TEST(Crc32cTest, Rfc3720IscsiRead10CommandPdu) {
  constexpr uint8_t kPdu[48] = {
      0x01, 0xc0, 0x00, 0x00,  //
      0x00, 0x00, 0x00, 0x00,  //
      0x00, 0x00, 0x00, 0x00,  //
      0x00, 0x00, 0x00, 0x00,  //
      0x14, 0x00, 0x00, 0x00,  //
      0x00, 0x00, 0x04, 0x00,  //
      0x00, 0x00, 0x00, 0x14,  //
      0x00, 0x00, 0x00, 0x18,  //
      0x28, 0x00, 0x00, 0x00,  //
      0x00, 0x00, 0x00, 0x00,  //
      0x02, 0x00, 0x00, 0x00,  //
      0x00, 0x00, 0x00, 0x00,  //
  };
  expect_vector(kPdu, sizeof(kPdu), wire_crc(0x56, 0x3a, 0x96, 0xd9));
}

TEST(Crc32cTest, CheckValue) {
  static constexpr char kCheck[] = "123456789";
  expect_vector(reinterpret_cast<const uint8_t*>(kCheck), 9, 0xE3069283u);
}

TEST(Crc32cTest, EmptyInputLeavesStateUnchanged) {
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  for (const auto& [name, update] : implementations()) {
    EXPECT_EQ(update(0x12345678u, nullptr, 0), 0x12345678u) << name;
  }
}

// Bit-at-a-time reference, independent of both optimized paths.
uint32_t reference_update(uint32_t crc, const uint8_t* p, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
  }
  return crc;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32cTest, HwMatchesSwForEveryLengthAndMisalignment) {
  if (!crc32c_hw_available()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  const std::vector<uint8_t> buf = random_bytes(300 + 16, 1);
  std::mt19937 rng(2);
  for (size_t len = 0; len <= 300; ++len) {
    for (size_t offset = 0; offset < 16; ++offset) {
      const uint8_t* p = buf.data() + offset;
      const uint32_t seed = (offset & 1) ? kCrc32cInit : static_cast<uint32_t>(rng());
      const uint32_t sw = crc32c_update_sw(seed, p, len);
      ASSERT_EQ(crc32c_update_hw(seed, p, len), sw) << "len " << len << " offset " << offset;
      ASSERT_EQ(reference_update(seed, p, len), sw) << "len " << len << " offset " << offset;
    }
  }
}

// Lengths around the 3-lane round boundaries of the hardware path (192 B,
// 768 B and 24 KiB rounds), where the lane-merge arithmetic is exercised.
TEST(Crc32cTest, HwMatchesSwAcrossInterleaveBoundaries) {
  if (!crc32c_hw_available()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  const std::vector<uint8_t> buf = random_bytes(3 * 24576 + 64, 3);
  for (size_t base : {192u, 384u, 768u, 960u, 1536u, 24576u, 24576u + 960u, 3 * 24576u}) {
    for (size_t len = base - 9; len <= base + 9; ++len) {
      for (size_t offset : {0u, 1u, 5u, 8u}) {
        const uint8_t* p = buf.data() + offset;
        ASSERT_EQ(crc32c_update_hw(kCrc32cInit, p, len), crc32c_update_sw(kCrc32cInit, p, len))
            << "len " << len << " offset " << offset;
      }
    }
  }
  EXPECT_EQ(crc32c_update_sw(0xdeadbeefu, buf.data(), 24576 + 768 + 5),
            reference_update(0xdeadbeefu, buf.data(), 24576 + 768 + 5));
}

// The hybrid path folds 4 KiB with carry-less multiplies and runs 3 KiB of
// crc32 lanes beside it per 7 KiB round: lengths around one, two and three
// rounds, misaligned, from random states, against the table path.
TEST(Crc32cTest, ClmulMatchesSwAcrossRounds) {
  if (!crc32c_clmul_available()) GTEST_SKIP() << "no AVX2/VPCLMULQDQ on this CPU";
  const std::vector<uint8_t> buf = random_bytes(3 * 7168 + 64, 6);
  std::mt19937 rng(7);
  for (size_t base : {7168u, 2 * 7168u, 3 * 7168u}) {
    for (size_t len = base - 9; len <= base + 9; ++len) {
      for (size_t offset : {0u, 1u, 5u, 8u, 31u}) {
        if (len + offset > buf.size()) continue;
        const uint8_t* p = buf.data() + offset;
        const uint32_t seed = (offset & 1) ? kCrc32cInit : static_cast<uint32_t>(rng());
        ASSERT_EQ(crc32c_update_clmul(seed, p, len), crc32c_update_sw(seed, p, len))
            << "len " << len << " offset " << offset;
      }
    }
  }
  // A single flipped bit anywhere in a round changes the result.
  std::vector<uint8_t> one = random_bytes(7168, 8);
  const uint32_t good = crc32c_update_clmul(kCrc32cInit, one.data(), one.size());
  for (size_t bit : {0u, 7u, 4095u * 8, 4096u * 8, 7167u * 8 + 7}) {
    one[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(crc32c_update_clmul(kCrc32cInit, one.data(), one.size()), good) << "bit " << bit;
    EXPECT_EQ(crc32c_update_clmul(kCrc32cInit, one.data(), one.size()),
              crc32c_update_sw(kCrc32cInit, one.data(), one.size()));
    one[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

TEST(Crc32cTest, IncrementalEqualsOneShot) {
  const std::vector<uint8_t> buf = random_bytes(70000, 4);
  const uint32_t expected = crc32c(buf.data(), buf.size());
  std::mt19937 rng(5);
  for (const auto& [name, update] : implementations()) {
    for (int trial = 0; trial < 20; ++trial) {
      uint32_t state = kCrc32cInit;
      size_t pos = 0;
      while (pos < buf.size()) {
        // Mix tiny, odd and round-sized pieces, as scattered FPDUs would be.
        size_t piece = rng() % (trial < 10 ? 17 : 30000);
        if (piece > buf.size() - pos) piece = buf.size() - pos;
        state = update(state, buf.data() + pos, piece);
        pos += piece;
      }
      ASSERT_EQ(crc32c_final(state), expected) << name << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace softrdma
