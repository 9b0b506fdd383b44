// lwIP transport: RFC 6528 initial sequence numbers for lwIP's TCP.
#include <sodium.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "lwip/ip_addr.h"
#include "lwip_hooks.h"

namespace {

// The secret of RFC 6528's F: a process-wide SipHash-2-4 key (libsodium's
// crypto_shorthash) from the kernel's random source, made on first use.
const unsigned char* isn_key() {
  static unsigned char key[crypto_shorthash_KEYBYTES];
  static const bool ready = [] {
    if (sodium_init() < 0) {
      std::fprintf(stderr, "softrdma: libsodium did not initialise: no TCP ISN secret\n");
      std::abort();
    }
    crypto_shorthash_keygen(key);
    return true;
  }();
  (void)ready;
  return key;
}

}  // namespace

// RFC 6528: ISN = M + F(4-tuple, secret), M a 4 us clock, F keyed SipHash.
extern "C" u32_t softrdma_lwip_isn(const ip_addr_t* local_ip, u16_t local_port,
                                   const ip_addr_t* remote_ip, u16_t remote_port) {
  uint8_t in[12];
  uint32_t lip = ip4_addr_get_u32(ip_2_ip4(local_ip));
  uint32_t rip = ip4_addr_get_u32(ip_2_ip4(remote_ip));
  std::memcpy(in, &lip, 4);
  std::memcpy(in + 4, &rip, 4);
  std::memcpy(in + 8, &local_port, 2);
  std::memcpy(in + 10, &remote_port, 2);
  unsigned char f[crypto_shorthash_BYTES];
  crypto_shorthash(f, in, sizeof(in), isn_key());
  uint32_t f32;
  std::memcpy(&f32, f, sizeof(f32));
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  auto m =
      static_cast<uint32_t>((uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec)) / 4000);
  return m + f32;
}
