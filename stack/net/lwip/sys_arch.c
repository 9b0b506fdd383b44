// The OS layer lwIP needs with NO_SYS=1: a millisecond clock for its timers
// and a random source.
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

#include "lwip/sys.h"

// Monotonic, so wall-clock steps never fire or stall TCP timers.
u32_t sys_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (u32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

unsigned int softrdma_lwip_rand(void) {
  unsigned int v = 0;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (unsigned int)(ts.tv_nsec ^ (ts.tv_sec << 20));
  }
  return v;
}
