#include "stack/common/crc32c.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <sys/mman.h>

namespace softrdma {
namespace {

// RFC 3720 §B.4 lists each CRC as the four octets sent on the wire, which are
// the little-endian encoding of the computed value.
uint32_t wire_crc(uint8_t b0, uint8_t b1, uint8_t b2, uint8_t b3) {
  return uint32_t{b0} | (uint32_t{b1} << 8) | (uint32_t{b2} << 16) | (uint32_t{b3} << 24);
}

// Bit-at-a-time reference, independent of the library behind crc32c_update().
uint32_t reference_update(uint32_t crc, const uint8_t* p, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
  }
  return crc;
}

// The one-shot call, the running state seeded and finalised by hand (the
// MPA convention: init ~0, final xor ~0), and the reference all agree.
void expect_vector(const uint8_t* data, size_t len, uint32_t expected) {
  EXPECT_EQ(crc32c(data, len), expected);
  EXPECT_EQ(crc32c_final(crc32c_update(kCrc32cInit, data, len)), expected);
  EXPECT_EQ(crc32c_final(reference_update(kCrc32cInit, data, len)), expected);
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
  EXPECT_EQ(crc32c_update(0x12345678u, nullptr, 0), 0x12345678u);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32cTest, MatchesReferenceForEveryLengthAndMisalignment) {
  const std::vector<uint8_t> buf = random_bytes(300 + 16, 1);
  std::mt19937 rng(2);
  for (size_t len = 0; len <= 300; ++len) {
    for (size_t offset = 0; offset < 16; ++offset) {
      const uint8_t* p = buf.data() + offset;
      const uint32_t seed = (offset & 1) ? kCrc32cInit : static_cast<uint32_t>(rng());
      ASSERT_EQ(crc32c_update(seed, p, len), reference_update(seed, p, len))
          << "len " << len << " offset " << offset;
    }
  }
}

// FPDU-sized buffers (MSS 1448/1460, jumbo 8960, 64 KiB) and the lengths
// around them, where a library switches kernels, misaligned.
TEST(Crc32cTest, MatchesReferenceAtFpduSizes) {
  const std::vector<uint8_t> buf = random_bytes(65536 + 64, 3);
  std::mt19937 rng(7);
  for (size_t base : {256u, 1024u, 1448u, 1460u, 4096u, 7168u, 8960u, 65536u}) {
    for (size_t len = base - 9; len <= base + 9; ++len) {
      for (size_t offset : {0u, 1u, 5u, 8u, 31u}) {
        if (len + offset > buf.size()) continue;
        const uint8_t* p = buf.data() + offset;
        const uint32_t seed = (offset & 1) ? kCrc32cInit : static_cast<uint32_t>(rng());
        ASSERT_EQ(crc32c_update(seed, p, len), reference_update(seed, p, len))
            << "len " << len << " offset " << offset;
      }
    }
  }
  // A single flipped bit anywhere changes the result.
  std::vector<uint8_t> one = random_bytes(8960, 8);
  const uint32_t good = crc32c(one.data(), one.size());
  for (size_t bit : {0u, 7u, 4095u * 8, 4096u * 8, 8959u * 8 + 7}) {
    one[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(crc32c(one.data(), one.size()), good) << "bit " << bit;
    one[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

TEST(Crc32cTest, IncrementalEqualsOneShot) {
  const std::vector<uint8_t> buf = random_bytes(70000, 4);
  const uint32_t expected = crc32c(buf.data(), buf.size());
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    uint32_t state = kCrc32cInit;
    size_t pos = 0;
    while (pos < buf.size()) {
      // Mix tiny, odd and large pieces, as scattered FPDUs would be.
      size_t piece = rng() % (trial < 10 ? 17 : 30000);
      if (piece > buf.size() - pos) piece = buf.size() - pos;
      state = crc32c_update(state, buf.data() + pos, piece);
      pos += piece;
    }
    ASSERT_EQ(crc32c_final(state), expected) << "trial " << trial;
  }
}

// A length beyond what the library's int length holds is taken in pieces:
// one call over 4 GiB + 8 zero bytes (8 in a truncated int) equals the same
// bytes fed in two calls below the limit. Zero pages of a read-only mapping
// (huge ones where the kernel allows): nothing becomes resident.
TEST(Crc32cTest, LengthBeyondIntRange) {
  constexpr size_t kLen = (size_t{1} << 32) + 8;
  void* m = mmap(nullptr, kLen, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  madvise(m, kLen, MADV_HUGEPAGE);  // fewer faults; the test holds without it
  const auto* p = static_cast<const uint8_t*>(m);
  const size_t half = kLen / 2;
  const uint32_t split = crc32c_update(crc32c_update(0x1234u, p, half), p + half, kLen - half);
  EXPECT_EQ(crc32c_update(0x1234u, p, kLen), split);
  EXPECT_NE(crc32c_update(0x1234u, p, 8), split);
  munmap(m, kLen);
}

}  // namespace
}  // namespace softrdma
