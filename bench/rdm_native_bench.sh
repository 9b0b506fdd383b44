#!/usr/bin/env bash
# Time to the first message and memory per endpoint (bench/rdm_first_message.cc)
# of softrdma's own FI_EP_RDM, over the DPDK mesh and over kernel TCP, beside
# softrdma;ofi_rxm and tcp;ofi_rxm: R interleaved repetitions, medians per
# configuration and round (round 1: the first endpoints of two processes,
# which also set up what the processes share; round 2: a second pair of
# endpoints in the same processes). Prints a markdown table.
# usage: bench/rdm_native_bench.sh [-R reps] [-b build-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
reps=5
build=$(dirname "$here")/build
while getopts R:b: o; do
  case $o in
    R) reps=$OPTARG ;;
    b) build=$OPTARG ;;
    *) exit 2 ;;
  esac
done
tool=$build/bench/rdm_first_message
prov=$(cd "$build/prov" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -m 700 "$tmp/run"
cfgs=(native-dpdk native-kernel rxm-dpdk tcp-rxm)
run() {  # cfg -> the tool's lines
  local envs=(FI_PROVIDER_PATH="$prov" FI_SOFTRDMA_RUNDIR="$tmp/run") name=softrdma
  case $1 in
    native-dpdk) envs+=(FI_PROVIDER=^ofi_rxm) ;;
    native-kernel) envs+=(FI_PROVIDER=^ofi_rxm FI_SOFTRDMA_TRANSPORT=kernel) ;;
    rxm-dpdk) name="softrdma;ofi_rxm" ;;
    tcp-rxm) name="tcp;ofi_rxm" ;;
  esac
  env "${envs[@]}" timeout 60 "$tool" "$name"
}
for ((r = 0; r < reps; r++)); do
  for ((i = 0; i < ${#cfgs[@]}; i++)); do
    cfg=${cfgs[(i + r) % ${#cfgs[@]}]}
    run "$cfg" | sed "s/^/$cfg /" >>"$tmp/all"
  done
done
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { grep "^$1 round=$2 " "$tmp/all" | tr ' ' '\n' | grep "^$3=" | cut -d= -f2 | median; }
echo "Medians of $reps interleaved runs (two processes on this machine)."
echo
echo "| configuration | round | first message (ms) | sender's endpoint (kB) | receiver's endpoint (kB) |"
echo "|---|---|---|---|---|"
for cfg in "${cfgs[@]}"; do
  for round in 1 2; do
    echo "| $cfg | $round | $(field "$cfg" $round first_ms) | $(field "$cfg" $round tx_ep_kb) | $(field "$cfg" $round rx_ep_kb) |"
  done
done
