#!/usr/bin/env bash
# srdma_perf as two processes over 127.0.0.1 with data verification on:
# every operation (send, write, read, write_imm, fadd, cas), latency and
# bandwidth, message sizes from 0 B to 64 MiB, MPA CRC off and on, plus a
# pass with MPA markers. Fails if any run fails or times out.
#
# With FI_SOFTRDMA_FAULTS set (frames dropped, duplicated, reordered and
# corrupted on the DPDK path), it also requires that every kind of fault set
# there was actually injected: the processes print what they injected at exit.
#
# TWO_PROCESS_KINDS narrows the runs to "lat" or "bw" (default both).
#
# usage: two_process_test.sh <path-to-srdma_perf>
# Every run gets its own free port, so ctest -j is safe.
set -u

perf=${1:?usage: two_process_test.sh <path-to-srdma_perf>}
[[ -x $perf ]] || { echo "two_process_test: $perf is not executable" >&2; exit 2; }

run_timeout=60  # seconds per run (the tool's own deadline; timeout(1) backs it up)
sizes="0,1,4095,64K,1M,64M"
tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

source "$(dirname "$0")/perf_server.sh"

# Starts a server on a free port (retrying if the port was taken meanwhile);
# sets port and server_pid. Extra arguments go to the server.
start_server() {
  local attempt
  for ((attempt = 0; attempt < 5; ++attempt)); do
    port=$(free_port)
    : >"$tmp/server.log"
    timeout $((run_timeout + 15)) "$perf" -p "$port" --timeout "$run_timeout" "$@" \
      >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_listening "$server_pid" "$tmp/server.log" "$port" && return 0
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=""
  done
  return 1
}

passed=0
failed=0
failures=()

# Both processes write their counters (docs/counters.md) when they close;
# they must agree with the traffic: every payload byte placed with exactly
# one copy, over DPDK every payload byte carried in link frames, and over
# memif every frame lent to the port, not copied by the stack (unless frames
# are damaged on purpose: the fault decorator takes copies).
export FI_SOFTRDMA_STATS=$tmp/stats.log
over_dpdk=0
[[ ${FI_SOFTRDMA_TRANSPORT:-dpdk} == dpdk ]] && over_dpdk=1
lent=$over_dpdk
[[ -n ${FI_SOFTRDMA_FAULTS:-} || -n ${FI_SOFTRDMA_PCAP:-} ]] && lent=0
check_counters() {
  awk -v dpdk="$over_dpdk" -v lent="$lent" '
    / counters: / {
      ++n
      for (i = 5; i <= NF; ++i) { split($i, kv, "="); c[kv[1]] = kv[2] + 0 }
      if (c["rx_copy_bytes"] != c["payload_rx"]) bad = bad " rx_copy_bytes " c["rx_copy_bytes"] " != payload_rx " c["payload_rx"]
      if (dpdk && c["tx_bytes"] < c["payload_tx"]) bad = bad " tx_bytes " c["tx_bytes"] " < payload_tx " c["payload_tx"]
      if (dpdk && c["rx_bytes"] < c["payload_rx"]) bad = bad " rx_bytes " c["rx_bytes"] " < payload_rx " c["payload_rx"]
      if (c["fpdus_tx"] == 0 || c["fpdus_rx"] == 0) bad = bad " no FPDUs"
      if (lent && c["tx_lent"] != c["tx_packets"]) bad = bad " tx_lent " c["tx_lent"] " != tx_packets " c["tx_packets"]
    }
    END {
      if (n != 2) bad = bad " " n + 0 " counter lines, expected 2"
      if (bad != "") { print "counters:" bad; exit 1 }
    }' "$tmp/stats.log"
}

# run_case NAME SERVER_ARGS... -- CLIENT_ARGS...
run_case() {
  local name=$1
  shift
  local sargs=() cargs=()
  while [[ $1 != -- ]]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  local start=$SECONDS ok=1 crc rc src
  if ! start_server "${sargs[@]}"; then
    echo "FAIL $name: the server did not start"
    cat "$tmp/server.log"
    failed=$((failed + 1))
    failures+=("$name")
    return
  fi
  timeout $((run_timeout + 15)) "$perf" -p "$port" --timeout "$run_timeout" "${cargs[@]}" 127.0.0.1 \
    >"$tmp/client.log" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] || ok=0
  wait "$server_pid"
  src=$?
  server_pid=""
  [[ $src -eq 0 ]] || ok=0
  check_counters || ok=0
  : >"$tmp/stats.log"
  cat "$tmp/client.log" "$tmp/server.log" | grep -h '^softrdma: faults injected' >>"$tmp/faults.log"
  if [[ $ok -eq 1 ]]; then
    passed=$((passed + 1))
    echo "ok   $name ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "FAIL $name: client exit $rc, server exit $src (124: timed out)"
    echo "--- client: ${cargs[*]}"
    cat "$tmp/client.log"
    echo "--- server: ${sargs[*]}"
    cat "$tmp/server.log"
  fi
}

for crc in 0 1; do
  for kind in ${TWO_PROCESS_KINDS:-lat bw}; do
    for op in send write read write_imm fadd cas; do
      case $op in
        fadd|cas) args=(-n 500) ;;
        write) [[ $kind == lat ]] && args=(-s "${sizes#0,}") || args=(-s "$sizes")
               args+=(-n 20 --max-bytes 64M) ;;
        *) args=(-s "$sizes" -n 20 --max-bytes 64M) ;;
      esac
      run_case "$op $kind crc=$crc" --crc "$crc" -- -o "$op" -t "$kind" -c --crc "$crc" "${args[@]}"
    done
  done
done
# Markers change the stream layout under every FPDU: one pass each way.
run_case "send bw markers" --crc 1 --markers -- -o send -t bw -c --crc 1 --markers -s "$sizes" -n 20 --max-bytes 64M
run_case "write lat markers" --crc 1 --markers -- -o write -t lat -c --crc 1 --markers -s "${sizes#0,}" -n 20 --max-bytes 64M

# Faults asked for must have happened, or the runs proved nothing.
if [[ -n ${FI_SOFTRDMA_FAULTS:-} ]]; then
  for kind in drop:dropped dup:duplicated reorder:reordered corrupt:corrupted; do
    [[ ,$FI_SOFTRDMA_FAULTS =~ ,${kind%%:*}=0*\.?0*[1-9] ]] || continue
    n=$(awk -v k="${kind#*:}" '{for (i = 1; i < NF; ++i) if ($i == k) s += $(i + 1)} END {print s + 0}' \
      "$tmp/faults.log" 2>/dev/null)
    echo "faults: ${kind#*:} ${n:-0}"
    if [[ ${n:-0} -eq 0 ]]; then
      failed=$((failed + 1))
      failures+=("no frame was ${kind#*:} although FI_SOFTRDMA_FAULTS=$FI_SOFTRDMA_FAULTS")
    fi
  done
fi

echo "two_process_test: $passed passed, $failed failed"
if [[ $failed -gt 0 ]]; then
  printf '  failed: %s\n' "${failures[@]}"
  exit 1
fi
