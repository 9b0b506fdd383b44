#!/bin/bash
# Wire conformance: runs conformance_session between two engines on
# 127.0.0.1 while dumpcap captures lo, then has tshark's own iWARP dissectors
# (iwarp_mpa, iwarp_ddp_rdmap) decode the capture and wire_conformance_check.py
# compare what they saw with what the session says it sent. Three modes: MPA
# Rev 2 with CRCs, Rev 2 without CRCs, Rev 1 (with CRCs).
#
# Usage: wire_conformance_test.sh /path/to/conformance_session
# Exit: 0 pass, 1 fail (also when tshark, dumpcap or python3 is missing, or
# capture on lo is not permitted: a wire that cannot be checked is a failure).
# Environment: WIRE_CONFORMANCE_MODES (default "crc nocrc rev1"),
# WIRE_CONFORMANCE_SESSION_TIMEOUT (s, default 90), WIRE_CONFORMANCE_KEEP=1
# keeps the captures and reports (their temp dir is printed).
#
# tshark 4.0.17 (Debian 12) findings, checked by this test:
#  - FPDUs coalesced into one TCP segment (the session's bursts put up to ~34
#    in one segment) and FPDUs split across segments decode correctly with
#    tcp.desegment_tcp_streams (the default).
#  - MPA Rev 2 (RFC 6581) Request/Reply decode; tshark raises the expert
#    warning "Rev field is NOT set to one as required by RFC 5044" (RFC 5044
#    predates Rev 2). Only visible with `-z expert` (no tree item). Accepted in
#    the Rev 2 modes only. The RFC 6581 IRD/ORD word is shown as plain private
#    data; the checker decodes it.
#  - RFC 7306: Atomic Request/Response (opcodes 0xa/0xb) are fully decoded;
#    Immediate Data (0x8) and Immediate Data with SE (0x9) print as "OpCode:
#    Unknown" but are framed without errors, so they are checked by raw value.
#  - tshark's RPC-over-RDMA heuristic ("rpcrdma_iwarp"), tried on every Send
#    payload, throws "[Malformed Packet: RPCoRDMA]" on Sends shorter than
#    ~15 octets (incl. the empty Send): a tshark bug, Send payloads are opaque
#    ULP data. The strict decode disables that heuristic only; a second decode
#    with everything on must show no error from any other protocol.
#  - When CRCs are off, tshark skips the check (field iwarp_mpa.crc instead of
#    iwarp_mpa.crc_check); a bad CRC is not an expert item, only the text
#    "Bad CRC32" of iwarp_mpa.crc_check, which the checker reads from PDML.
set -u

session=${1:?usage: $0 /path/to/conformance_session}
here=$(cd "$(dirname "$0")" && pwd)
checker="$here/wire_conformance_check.py"
modes=${WIRE_CONFORMANCE_MODES:-"crc nocrc rev1"}

skip() { echo "FAIL (cannot check the wire): $*"; exit 1; }  # never a silent skip
for tool in tshark dumpcap python3 timeout; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
[ -x "$session" ] || { echo "FAIL: $session is not executable"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/wire_conformance.XXXXXX") || exit 1
cap_pid=
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  if [ -n "$cap_pid" ] && kill -0 "$cap_pid" 2>/dev/null; then
    kill -KILL "$cap_pid" 2>/dev/null
    wait "$cap_pid" 2>/dev/null
  fi
  if [ "${WIRE_CONFORMANCE_KEEP:-0}" = 1 ]; then
    echo "kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A port nobody listens on (the probe below re-checks it).
source "$(dirname "$0")/perf_server.sh"

# Starts dumpcap on lo for one TCP port; returns once it is really capturing.
start_capture() {  # file port errfile
  dumpcap -i lo -f "tcp port $2" -w "$1" -q 2>"$3" &
  cap_pid=$!
  for _ in $(seq 100); do  # up to 10 s
    if grep -q '^File: ' "$3" 2>/dev/null; then return 0; fi
    if ! kill -0 "$cap_pid" 2>/dev/null; then
      wait "$cap_pid" 2>/dev/null
      cap_pid=
      if grep -qi -E 'permission|not permitted|privilege' "$3"; then
        skip "cannot capture on lo: $(tr '\n' ' ' <"$3")"
      fi
      echo "FAIL: dumpcap exited: $(cat "$3")"
      return 1
    fi
    sleep 0.1
  done
  echo "FAIL: dumpcap did not start capturing within 10 s: $(cat "$3")"
  return 1
}

stop_capture() {  # errfile
  sleep 0.5  # let the last segments (FIN/RST) reach the capture
  kill -INT "$cap_pid" 2>/dev/null
  for _ in $(seq 100); do
    kill -0 "$cap_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$cap_pid" 2>/dev/null; then
    kill -KILL "$cap_pid" 2>/dev/null
    echo "FAIL: dumpcap did not stop within 10 s"
    wait "$cap_pid" 2>/dev/null
    cap_pid=
    return 1
  fi
  wait "$cap_pid" 2>/dev/null
  cap_pid=
  # "Packets received/dropped on interface 'Loopback: lo': 86/0 (...)"
  local dropped
  dropped=$(sed -n "s|^Packets received/dropped on interface.*: [0-9]*/\([0-9]*\).*|\1|p" "$1")
  if [ -n "$dropped" ] && [ "$dropped" != 0 ]; then
    echo "FAIL: the capture dropped $dropped packets"
    return 1
  fi
  return 0
}

run_mode() {  # mode
  local mode=$1 port pcap expected err
  pcap="$work/$mode.pcapng"
  expected="$work/$mode.expected"
  err="$work/$mode.dumpcap.err"
  port=$(free_port) || { echo "FAIL: no free port"; return 1; }
  start_capture "$pcap" "$port" "$err" || return 1
  # Probe: a refused connection to the port. It confirms the port is free and,
  # found first in the capture, that the capture was running before the session.
  if timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; then
    echo "FAIL [$mode]: something already listens on 127.0.0.1:$port"
    stop_capture "$err"
    return 1
  fi
  if ! timeout "${WIRE_CONFORMANCE_SESSION_TIMEOUT:-90}" "$session" --port "$port" --mode "$mode" --out "$expected"; then
    echo "FAIL [$mode]: conformance_session failed (see above)"
    stop_capture "$err"
    return 1
  fi
  stop_capture "$err" || return 1
  timeout 240 python3 "$checker" --pcap "$pcap" --expected "$expected" --port "$port" --probe
}

failed=0
for mode in $modes; do
  if ! run_mode "$mode"; then
    echo "wire conformance [$mode]: FAILED"
    failed=1
  fi
done
[ "$failed" = 0 ] && echo "wire conformance: all modes passed"
exit "$failed"
