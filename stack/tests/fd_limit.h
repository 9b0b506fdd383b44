// FdLimit: lowers RLIMIT_NOFILE's soft limit for a scope so that exactly
// `room` descriptor numbers are free below it (new descriptors take the
// lowest). Header-only: the engine's and the provider's limit tests share it.
#pragma once

#include <dirent.h>
#include <sys/resource.h>

#include <cstdlib>
#include <set>

namespace softrdma::testing {

struct FdLimit {
  rlimit saved{};
  explicit FdLimit(size_t room) {
    std::set<int> open;
    DIR* d = opendir("/proc/self/fd");
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.' && std::atoi(e->d_name) != dirfd(d)) open.insert(std::atoi(e->d_name));
    closedir(d);
    int limit = 0;
    for (size_t free_below = 0; free_below < room; ++limit) free_below += !open.count(limit);
    getrlimit(RLIMIT_NOFILE, &saved);
    rlimit r = saved;
    r.rlim_cur = static_cast<rlim_t>(limit);
    setrlimit(RLIMIT_NOFILE, &r);
  }
  ~FdLimit() { setrlimit(RLIMIT_NOFILE, &saved); }
};

}  // namespace softrdma::testing
