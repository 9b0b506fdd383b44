#!/usr/bin/env bash
# fi_pingpong side by side (issue 4): softrdma over the DPDK memif mesh,
# softrdma over kernel TCP, libfabric's tcp provider and shm provider, in one
# invocation, server and client as two processes on this machine (the client
# given 127.0.0.1):
#   -e msg: softrdma (dpdk), softrdma (kernel), tcp
#   -e rdm: softrdma;ofi_rxm (dpdk), softrdma;ofi_rxm (kernel), tcp;ofi_rxm, shm
# (shm has no msg endpoint). Each configuration runs at 8 B (-I lat-iters) and
# at 1 MiB (-I bw-iters), R times, interleaved: every repetition runs every
# configuration once per size, starting one configuration later each time, so
# drift in machine load hits all alike. Every run goes to
# bench/results/fi_pingpong_runs.csv, the medians to bench/results/fi_pingpong.csv,
# and a markdown table with the ratios issue 4 names (softrdma-dpdk 8 B latency
# over tcp's and over shm's; softrdma-dpdk 1 MiB bandwidth over tcp;ofi_rxm's)
# and whether each target is met is printed (and kept in $tmp, see -M).
#
# usage: bench/fi_pingpong_bench.sh [-R reps] [-b build-dir] [-n lat-iters]
#          [-N bw-iters] [-T run-timeout-s] [-B budget-s] [-M table.md]
#          [-c configs] [-r retries]
# -c takes a comma-separated subset of: sr-dpdk-msg,sr-kernel-msg,tcp-msg,
#    sr-dpdk-rdm,sr-kernel-rdm,tcp-rdm,shm-rdm,sr-dpdk-native (default: all); a softrdma one
#    as NAME@ref loads the provider of the build given with -V ref-build-dir
#    (a change's base, say), interleaved with the rest.
# Time is bounded: every fi_pingpong process has its own deadline (-T, default
# 120 s), and no new repetition starts once the budget (-B, default 1800 s) is
# spent; the medians are then over the repetitions completed. A failed run
# (non-zero exit or timeout of server or client, or no result row) is logged
# with both processes' output to stderr and bench/results/fi_pingpong_failures.log
# and retried (-r, default 1 retry); if every try fails the script stops with
# exit 1. The number of failed tries is printed with the table.
# Provider: <build-dir>/prov/libsoftrdma-fi.so (default build-dir: the first
# of build/, build-fb/, build-perf/ that has it). fi_pingpong's MB/sec counts
# the bytes of both directions (10^6 B/s); usec/xfer is half a round trip.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
reps=5
build=""
# fi_pingpong has no warm-up, and ofi_rxm connects on the first message, so
# an -e rdm run's mean includes the connection set-up (about 20 ms for
# tcp;ofi_rxm, 30-35 ms for softrdma;ofi_rxm, most of it rxm's own buffer
# pools): with 10000 round trips that added 1-1.7 us to each 8 B half round
# trip. Enough iterations make it a few percent.
lat_iters=100000
bw_iters=5000
run_timeout=120
budget=1800
md_out=""
only=""
retries=1
ref_build=""
failures=0
all_cfgs=(sr-dpdk-msg sr-kernel-msg tcp-msg sr-dpdk-rdm sr-kernel-rdm tcp-rdm shm-rdm sr-dpdk-native)

while [[ $# -gt 0 ]]; do
  case $1 in
    -R) reps=$2; shift 2 ;;
    -b) build=$2; shift 2 ;;
    -n) lat_iters=$2; shift 2 ;;
    -N) bw_iters=$2; shift 2 ;;
    -T) run_timeout=$2; shift 2 ;;
    -B) budget=$2; shift 2 ;;
    -M) md_out=$2; shift 2 ;;
    -c) only=$2; shift 2 ;;
    -r) retries=$2; shift 2 ;;
    -V) ref_build=$2; shift 2 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "fi_pingpong_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "fi_pingpong_bench: -R needs a positive count" >&2; exit 2; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong_bench: fi_pingpong not found (libfabric-bin)" >&2; exit 2; }

for d in $build "$root/build" "$root/build-fb" "$root/build-perf"; do
  if [[ -f $d/prov/libsoftrdma-fi.so ]]; then
    build=$d
    break
  fi
done
provdir=$build/prov
if [[ ! -f $provdir/libsoftrdma-fi.so ]]; then
  echo "fi_pingpong_bench: libsoftrdma-fi.so not found; build target softrdma-fi or pass -b" >&2
  exit 2
fi
provdir=$(cd "$provdir" && pwd)

cfgs=("${all_cfgs[@]}")
if [[ -n $only ]]; then
  IFS=, read -r -a cfgs <<<"$only"
  for c in "${cfgs[@]}"; do
    [[ " ${all_cfgs[*]} " == *" ${c%@ref} "* ]] || { echo "fi_pingpong_bench: unknown configuration $c" >&2; exit 2; }
    if [[ $c == *@ref && ! -f $ref_build/prov/libsoftrdma-fi.so ]]; then
      echo "fi_pingpong_bench: $c needs -V with a built libsoftrdma-fi.so" >&2
      exit 2
    fi
  done
fi

# cfg NAME -> provider, endpoint type, softrdma transport ("" for peers).
declare -A c_prov c_ep c_tr
# sr-dpdk-native: softrdma's own FI_EP_RDM (ofi_rxm left out of the list).
c_prov=([sr-dpdk-msg]=softrdma [sr-kernel-msg]=softrdma [tcp-msg]=tcp
        [sr-dpdk-rdm]="softrdma;ofi_rxm" [sr-kernel-rdm]="softrdma;ofi_rxm"
        [tcp-rdm]="tcp;ofi_rxm" [shm-rdm]=shm [sr-dpdk-native]=softrdma)
c_ep=([sr-dpdk-msg]=msg [sr-kernel-msg]=msg [tcp-msg]=msg [sr-dpdk-rdm]=rdm
      [sr-kernel-rdm]=rdm [tcp-rdm]=rdm [shm-rdm]=rdm [sr-dpdk-native]=rdm)
c_tr=([sr-dpdk-msg]=dpdk [sr-kernel-msg]=kernel [tcp-msg]="" [sr-dpdk-rdm]=dpdk
      [sr-kernel-rdm]=kernel [tcp-rdm]="" [shm-rdm]="" [sr-dpdk-native]=dpdk)

results=$here/results
mkdir -p "$results"
runs_csv=$results/fi_pingpong_runs.csv
fail_log=$results/fi_pingpong_failures.log
med_csv=$results/fi_pingpong.csv
tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    sleep 0.5
    kill -9 "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "fi_pingpong_bench: interrupted" >&2; exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# run_once CFG SIZE ITERS: one server/client pair of fi_pingpong; sets r_usec,
# r_mbs, r_wall from the client's result row; returns 1 (logs printed) if the
# client or the server failed or timed out, or no result row appeared.
run_once() {
  local cfg=$1 size=$2 iters=$3 port t0 ok=0 envs=() dir=$provdir
  local base=${cfg%@ref}
  local prov=${c_prov[$base]} ep=${c_ep[$base]} tr=${c_tr[$base]}
  [[ $cfg == *@ref ]] && dir=$(cd "$ref_build/prov" && pwd)
  if [[ -n $tr ]]; then
    # Only the softrdma runs load our provider; a private rendezvous directory
    # keeps other jobs' meshes on this machine out of the way.
    envs=(FI_PROVIDER_PATH="$dir" FI_SOFTRDMA_TRANSPORT="$tr"
          FI_SOFTRDMA_RUNDIR="${FI_SOFTRDMA_RUNDIR:-$tmp/run}")
    [[ $base == sr-dpdk-native ]] && envs+=(FI_PROVIDER=^ofi_rxm)
    mkdir -p "$tmp/run"
  fi
  local args=(-p "$prov" -e "$ep" -I "$iters" -S "$size")
  local desc="FI_SOFTRDMA_TRANSPORT=${tr:-n/a} fi_pingpong ${args[*]}"
  port=$(free_port)
  t0=$(date +%s.%N)
  env "${envs[@]}" timeout -k 5 "$run_timeout" fi_pingpong "${args[@]}" -B "$port" \
    >"$tmp/server.log" 2>&1 &
  server_pid=$!
  sleep 0.1
  for _ in $(seq 50); do  # the server's control socket appears when it is ready
    if env "${envs[@]}" timeout -k 5 "$run_timeout" fi_pingpong "${args[@]}" -P "$port" \
        127.0.0.1 >"$tmp/client.log" 2>&1; then
      ok=1
      break
    fi
    grep -q "Connection refused\|ctrl/connect" "$tmp/client.log" || break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  local srv_ok=1
  wait "$server_pid" || srv_ok=0
  server_pid=""
  r_wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  # The result row: the line after fi_pingpong's header "bytes #sent ...".
  r_mbs="" r_usec=""
  read -r r_mbs r_usec < <(awk '$1 == "bytes" && $7 == "usec/xfer" { h = 1; next }
                                h && NF >= 8 { print $6, $7; exit }' "$tmp/client.log") || true
  if [[ $ok != 1 || $srv_ok != 1 || -z ${r_usec:-} ]]; then
    {
      echo "fi_pingpong_bench: FAILED ($cfg, ${size} B, after ${r_wall} s, $(date -u +%FT%TZ)," \
           "load $(cut -d' ' -f1-3 /proc/loadavg)): $desc (client ok=$ok, server ok=$srv_ok;" \
           "a run longer than -T $run_timeout s was killed)"
      echo "--- client: ... -P $port 127.0.0.1"; cat "$tmp/client.log"
      echo "--- server: ... -B $port"; cat "$tmp/server.log"
    } | tee -a "$fail_log" >&2
    return 1
  fi
}

# run CFG SIZE ITERS: run_once, retried -r times; a run that fails every time
# ends the script (every failure is in bench/results/fi_pingpong_failures.log).
run() {
  local a
  for ((a = 0; a <= retries; ++a)); do
    run_once "$@" && return 0
    failures=$((failures + 1))
    ((a < retries)) && echo "fi_pingpong_bench: retrying $1 at $2 B" >&2
  done
  echo "fi_pingpong_bench: $1 at $2 B failed $((retries + 1)) times in a row; stopping" >&2
  exit 1
}

median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR % 2) printf "%.3f\n", v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

sizes=(8 1048576)
declare -A iters_of=([8]=$lat_iters [1048576]=$bw_iters)
declare -A usec mbs  # "cfg size" -> ';'-joined values of every run
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
rm -f "$fail_log"  # written only if a try fails
echo "config,provider,ep,transport,rep,size_B,iters,usec_per_xfer,MB_per_s,wall_s,loadavg_1m" >"$runs_csv"
done_reps=0
n=${#cfgs[@]}
for ((r = 1; r <= reps; ++r)); do
  if ((SECONDS > budget)); then
    echo "fi_pingpong_bench: time budget of ${budget} s spent after $done_reps repetitions" >&2
    break
  fi
  echo "fi_pingpong_bench: repetition $r/$reps (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  for size in "${sizes[@]}"; do
    for ((k = 0; k < n; ++k)); do
      cfg=${cfgs[$(((k + r - 1) % n))]}
      run "$cfg" "$size" "${iters_of[$size]}"
      printf '  %-14s %8s B  %10s usec/xfer %10s MB/s  (%s s)\n' "$cfg" "$size" "$r_usec" "$r_mbs" "$r_wall" >&2
      echo "$cfg,${c_prov[${cfg%@ref}]},${c_ep[${cfg%@ref}]},${c_tr[${cfg%@ref}]:-},$r,$size,${iters_of[$size]},$r_usec,$r_mbs,$r_wall,$(cut -d' ' -f1 /proc/loadavg)" >>"$runs_csv"
      usec["$cfg $size"]+="${usec["$cfg $size"]:+;}$r_usec"
      mbs["$cfg $size"]+="${mbs["$cfg $size"]:+;}$r_mbs"
    done
  done
  done_reps=$r
done
reps=$done_reps
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
((reps > 0)) || { echo "fi_pingpong_bench: no repetition completed" >&2; exit 1; }

# med CFG SIZE usec|mbs: the median over the runs ("" if not measured).
med() {
  local -n arr=$3
  local v=${arr["$1 $2"]:-}
  [[ -n $v ]] || return 0
  local IFS=';'
  # shellcheck disable=SC2086
  median $v
}

{
  echo "config,provider,ep,transport,reps,lat_8B_usec_median,bw_8B_MBps_median,lat_1MiB_usec_median,bw_1MiB_MBps_median,lat_8B_runs,bw_1MiB_runs,started_utc,loadavg_start,loadavg_end"
  for cfg in "${cfgs[@]}"; do
    echo "$cfg,${c_prov[${cfg%@ref}]},${c_ep[${cfg%@ref}]},${c_tr[${cfg%@ref}]:-},$reps,$(med "$cfg" 8 usec),$(med "$cfg" 8 mbs),$(med "$cfg" 1048576 usec),$(med "$cfg" 1048576 mbs),${usec["$cfg 8"]:-},${mbs["$cfg 1048576"]:-},$started,$load_start,$load_end"
  done
} >"$med_csv"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.3f", a / b; else printf "n/a" }'; }
# target RATIO OP LIMIT -> yes/no/n/a
target() { awk -v x="$1" -v op="$2" -v l="$3" 'BEGIN { if (x == "n/a") print "n/a";
           else if (op == "<=") print (x + 0 <= l + 0 ? "**yes**" : "no"); else print (x + 0 >= l + 0 ? "**yes**" : "no") }'; }

table=$tmp/table.md
{
  echo "fi_pingpong, server and client on one machine (client given 127.0.0.1), medians of $reps interleaved runs;"
  echo "8 B: -I $lat_iters, 1 MiB: -I $bw_iters; load average $load_start at the start, $load_end at the end;"
  echo "$failures failed tries (retried; see fi_pingpong_failures.log)."
  echo
  echo "| configuration | provider | ep | 8 B latency (usec/xfer) | 1 MiB bandwidth (MB/s) | 1 MiB latency (usec/xfer) |"
  echo "|---|---|---|---|---|---|"
  for cfg in "${cfgs[@]}"; do
    echo "| $cfg | \`${c_prov[${cfg%@ref}]}\`${c_tr[${cfg%@ref}]:+ (${c_tr[${cfg%@ref}]})} | ${c_ep[${cfg%@ref}]} | $(med "$cfg" 8 usec) | $(med "$cfg" 1048576 mbs) | $(med "$cfg" 1048576 usec) |"
  done
  echo
  echo "Issue 4's targets for softrdma over DPDK (ratio of medians):"
  echo
  echo "| target | softrdma-dpdk | peer | ratio | limit | met |"
  echo "|---|---|---|---|---|---|"
  row() {  # label mine-cfg peer-cfg size usec|mbs op limit
    local a b x
    a=$(med "$2" "$4" "$5")
    b=$(med "$3" "$4" "$5")
    x=$(ratio "$a" "$b")
    echo "| $1 | ${a:-n/a} ($2) | ${b:-n/a} ($3) | $x | $6 $7 | $(target "$x" "$6" "$7") |"
  }
  row "8 B latency vs tcp (msg)" sr-dpdk-msg tcp-msg 8 usec "<=" 0.25
  row "8 B latency vs tcp;ofi_rxm (rdm)" sr-dpdk-rdm tcp-rdm 8 usec "<=" 0.25
  row "8 B latency vs shm (msg vs shm rdm)" sr-dpdk-msg shm-rdm 8 usec "<=" 2
  row "8 B latency vs shm (rdm)" sr-dpdk-rdm shm-rdm 8 usec "<=" 2
  row "1 MiB bandwidth vs tcp;ofi_rxm (msg)" sr-dpdk-msg tcp-rdm 1048576 mbs ">=" 1
  row "1 MiB bandwidth vs tcp;ofi_rxm (rdm)" sr-dpdk-rdm tcp-rdm 1048576 mbs ">=" 1
  echo
  echo "Issue 16's target for softrdma's own FI_EP_RDM (ratio of medians), with its peers:"
  echo
  echo "| target | softrdma-dpdk | peer | ratio | limit | met |"
  echo "|---|---|---|---|---|---|"
  row "native rdm 8 B latency vs softrdma msg" sr-dpdk-native sr-dpdk-msg 8 usec "<=" 1.1
  row "native rdm 8 B latency vs softrdma;ofi_rxm" sr-dpdk-native sr-dpdk-rdm 8 usec "<=" 1
  row "native rdm 8 B latency vs tcp;ofi_rxm" sr-dpdk-native tcp-rdm 8 usec "<=" 1
  row "native rdm 1 MiB bandwidth vs softrdma;ofi_rxm" sr-dpdk-native sr-dpdk-rdm 1048576 mbs ">=" 1
} >"$table"
echo
cat "$table"
[[ -n $md_out ]] && cp "$table" "$md_out"
echo
echo "csv: $med_csv (medians), $runs_csv (every run)"
