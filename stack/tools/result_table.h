// The results table of srdma_perf and tcp_baseline: latency summaries and
// bandwidth rows, as aligned columns or as CSV (one header, the same columns
// for both tools, so their runs can be compared side by side).
#pragma once

#include <cstdint>
#include <vector>

namespace softrdma::tools {

enum class Kind : uint8_t { kLat, kBw };

struct LatSummary {
  double min = 0, median = 0, avg = 0, p99 = 0, max = 0;
};

// Round-trip samples (ns) -> microseconds, scaled (0.5 for half round trips).
// Sorts the samples.
LatSummary summarize(std::vector<double>& ns, double scale);

// What a row says besides the figures (the CSV's first columns).
struct RowTags {
  bool csv = false;
  const char* tool = "";
  const char* op = "";
  uint32_t depth = 1;
  bool crc = false;
  bool markers = false;
  bool verify = false;
  const char* lat_kind = "half_rtt";  // "rtt" or "half_rtt"
};

void print_csv_header();
// The lines above the columns: what a latency figure is ("half round trip
// (ping-pong)"), or for bandwidth how it is run (" with 128 in flight") and
// what ends the clock (the server "confirms" the last message).
void print_table_head(Kind kind, const char* lat_what, const char* bw_how,
                      const char* bw_until);
void print_lat_row(const RowTags& t, uint64_t size, uint64_t iters, const LatSummary& s);
void print_bw_row(const RowTags& t, uint64_t size, uint64_t iters, double secs);

}  // namespace softrdma::tools
