// The time of the current progress pass. One pass (poll the port, run
// TCP/IP, place, complete, check timers) needs the time in several layers:
// lwIP's timers, the engine's CM deadlines, the mesh's link service, the
// c2 watchdog. Reading the clock once per pass and sharing the value took
// six clock reads (about 170 ns) out of every poll of the latency path;
// every user of it counts in milliseconds or tens of microseconds, so a
// value as old as the pass is exact enough.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
// Milliseconds of the monotonic clock as of the last refresh (lwIP's
// sys_now); refreshes first if nothing has yet.
uint32_t softrdma_pass_clock_ms(void);
#ifdef __cplusplus
}

namespace softrdma::pass_clock {
// Reads the monotonic clock (CLOCK_MONOTONIC, or the TSC extrapolating
// from it: pass_clock.cc), stores it as the pass time and returns it (ns).
int64_t refresh();
// The pass time (ns), as of the last refresh.
int64_t now_ns();
}  // namespace softrdma::pass_clock
#endif
