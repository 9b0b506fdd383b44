#include "stack/tools/result_table.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace softrdma::tools {

LatSummary summarize(std::vector<double>& ns, double scale) {
  LatSummary s;
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  const size_t n = ns.size();
  const double k = scale / 1000.0;
  double sum = 0;
  for (double v : ns) sum += v;
  const size_t p99 = std::clamp<size_t>(static_cast<size_t>(std::ceil(0.99 * n)), 1, n) - 1;
  s.min = ns.front() * k;
  s.max = ns.back() * k;
  s.median = (n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2) * k;
  s.avg = sum / n * k;
  s.p99 = ns[p99] * k;
  return s;
}

void print_csv_header() {
  std::printf(
      "tool,op,test,bytes,iters,depth,crc,markers,verify,lat_kind,min_us,median_us,avg_us,"
      "p99_us,max_us,mb_s,mops\n");
}

void print_table_head(Kind kind, const char* lat_what, const char* bw_how,
                      const char* bw_until) {
  if (kind == Kind::kLat) {
    std::printf("# latency in microseconds: %s\n", lat_what);
    std::printf("#%11s %10s %10s %10s %10s %10s %10s\n", "bytes", "iters", "min", "median", "avg",
                "p99", "max");
  } else {
    std::printf("# bandwidth%s; MB/s = 10^6 bytes/s, until the server %s the last message\n",
                bw_how, bw_until);
    std::printf("#%11s %10s %10s %12s %12s\n", "bytes", "iters", "depth", "MB/s", "Mops/s");
  }
  std::fflush(stdout);
}

void print_lat_row(const RowTags& t, uint64_t size, uint64_t iters, const LatSummary& s) {
  if (t.csv) {
    std::printf("%s,%s,lat,%" PRIu64 ",%" PRIu64 ",1,%d,%d,%d,%s,%.3f,%.3f,%.3f,%.3f,%.3f,,\n",
                t.tool, t.op, size, iters, t.crc, t.markers, t.verify, t.lat_kind, s.min,
                s.median, s.avg, s.p99, s.max);
  } else {
    std::printf(" %11" PRIu64 " %10" PRIu64 " %10.2f %10.2f %10.2f %10.2f %10.2f\n", size, iters,
                s.min, s.median, s.avg, s.p99, s.max);
  }
  std::fflush(stdout);
}

void print_bw_row(const RowTags& t, uint64_t size, uint64_t iters, double secs) {
  const double mb = secs > 0 ? static_cast<double>(size) * iters / secs / 1e6 : 0;
  const double mops = secs > 0 ? iters / secs / 1e6 : 0;
  if (t.csv) {
    std::printf("%s,%s,bw,%" PRIu64 ",%" PRIu64 ",%u,%d,%d,%d,,,,,,,%.3f,%.4f\n", t.tool, t.op,
                size, iters, t.depth, t.crc, t.markers, t.verify, mb, mops);
  } else {
    std::printf(" %11" PRIu64 " %10" PRIu64 " %10u %12.2f %12.4f\n", size, iters, t.depth, mb,
                mops);
  }
  std::fflush(stdout);
}

}  // namespace softrdma::tools
