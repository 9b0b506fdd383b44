#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (Release, warnings
# as errors) and runs every test with ctest; then rebuilds the engine with
# ASan+UBSan and runs its tests again; then runs the engine's unit tests
# under valgrind memcheck (scripts/valgrind.sh); then runs each libFuzzer
# harness of the wire parsers for a bounded time (docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTRDMA_WERROR=ON
cmake --build build -j "$JOBS"
(cd build && ctest --output-on-failure -j "$JOBS" ${CTEST_ARGS:-})

if [[ "${SOFTRDMA_SKIP_SANITIZE:-0}" != 1 ]]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTRDMA_WERROR=ON \
    -DSOFTRDMA_SANITIZE=ON -DSOFTRDMA_ENGINE_ONLY=ON
  cmake --build build-asan -j "$JOBS"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$JOBS" -L engine)
fi

if [[ "${SOFTRDMA_SKIP_VALGRIND:-0}" != 1 ]]; then
  bash scripts/valgrind.sh build
fi

if [[ "${SOFTRDMA_SKIP_FUZZ:-0}" != 1 ]]; then
  bash scripts/fuzz.sh --time "${SOFTRDMA_FUZZ_SECONDS:-30}"
fi
