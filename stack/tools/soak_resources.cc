#include "stack/tools/soak_resources.h"

#include <dirent.h>
#include <malloc.h>

#include <cinttypes>
#include <cstdio>

namespace softrdma::soak {

MemFigures read_mem() {
  MemFigures m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long v;
    if (std::sscanf(line, "VmRSS: %llu kB", &v) == 1) m.rss_kb = v;
    if (std::sscanf(line, "VmHWM: %llu kB", &v) == 1) m.hwm_kb = v;
  }
  std::fclose(f);
  return m;
}

uint64_t live_rss_kb() {
  malloc_trim(0);
  return read_mem().rss_kb;
}

int count_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own descriptor
}

Resources Resources::now(Engine& eng) {
  return {.fds = static_cast<uint64_t>(count_fds()), .rss_kb = live_rss_kb(),
          .c = eng.counters()};
}

bool Resources::back_to(const Resources& before, uint64_t slack_kb) const {
  const bool rss_ok = !kRssJudged || rss_kb <= before.rss_kb + slack_kb;
  return fds == before.fds && rss_ok && c.qps == before.c.qps &&
         c.mrs == before.c.mrs && c.connections == before.c.connections &&
         c.rx_frames_held <= before.c.rx_frames_held &&
         c.mbufs_in_use <= before.c.mbufs_in_use;
}

std::string Resources::describe() const {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "fds %" PRIu64 " rss %.1f MiB qps %" PRIu64 " mrs %" PRIu64 " conns %" PRIu64
                " held frames %" PRIu64 " mbufs in use %" PRIu64,
                fds, mib(rss_kb), c.qps, c.mrs, c.connections, c.rx_frames_held,
                c.mbufs_in_use);
  return buf;
}

}  // namespace softrdma::soak
