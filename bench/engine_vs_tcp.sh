#!/usr/bin/env bash
# Engine vs kernel TCP on 127.0.0.1, in one invocation:
#   A: srdma_perf send latency at 8 B      B: tcp_baseline ping-pong at 8 B
#   A: srdma_perf write bandwidth at 1 MiB B: tcp_baseline stream at 1 MiB
# Every measurement runs R times, interleaved A B A B, so drift in machine
# load hits both sides alike. Prints the medians over the R runs with the
# engine/tcp ratios and writes them (and every run) to
# bench/results/engine_vs_tcp.csv.
#
# usage: bench/engine_vs_tcp.sh [-R reps] [-b build-dir] [--crc 0|1] [-n lat-iters]
#                               [-N bw-iters] [-T run-timeout-s] [-B budget-s]
# Time is bounded: every run has its own deadline (-T, default 60 s), and no
# new repetition starts once the budget (-B, default 600 s) is spent; the
# medians are then over the repetitions completed.
# Binaries: <build-dir>/stack/tools/srdma_perf and <build-dir>/bench/tcp_baseline
# (default build-dir: the first of build/, build-perf/ that has both).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
reps=5
build=""
crc=""
lat_iters=10000
bw_iters=1000
run_timeout=60
budget=600

while [[ $# -gt 0 ]]; do
  case $1 in
    -R) reps=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    --crc) crc=$2; shift 2 ;;
    -n) lat_iters=$2; shift 2 ;;
    -N) bw_iters=$2; shift 2 ;;
    -T) run_timeout=$2; shift 2 ;;
    -B) budget=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
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

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# run BINARY SERVER_ARGS... -- CLIENT_ARGS...: one server/client pair; the
# client's CSV lands in $tmp/client.csv. Any failure ends the script.
run() {
  local bin=$1
  shift
  local sargs=() cargs=() port
  while [[ $1 != -- ]]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  port=$(free_port)
  timeout $((run_timeout + 15)) "$bin" -p "$port" --timeout "$run_timeout" "${sargs[@]}" \
    >"$tmp/server.log" 2>&1 &
  server_pid=$!
  if ! timeout $((run_timeout + 15)) "$bin" -p "$port" --timeout "$run_timeout" --csv \
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

e_med=() e_p99=() t_med=() t_p99=() e_bw=() t_bw=() crc_used=""
done_reps=0
for ((r = 1; r <= reps; ++r)); do
  if ((SECONDS > budget)); then
    echo "engine_vs_tcp: time budget of ${budget} s spent after $done_reps repetitions" >&2
    break
  fi
  echo "engine_vs_tcp: repetition $r/$reps" >&2
  run "$perf" "${crc_args[@]}" -- -o send -t lat -s 8 -n "$lat_iters" "${crc_args[@]}"
  e_med+=("$(field median_us)") e_p99+=("$(field p99_us)") crc_used=$(field crc)
  run "$tcp" -- -t lat -s 8 -n "$lat_iters"
  t_med+=("$(field median_us)") t_p99+=("$(field p99_us)")
  run "$perf" "${crc_args[@]}" -- -o write -t bw -s 1M -n "$bw_iters" --max-bytes 0 "${crc_args[@]}"
  e_bw+=("$(field mb_s)")
  run "$tcp" -- -t bw -s 1M -n "$bw_iters" --max-bytes 0
  t_bw+=("$(field mb_s)")
  done_reps=$r
done
reps=$done_reps

join() { local IFS=';'; echo "$*"; }
{
  echo "metric,unit,engine_median,tcp_median,ratio_engine_over_tcp,reps,engine_crc,engine_runs,tcp_runs"
  emit() {  # metric unit engine-array-name tcp-array-name
    local -n e=$3 t=$4
    local em tm
    em=$(median "${e[@]}")
    tm=$(median "${t[@]}")
    echo "$1,$2,$em,$tm,$(ratio "$em" "$tm"),$reps,$crc_used,$(join "${e[@]}"),$(join "${t[@]}")"
  }
  emit send_lat_8B_median us e_med t_med
  emit send_lat_8B_p99 us e_p99 t_p99
  emit write_bw_1MiB MB/s e_bw t_bw
} >"$csv"

echo
echo "engine vs kernel TCP on 127.0.0.1: medians of $reps interleaved runs (engine CRC $([[ $crc_used == 1 ]] && echo on || echo off))"
echo "latency = half round trip, us; bandwidth in MB/s (10^6 B/s)"
awk -F, 'NR == 1 { printf "%-22s %12s %12s %12s\n", "metric", "engine", "tcp", "engine/tcp"; next }
         { printf "%-22s %12s %12s %12s\n", $1 " [" $2 "]", $3, $4, $5 }' "$csv"
echo "csv: $csv"
