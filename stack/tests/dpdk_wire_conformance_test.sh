#!/usr/bin/env bash
# Wire conformance of the DPDK path: srdma_perf sessions over the embedded
# memif mesh (lwIP on DPDK, nothing configured) recorded by the engine itself
# (FI_SOFTRDMA_PCAP), then decoded by tshark's iwarp_mpa / iwarp_ddp_rdmap
# dissectors and judged by wire_conformance_check.py --session: no malformed
# frame, no expert error, every TCP payload octet covered by the MPA
# Request/Reply and FPDUs tshark decoded, the CRC of every FPDU checked and
# good (CRC on) or absent (CRC off), DDP/RDMAP header fields, MSN/MO and
# STag/TO continuity of every message, the client's FIN in the capture, and
# the operation's RDMAP opcodes present. One session per operation (send,
# write, read, write_imm, fadd, cas; data verified with -c), CRC on and off.
#
# Ports: the mesh's listeners are published 127.0.0.1 ports, so the MPA
# traffic runs on random ports; the checker makes tshark try its heuristic
# dissectors first (tcp.try_heuristic_first), which is how iwarp_mpa finds
# the MPA Request on any port, as in wire_conformance_test.sh.
#
# usage: dpdk_wire_conformance_test.sh <path-to-srdma_perf>
# Exit: 0 pass, 1 fail (also when tshark or python3 is missing: a wire that
# cannot be checked is a failure). DPDK_WIRE_KEEP=1 keeps the captures.
set -u

perf=${1:?usage: dpdk_wire_conformance_test.sh <path-to-srdma_perf>}
here=$(cd "$(dirname "$0")" && pwd)
checker="$here/wire_conformance_check.py"
fail() { echo "dpdk_wire_conformance_test: FAIL: $*"; exit 1; }
for tool in tshark python3 timeout; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not installed (cannot check the wire)"
done
[[ -x $perf ]] || fail "$perf is not executable"

run_timeout=60
work=$(mktemp -d "${TMPDIR:-/tmp}/dpdk_wire.XXXXXX") || fail "mktemp"
server_pid=""
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  if [[ ${DPDK_WIRE_KEEP:-0} == 1 ]]; then echo "kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
export FI_SOFTRDMA_TRANSPORT=dpdk

source "$(dirname "$0")/perf_server.sh"

# session NAME CRC OPCODES CLIENT_ARGS...: one recorded session, then the check.
session() {
  local name=$1 crc=$2 opcodes=$3
  shift 3
  local dir="$work/$name" port rc src i start=$SECONDS
  mkdir -p "$dir"
  : >"$dir/server.log"
  port=$(free_port) || { echo "FAIL $name: no free port"; return 1; }
  timeout $((run_timeout + 15)) "$perf" -p "$port" --timeout "$run_timeout" --crc "$crc" \
    >"$dir/server.log" 2>&1 &
  server_pid=$!
  wait_listening "$server_pid" "$dir/server.log" "$port"
  # The client records its link to the server; --linger keeps its engine
  # polling after the close so the capture's last buffer is written.
  FI_SOFTRDMA_PCAP="$dir/client-%n.pcap" timeout $((run_timeout + 15)) "$perf" -p "$port" \
    --timeout "$run_timeout" --linger 1.5 --crc "$crc" -c "$@" 127.0.0.1 >"$dir/client.log" 2>&1
  rc=$?
  [[ $rc -ne 0 ]] && kill "$server_pid" 2>/dev/null  # it would wait for its deadline
  wait "$server_pid"
  src=$?
  server_pid=""
  local pcaps=("$dir"/client-*.pcap)
  if [[ $rc -ne 0 || $src -ne 0 ]]; then
    echo "FAIL $name: client exit $rc, server exit $src (1: data mismatch, 2: error, 124: timed out)"
  elif ! grep -q "| transport dpdk | crc $([[ $crc == 1 ]] && echo on || echo off) |" "$dir/client.log"; then
    echo "FAIL $name: not a dpdk session with crc=$crc"
  elif [[ ${#pcaps[@]} -ne 1 || ! -s ${pcaps[0]} ]]; then
    echo "FAIL $name: want one capture of the client's one link, got: ${pcaps[*]}"
  elif timeout 200 python3 "$checker" --pcap "${pcaps[0]}" --port "$port" \
         --session "crc=$crc,rev=2,rtr=1" --want-opcodes "$opcodes" >"$dir/check.log" 2>&1; then
    echo "ok   $name ($((SECONDS - start)) s): $(sed -n 's/^wire conformance \[[^]]*\]: OK: //p' "$dir/check.log")"
    return 0
  else
    echo "FAIL $name: the capture does not conform"
    cat "$dir/check.log"
  fi
  echo "--- client: $*"
  cat "$dir/client.log"
  echo "--- server"
  cat "$dir/server.log"
  return 1
}

# RDMAP opcodes (RFC 5040 / 7306): 0 Write, 1 Read Request, 2 Read Response,
# 3 Send, 8 Immediate Data, 10 Atomic Request, 11 Atomic Response. srdma_perf's
# control messages are Writes, so 0 appears in every session.
sizes="0,1,4095,9001,65536,262147"
failed=0
passed=0
for crc in 1 0; do
  for spec in "send 0,3" "write 0" "read 0,1,2" "write_imm 0,8" "fadd 0,10,11" "cas 0,10,11"; do
    op=${spec% *}
    ops=${spec#* }
    case $op in
      fadd|cas) args=(-t bw -n 64 -d 16) ;;
      *) args=(-t bw -s "$sizes" -n 3 -d 8) ;;
    esac
    if session "$op-crc$crc" "$crc" "$ops" -o "$op" "${args[@]}"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
    fi
  done
done
echo "dpdk_wire_conformance_test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
