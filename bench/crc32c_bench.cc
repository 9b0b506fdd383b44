// CRC32c throughput, SSE4.2 vs slicing-by-8 (and the hybrid carry-less
// multiply path), at an FPDU-header-sized, a typical small-message, an
// MSS-sized FPDU and a large-message buffer.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "stack/common/crc32c.h"

namespace softrdma {
namespace {

void run(benchmark::State& state, uint32_t (*update)(uint32_t, const void*, size_t)) {
  const size_t len = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf(len);
  for (size_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  for (auto _ : state) {
    benchmark::DoNotOptimize(buf.data());
    uint32_t crc = update(kCrc32cInit, buf.data(), len);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(len));
}

void BM_Crc32cHw(benchmark::State& state) {
  if (!crc32c_hw_available()) {
    state.SkipWithError("no SSE4.2 on this CPU");
    return;
  }
  run(state, &crc32c_update_hw);
}

void BM_Crc32cClmul(benchmark::State& state) {
  if (!crc32c_clmul_available()) {
    state.SkipWithError("no AVX2/VPCLMULQDQ on this CPU");
    return;
  }
  run(state, &crc32c_update_clmul);
}

void BM_Crc32cSw(benchmark::State& state) { run(state, &crc32c_update_sw); }

BENCHMARK(BM_Crc32cHw)->Arg(64)->Arg(1 << 10)->Arg(8960)->Arg(64 << 10);
BENCHMARK(BM_Crc32cClmul)->Arg(8960)->Arg(64 << 10);
BENCHMARK(BM_Crc32cSw)->Arg(64)->Arg(1 << 10)->Arg(64 << 10);

}  // namespace
}  // namespace softrdma

BENCHMARK_MAIN();
