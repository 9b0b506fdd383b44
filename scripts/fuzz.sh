#!/usr/bin/env bash
# Builds the libFuzzer harnesses (stack/fuzz/, docs/fuzzing.md) with clang,
# ASan, UBSan and LeakSanitizer in build-fuzz/ and runs each one, starting
# from the seed corpus in stack/fuzz/corpus/<harness>/.
#
#   scripts/fuzz.sh                  # CI: 60 s per harness
#   scripts/fuzz.sh --time 300       # another time budget per harness
#   scripts/fuzz.sh --runs 10000000  # a number of executions per harness
#   scripts/fuzz.sh --long           # release run: 10M executions per harness
#   scripts/fuzz.sh --only fuzz_rdmap --time 30
#   scripts/fuzz.sh --regen-corpus   # rewrite the seed corpus, then exit
#
# Prints executions and rate per harness; exits non-zero if any harness
# crashes, leaks, trips a sanitizer or breaks an invariant (crash-* files,
# with the reproducer, land in build-fuzz/fuzz-out/<harness>/). New inputs
# found while fuzzing go to build-fuzz/fuzz-out/<harness>/corpus, never into
# the repository's seed corpus.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SOFTRDMA_FUZZ_BUILD:-$ROOT/build-fuzz}
SEEDS=$ROOT/stack/fuzz/corpus
HARNESSES=(fuzz_mpa_handshake fuzz_fpdu_stream fuzz_rdmap fuzz_terminate)
JOBS=${JOBS:-2}

time_s=60
runs=""
only=""
regen=0
while (($#)); do
  case $1 in
    --time) time_s=$2; runs=""; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --long) runs=10000000; shift ;;
    --only) only=$2; shift 2 ;;
    --regen-corpus) regen=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ missing (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long){return 0;}' |
    clang++ -x c++ -fsanitize=fuzzer,address,undefined -o /dev/null - 2>/dev/null; then
  echo "fuzz.sh: clang++ cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)" >&2
  exit 1
fi

if [[ ! -f $BUILD/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSOFTRDMA_SANITIZE=ON -DSOFTRDMA_FUZZ=ON -DSOFTRDMA_ENGINE_ONLY=ON >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target fuzz_all >/dev/null

if ((regen)); then
  rm -rf "$SEEDS"
  "$BUILD/stack/fuzz/fuzz_gen_corpus" "$SEEDS"
  exit 0
fi

# Sanitizer settings: any report is fatal; leaks are checked after every input.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

fail=0
summary=()
for h in "${HARNESSES[@]}"; do
  [[ -n $only && $h != "$only" ]] && continue
  out=$BUILD/fuzz-out/$h
  mkdir -p "$out/corpus"
  limit=(-max_total_time="$time_s")
  [[ -n $runs ]] && limit=(-runs="$runs")
  log=$out/log.txt
  echo "fuzz.sh: $h (${runs:+$runs runs}${runs:-${time_s} s}) ..."
  set +e
  (cd "$out" && "$BUILD/stack/fuzz/$h" "${limit[@]}" -max_len=8192 -use_value_profile=1 \
      -detect_leaks=1 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$out/" corpus "$SEEDS/$h") >"$log" 2>&1
  rc=$?
  set -e
  # A crashed run lacks some of these lines: no match must not end the script.
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1 || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  bad=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|==fuzz==' "$log" || true)
  if ((rc != 0 || bad != 0)); then
    fail=1
    summary+=("$(printf '%-20s FAILED (exit %d) after %s executions: see %s' "$h" "$rc" "${execs:-?}" "$log")")
    grep -E 'ERROR:|runtime error:|==fuzz==|Test unit written' "$log" | head -5 >&2 || true
  else
    summary+=("$(printf '%-20s %12s executions in %5s s (%s exec/s), coverage %s edges, 0 crashes/leaks/sanitizer reports' \
      "$h" "${execs:-?}" "${secs:-?}" "${rate:-?}" "${cov:-?}")")
  fi
done

echo
echo "fuzz.sh summary:"
printf '  %s\n' "${summary[@]}"
exit $fail
