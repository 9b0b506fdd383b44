#!/usr/bin/env bash
# Wire faults over the DPDK path (issue 6): srdma_soak server and client on
# this host over the embedded memif mesh, with FI_SOFTRDMA_FAULTS damaging
# frames (stack/net/fault_link.h).
#  a. rates: frames dropped, duplicated, reordered and corrupted at 5 % each,
#     in both processes: the run completes with every byte verified (exit 0
#     of both tools), each kind was injected, and the corrupted frames were
#     refused by the TCP checksum (rx_errors), never delivered as data.
#  b. reset: the server turns received segments into RSTs (reset=P), as a
#     peer or middlebox resetting connections would: the client sees its
#     connection reset ("Connection reset by peer") and exits with a lost
#     connection within 5 s of the first reset; the server logs each lost connection as survived, the
#     reset one as reset, and exits 0 with QPs, MRs, connections, frames and
#     mbufs back at their baseline and no mismatch.
#  c. kill: KILLS (5) clients SIGKILLed 0.5-2 s into their transfers, on the
#     memif mesh (peer_fault_test does the same between namespace hosts over
#     af_packet): the server, polling the dead peers' links as they vanish,
#     survives; it logs every connection it accepted from the dead clients
#     as lost within 60 s, then exits 0 with its resources back at baseline.
#
# usage: wire_fault_test.sh <path-to-srdma_soak>   (root: DPDK)
set -u

soak=${1:?usage: wire_fault_test.sh <path-to-srdma_soak>}
[[ -x $soak ]] || { echo "wire_fault_test: $soak is not executable" >&2; exit 2; }
source "$(dirname "$0")/perf_server.sh"  # free_port, wait_listening

tmp=$(mktemp -d "${TMPDIR:-/tmp}/wire_fault.XXXXXX")
server_pid=""
keep=""
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  if [[ -n $keep ]]; then echo "logs kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
export FI_SOFTRDMA_TRANSPORT=dpdk

die() {
  echo "wire_fault_test: FAIL: $*"
  for f in "$tmp"/*.log; do echo "--- $(basename "$f") (last 12 lines)"; tail -12 "$f"; done
  # Both processes' link and stack counters at exit: which side stopped.
  [[ -s $tmp/stats ]] && { echo "--- stats"; cat "$tmp/stats"; }
  keep=1
  exit 1
}

# start_server FAULTS ARGS...: sets port and server_pid; log in server.log.
start_server() {
  local faults=$1 attempt
  shift
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    : >"$tmp/server.log"
    FI_SOFTRDMA_FAULTS=$faults timeout 150 "$soak" --server -p "$port" --timeout 120 --report 1 "$@" \
      >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_listening "$server_pid" "$tmp/server.log" "$port" 30 && return 0
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=""
  done
  die "the server did not start"
}
wait_server() {
  wait "$server_pid"
  server_rc=$?
  server_pid=""
}
# injected KIND: what both processes' fault links say they injected.
injected() {
  cat "$tmp"/*.log | awk -v k="$1" '/^softrdma: faults injected/ {
    for (i = 1; i < NF; ++i) if ($i == k) s += $(i + 1) } END { print s + 0 }'
}
# counter NAME: summed over both processes' FI_SOFTRDMA_STATS lines.
counter() {
  awk -v k="$1" '/ counters: / { for (i = 1; i <= NF; ++i) { split($i, kv, "=")
    if (kv[1] == k) s += kv[2] } } END { print s + 0 }' "$tmp/stats"
}

# --- a. 5 % of each fault in both processes -------------------------------------
t=$SECONDS
rates=drop=0.05,dup=0.05,reorder=0.05,corrupt=0.05
export FI_SOFTRDMA_STATS=$tmp/stats
start_server "$rates"
FI_SOFTRDMA_FAULTS=$rates timeout 130 "$soak" -p "$port" --timeout 100 --report 2 -d 15 -n 4 \
  --churn 20 127.0.0.1 >"$tmp/client.log" 2>&1
rc=$?
wait_server
((rc == 0 && server_rc == 0)) || die "rates: client exit $rc, server exit $server_rc (0 expected)"
grep -q 'SUMMARY .* errors 0 ' "$tmp/client.log" || die "rates: the client's summary shows errors"
for kind in dropped duplicated reordered corrupted; do
  (($(injected $kind) > 0)) || die "rates: nothing $kind"
done
refused=$(counter rx_errors)
(($(counter rx_errors) > 0)) || die "rates: no corrupted frame refused by a checksum"
echo "ok   rates 5 %: $(grep -o 'ops [0-9]* bytes_verified [0-9]*' "$tmp/client.log" | tail -1)," \
  "injected dropped $(injected dropped) duplicated $(injected duplicated) reordered" \
  "$(injected reordered) corrupted $(injected corrupted), refused by checksums $refused," \
  "MPA CRC errors $(counter crc_errors) ($((SECONDS - t)) s)"
unset FI_SOFTRDMA_STATS
rm -f "$tmp"/*.log

# --- b. connections reset --------------------------------------------------------
t=$SECONDS
start_server reset=0.0005 --serve-until-idle 4 --stall 30
timeout 60 "$soak" -p "$port" --timeout 40 --report 0.5 -d 10 -n 4 --no-bye 127.0.0.1 \
  >"$tmp/client.log" 2>&1
rc=$?
t_out=$(date +%s.%N)
wait_server
# From the first reset (the server's first lost connection, which it logs
# with the time) to the client's exit: how long the client took to notice,
# whatever the load made of the transfers before it.
t_reset=$(grep -o 'lost before the end .*(at [0-9.]*)' "$tmp/server.log" |
  grep -o '(at [0-9.]*)' | tr -d '(at )' | sort -n | head -1)
[[ -n $t_reset ]] || die "reset: the server logged no lost connection"
took=$(awk -v a="$t_reset" -v b="$t_out" 'BEGIN { printf "%.2f", b - a }')
((rc == 2)) || die "reset: client exit $rc (2 expected: a connection lost)"
grep -q 'srdma_soak client: connection .*Connection reset by peer' "$tmp/client.log" ||
  die "reset: the client's lost connection does not say it was reset"
awk -v s="$took" 'BEGIN { exit !(s < 5) }' || die "reset: the client took $took s to see the reset"
(($(injected reset) > 0)) || die "reset: no segment reset"
((server_rc == 0)) || die "reset: server exit $server_rc"
grep -q 'lost before the end .*Connection reset by peer; survived' "$tmp/server.log" ||
  die "reset: the server did not log a connection reset it survived"
grep -q 'SERVER RESOURCES .* qps 0 mrs 0 conns 0 held frames 0 mbufs in use 0 .* back' "$tmp/server.log" ||
  die "reset: the server's resources are not back"
grep -q 'SERVER SUMMARY .* mismatches 0 ' "$tmp/server.log" || die "reset: mismatches at the server"
echo "ok   reset: $(injected reset) segment(s) reset; client out in $took s:" \
  "$(grep -o 'connection [0-9]* lost.*' "$tmp/client.log" | head -1);" \
  "server: $(grep -c '; survived' "$tmp/server.log") lost connections survived" \
  "($(grep -c 'Connection reset by peer; survived' "$tmp/server.log") reset), resources back ($((SECONDS - t)) s)"

# --- c. SIGKILLed clients on the memif mesh ------------------------------------------
t=$SECONDS
kills=${KILLS:-5}
rm -f "$tmp"/*.log
# RSS within 16 MiB of the first idle point: five clients' transfers leave
# the heap of a slow run up to 10 MiB larger (glibc keeps what it freed);
# the counts of QPs, MRs, connections, frames and mbufs are exact.
start_server "" --serve-until-idle 4 --stall 90 --flat-mib 16
for ((k = 1; k <= kills; ++k)); do
  "$soak" -p "$port" --timeout 60 --report 0.25 -d 30 -n 4 --no-bye 127.0.0.1 >"$tmp/kill$k.log" 2>&1 &
  pid=$!
  for ((i = 0; i < 200; ++i)); do grep -qs '^\[.* main ' "$tmp/kill$k.log" && break; sleep 0.05; done
  sleep "0.$((RANDOM % 10))$((RANDOM % 10))"  # and up to 1 s more
  sleep 0.5
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  kill -0 "$server_pid" 2>/dev/null || die "kill: the server died with client $k"
done
lost=0
for ((i = 0; i < 120; ++i)); do
  lost=$(grep -c '; survived' "$tmp/server.log")
  ((lost >= 4 * kills)) && break
  kill -0 "$server_pid" 2>/dev/null || break  # served until idle: judged below
  sleep 0.5
done
wait_server
((server_rc == 0)) || die "kill: server exit $server_rc ($lost lost connections logged)"
# Every connection the server accepted is logged as lost. A client killed
# while it connects may leave fewer than its 4 (a failed accept, or an MPA
# exchange that never finished, which no application sees).
read -r accepted lost < <(awk '/^SERVER SUMMARY/ { for (i = 1; i < NF; ++i) {
  if ($i == "conns") c = $(i + 1); if ($i == "lost") l = $(i + 1) } } END { print c + 0, l + 0 }' \
  "$tmp/server.log")
((accepted >= 4 && lost == accepted)) ||
  die "kill: $lost of the $accepted connections accepted from dead clients logged as lost"
grep -q 'SERVER RESOURCES .* qps 0 mrs 0 conns 0 held frames 0 mbufs in use 0 .* back' "$tmp/server.log" ||
  die "kill: the server's resources are not back"
grep -q 'SERVER SUMMARY .* mismatches 0 ' "$tmp/server.log" || die "kill: mismatches at the server"
echo "ok   kill: $kills clients SIGKILLed, the server survived: $lost of $accepted connections lost" \
  "($(grep -c 'Connection reset by peer; survived' "$tmp/server.log") as reset, noticed" \
  "$(awk '/; survived/ { for (i = 1; i < NF; ++i) if ($i == "after") { s = $(i + 1)
         if (lo == "" || s < lo) lo = s; if (s > hi) hi = s } } END { printf "%s-%s", lo, hi }' \
    "$tmp/server.log") s after the last sign of life), resources back ($((SECONDS - t)) s)"
echo "wire_fault_test: passed"
