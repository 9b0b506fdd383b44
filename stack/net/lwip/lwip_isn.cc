// lwIP transport: RFC 6528 initial sequence numbers for lwIP's TCP.
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "lwip/ip_addr.h"
#include "lwip_hooks.h"

namespace softrdma::net::lwip_impl {

namespace {

// SipHash-2-4 (Aumasson & Bernstein), the keyed PRF for RFC 6528 ISNs.
uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t siphash24(const uint8_t* in, size_t len, uint64_t k0, uint64_t k1) {
  uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
  uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
  // clang-format off
  auto round = [&] {
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);
  };
  // clang-format on
  size_t full = len & ~size_t{7};
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m;
    std::memcpy(&m, in + i, 8);
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
  uint64_t b = uint64_t{len} << 56;
  for (size_t i = 0; i < (len & 7); ++i) b |= uint64_t{in[full + i]} << (8 * i);
  v3 ^= b;
  round();
  round();
  v0 ^= b;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace

}  // namespace softrdma::net::lwip_impl

// RFC 6528: ISN = M + F(4-tuple, secret), M a 4 us clock, F keyed SipHash.
extern "C" u32_t softrdma_lwip_isn(const ip_addr_t* local_ip, u16_t local_port,
                                   const ip_addr_t* remote_ip, u16_t remote_port) {
  static const uint64_t k0 = (uint64_t{softrdma_lwip_rand()} << 32) | softrdma_lwip_rand();
  static const uint64_t k1 = (uint64_t{softrdma_lwip_rand()} << 32) | softrdma_lwip_rand();
  uint8_t in[12];
  uint32_t lip = ip4_addr_get_u32(ip_2_ip4(local_ip));
  uint32_t rip = ip4_addr_get_u32(ip_2_ip4(remote_ip));
  std::memcpy(in, &lip, 4);
  std::memcpy(in + 4, &rip, 4);
  std::memcpy(in + 8, &local_port, 2);
  std::memcpy(in + 10, &remote_port, 2);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  auto m =
      static_cast<uint32_t>((uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec)) / 4000);
  return m + static_cast<uint32_t>(softrdma::net::lwip_impl::siphash24(in, sizeof(in), k0, k1));
}
