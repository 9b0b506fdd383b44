// CRC32c throughput: the engine's crc32c_update() and its kernels beside
// ISA-L's crc32_iscsi(), at an FPDU-header-sized, MSS-sized (1448/1460),
// jumbo-MSS (8960) and large-message buffer.
#include <benchmark/benchmark.h>
#include <isa-l/crc.h>

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

// crc32_iscsi() takes and returns the raw running state, as crc32c_update() does.
uint32_t isal_update(uint32_t crc, const void* data, size_t len) {
  return crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(len),
                     crc);
}

void BM_Crc32c(benchmark::State& state) { run(state, &crc32c_update); }
void BM_IsalCrc32Iscsi(benchmark::State& state) { run(state, &isal_update); }

#define SIZES Arg(16)->Arg(64)->Arg(1448)->Arg(1460)->Arg(8960)->Arg(64 << 10)
BENCHMARK(BM_Crc32c)->SIZES;
BENCHMARK(BM_IsalCrc32Iscsi)->SIZES;

}  // namespace
}  // namespace softrdma

BENCHMARK_MAIN();
