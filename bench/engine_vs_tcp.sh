#!/usr/bin/env bash
# The engine on each of its paths vs a plain kernel-TCP socket, 127.0.0.1, in
# one invocation: 8 B Send latency (srdma_perf; tcp_baseline ping-pong) and
# 1 MiB RDMA Write bandwidth (srdma_perf; tcp_baseline stream), for
#   tcp       tcp_baseline, the yardstick
#   kernel    the engine over kernel TCP
#   dpdk-cN   the engine over lwIP on DPDK memif, threading model cN
# Every measurement runs R times, interleaved path by path, so drift in
# machine load hits all alike. Each repetition also measures the raw memif
# frame round trip (dpdk_memif_bench, no TCP/IP): the floor under the DPDK
# path, and a gauge of the host's phase (0.6 us in fast phases, 1.8 in slow
# ones on this VM). Prints medians with ratios to the kernel-TCP
# engine and to plain TCP, and the DPDK path's targets (8 B round trip within
# 1.5x of 2 us and at most 1/4 of the kernel-TCP engine's; 1 MiB at least the
# kernel-TCP engine's); writes them and every run to
# bench/results/engine_vs_tcp.csv.
#
# usage: bench/engine_vs_tcp.sh [-R reps] [-P path,path...] [-b build-dir] [--crc 0|1]
#                               [-n lat-iters] [-N bw-iters] [-T run-timeout-s] [-B budget-s]
#                               [-V ref-build-dir]
# -V: a path P given as P@ref runs the srdma_perf of another build (a change's
#    base, say), interleaved with the rest: -P dpdk-c2,dpdk-c2@ref -V ../base/build.
# Default paths: tcp,kernel,dpdk-c2,dpdk-c1,dpdk-c3. Time is bounded: every
# run has its own deadline (-T, default 60 s), and no new repetition starts
# once the budget (-B, default 900 s) is spent; medians are then over the
# repetitions completed. Binaries: <build-dir>/stack/tools/srdma_perf and
# <build-dir>/bench/tcp_baseline (default build-dir: build/ or build-perf/).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
reps=5
paths=tcp,kernel,dpdk-c2,dpdk-c1,dpdk-c3
build=""
ref_build=""
crc=""
lat_iters=5000
bw_iters=500
run_timeout=60
budget=900

while [[ $# -gt 0 ]]; do
  case $1 in
    -R) reps=$2; shift 2 ;;
    -P) paths=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    --crc) crc=$2; shift 2 ;;
    -n) lat_iters=$2; shift 2 ;;
    -N) bw_iters=$2; shift 2 ;;
    -T) run_timeout=$2; shift 2 ;;
    -B) budget=$2; shift 2 ;;
    -V) ref_build=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "engine_vs_tcp: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "engine_vs_tcp: -R needs a positive count" >&2; exit 2; }

for d in $build "$root/build" "$root/build-perf"; do
  if [[ -x $d/stack/tools/srdma_perf && -x $d/bench/tcp_baseline ]]; then
    build=$d
    break
  fi
done
perf=$build/stack/tools/srdma_perf
tcp=$build/bench/tcp_baseline
memif_bench=$build/stack/net/dpdk/tests/dpdk_memif_bench
if [[ ! -x $perf || ! -x $tcp ]]; then
  echo "engine_vs_tcp: srdma_perf and tcp_baseline not found; build them or pass -b" >&2
  exit 2
fi

crc_args=()
[[ -n $crc ]] && crc_args=(--crc "$crc")
results=$here/results
mkdir -p "$results"
csv=$results/engine_vs_tcp.csv
tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

source "$root/stack/tests/perf_server.sh"  # free_port, wait_listening

# run BINARY SERVER_ARGS... -- CLIENT_ARGS...: one server/client pair, both
# with the environment in run_env; the client's CSV lands in $tmp/client.csv.
# Any failure ends the script.
run_env=()
run() {
  local bin=$1
  shift
  local sargs=() cargs=() port
  while [[ $1 != -- ]]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  port=$(free_port)
  : >"$tmp/server.log"
  env "${run_env[@]}" timeout $((run_timeout + 15)) "$bin" -p "$port" --timeout "$run_timeout" \
    "${sargs[@]}" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  wait_listening "$server_pid" "$tmp/server.log" "$port" || true  # tcp_baseline says nothing
  if ! env "${run_env[@]}" timeout $((run_timeout + 15)) "$bin" -p "$port" --timeout "$run_timeout" --csv \
      "${cargs[@]}" 127.0.0.1 >"$tmp/client.csv" 2>"$tmp/client.err"; then
    echo "engine_vs_tcp: FAILED: $(basename "$bin") ${cargs[*]}" >&2
    cat "$tmp/client.err" "$tmp/server.log" >&2
    exit 1
  fi
  if ! wait "$server_pid"; then
    server_pid=""
    echo "engine_vs_tcp: FAILED: server of $(basename "$bin") ${cargs[*]}" >&2
    cat "$tmp/server.log" >&2
    exit 1
  fi
  server_pid=""
}

# field NAME: that column of the last client's (only) data row.
field() {
  awk -F, -v name="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) k = i; next }
                        k { print $k; exit }' "$tmp/client.csv"
}

median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR % 2) printf "%.3f\n", v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f\n", a / b; else print "nan" }'; }

IFS=, read -r -a path_list <<<"$paths"
declare -A lat p99 bw  # per path: the runs' values, space-separated
floor=()               # raw memif round trip per repetition, us
crc_used=""
done_reps=0
for ((r = 1; r <= reps; ++r)); do
  if ((SECONDS > budget)); then
    echo "engine_vs_tcp: time budget of ${budget} s spent after $done_reps repetitions" >&2
    break
  fi
  echo "engine_vs_tcp: repetition $r/$reps" >&2
  if [[ -x $memif_bench ]]; then
    sock=/run/softrdma-floor-$$.sock
    timeout 60 "$memif_bench" server pp "$sock" >/dev/null 2>&1 &
    floor_pid=$!
    sleep 1
    f=$(timeout 60 "$memif_bench" client pp "$sock" 2>/dev/null | sed -n 's/.*median \([0-9.]*\) us.*/\1/p')
    wait "$floor_pid" || true
    [[ -n $f ]] && floor+=("$f")
  fi
  for path in "${path_list[@]}"; do
    engine=$perf
    if [[ $path == *@ref ]]; then
      engine=$ref_build/stack/tools/srdma_perf
      [[ -x $engine ]] || { echo "engine_vs_tcp: $path needs -V with a built srdma_perf" >&2; exit 2; }
    fi
    case ${path%@ref} in
      tcp) bin=$tcp run_env=() lat_args=(-t lat) bw_args=(-t bw) ;;
      kernel) bin=$engine run_env=(FI_SOFTRDMA_TRANSPORT=kernel) ;;
      dpdk-c[123]) p=${path%@ref} bin=$engine run_env=(FI_SOFTRDMA_TRANSPORT=dpdk "FI_SOFTRDMA_THREADING=${p#dpdk-}") ;;
      *) echo "engine_vs_tcp: unknown path $path" >&2; exit 2 ;;
    esac
    srv_args=()
    if [[ ${path%@ref} != tcp ]]; then
      srv_args=("${crc_args[@]}")
      lat_args=("${crc_args[@]}" -o send -t lat)
      bw_args=("${crc_args[@]}" -o write -t bw)
    fi
    run "$bin" "${srv_args[@]}" -- "${lat_args[@]}" -s 8 -n "$lat_iters"
    lat[$path]+="$(field median_us) " p99[$path]+="$(field p99_us) "
    [[ ${path%@ref} != tcp && -z $crc_used ]] && crc_used=$(field crc)
    run "$bin" "${srv_args[@]}" -- "${bw_args[@]}" -s 1M -n "$bw_iters" --max-bytes 0
    bw[$path]+="$(field mb_s) "
  done
  done_reps=$r
done
reps=$done_reps
((reps > 0)) || { echo "engine_vs_tcp: no repetition completed" >&2; exit 1; }

# med PATH ARRAY: median of that path's runs.
med() { local -n a=$2; median ${a[$1]:-}; }
k_lat=$(med kernel lat) k_bw=$(med kernel bw)
floor_med=""
((${#floor[@]} > 0)) && floor_med=$(median "${floor[@]}")
t_lat=$(med tcp lat) t_bw=$(med tcp bw)
{
  echo "path,lat_8B_median_us,lat_8B_p99_us,write_bw_1MiB_MBps,lat_over_kernel,bw_over_kernel,lat_over_tcp,bw_over_tcp,reps,crc,lat_runs,bw_runs,memif_floor_rtt_us"
  for path in "${path_list[@]}"; do
    l=$(med "$path" lat) p=$(med "$path" p99) b=$(med "$path" bw)
    echo "$path,$l,$p,$b,$(ratio "$l" "$k_lat"),$(ratio "$b" "$k_bw"),$(ratio "$l" "$t_lat"),$(ratio "$b" "$t_bw"),$reps,$crc_used,$(echo ${lat[$path]} | tr ' ' ';'),$(echo ${bw[$path]} | tr ' ' ';'),$floor_med"
  done
} >"$csv"

echo
echo "engine paths vs kernel TCP on 127.0.0.1: medians of $reps interleaved runs (engine CRC $([[ $crc_used == 1 ]] && echo on || echo off))"
echo "latency = half round trip, us; bandwidth in MB/s (10^6 B/s)"
awk -F, 'NR == 1 { printf "%-9s %10s %10s %10s %10s %10s %10s\n", "path", "8B lat", "8B p99", "1MiB bw", "lat/kern", "bw/kern", "lat/tcp"; next }
         { printf "%-9s %10s %10s %10s %10s %10s %10s\n", $1, $2, $3, $4, $5, $6, $7 }' "$csv"
for path in "${path_list[@]}"; do
  [[ $path == dpdk-* && -n ${lat[kernel]:-} ]] || continue
  l=$(med "$path" lat) b=$(med "$path" bw)
  awk -v p="$path" -v l="$l" -v b="$b" -v kl="$k_lat" -v kb="$k_bw" 'BEGIN {
    rtt = 2 * l
    a = (rtt <= 3.0) ? "met" : "NOT met"
    q = (rtt <= 2 * kl / 4) ? "met" : "NOT met"
    c = (b + 0 >= kb + 0) ? "met" : "NOT met"
    printf("targets %s: 8 B round trip %.2f us <= 3.0 (1.5 x 2 us): %s; <= kernel engine / 4 (%.2f us): %s; 1 MiB %.0f >= kernel engine %.0f MB/s: %s\n",
      p, rtt, a, 2 * kl / 4, q, b, kb, c) }'
done
if [[ -n $floor_med ]]; then
  echo "raw memif frame round trip (the floor, no TCP/IP): median $floor_med us; runs: ${floor[*]}"
fi
echo "csv: $csv"
