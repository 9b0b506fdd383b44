// The OS layer lwIP needs with NO_SYS=1: a millisecond clock for its timers
// and a random source.
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

#include "lwip/sys.h"
#include "stack/common/pass_clock.h"

// Monotonic, so wall-clock steps never fire or stall TCP timers; the
// progress pass's time, read once per pass (pass_clock.h says why).
u32_t sys_now(void) { return softrdma_pass_clock_ms(); }

unsigned int softrdma_lwip_rand(void) {
  unsigned int v = 0;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (unsigned int)(ts.tv_nsec ^ (ts.tv_sec << 20));
  }
  return v;
}
