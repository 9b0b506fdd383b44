#!/usr/bin/env bash
# Thousands of connections between two processes over the memif mesh: an
# srdma_soak server and one client, 300 connections, then 4096, each with two
# mixed operations in flight and every byte checked (stack/tests/
# many_conns_lib.sh). Passes if both runs exit 0 with no close over 5 s, the
# server holds all 4096 at once and gives its resources back, and 4096
# connections move at least a tenth of what 300 do (past about 600 they once
# fell to a hundredth: two processes each waiting on the other's full ring;
# not a fifth, as a VM's own speed can swing 2x from one run to the next).
# The memif mesh loses no frame, so TCP must hardly resend either: at most
# one segment in 300, past one per connection. With lwIP's own 60 ms RTO
# floor the timer fired on thousands of segments still in flight (up to
# 0.9 % of them); with the 200 ms floor a busy host's stalls still stretch a
# round trip past it now and then (0.08-0.15 %), and a peer descheduled past
# the floor times out every connection at once (4096 resends). The ratio
# itself is bench/conns_bench.sh's figure. Last, 4096 connections again
# with 1 % of received frames dropped (FI_SOFTRDMA_FAULTS): every byte still
# checks out and no connection ends (lwIP 2.1.3 once appended new bytes to a
# fast retransmission its link had refused: patch_tcp_out.cmake).
#
# usage: many_conns_test.sh <path-to-srdma_soak> [seconds, default 8]
# Needs root (DPDK). Fails, never skips, without it.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
soak=$1
secs=${2:-8}
source "$root/stack/tests/many_conns_lib.sh"
[[ $(id -u) -eq 0 ]] || { echo "many_conns_test: needs root (DPDK)"; exit 1; }
logs=$(mktemp -d /tmp/many_conns.XXXXXX)

conns_round "$logs/300" 300 1 "$secs"
[[ -z $ROUND_WHY ]] || { echo "many_conns_test: 300 connections: $ROUND_WHY (logs $logs)"; exit 1; }
r300=$ROUND_RATE
conns_round "$logs/4096" 4096 1 "$secs"
[[ -z $ROUND_WHY ]] || { echo "many_conns_test: 4096 connections: $ROUND_WHY (logs $logs)"; exit 1; }
r4096=$ROUND_RATE
echo "many_conns_test: 300 connections $r300 ops/s, 4096 connections $r4096 ops/s" \
     "(server held $ROUND_CONNS at once)"
[[ $ROUND_CONNS -ge 4096 ]] || { echo "many_conns_test: the server never held 4096 connections"; exit 1; }
awk -v a="$r4096" -v b="$r300" 'BEGIN { r = b > 0 ? a / b : 0; printf "many_conns_test: ratio %.2f\n", r; exit !(r >= 0.1) }' ||
  { echo "many_conns_test: 4096 connections collapsed (logs $logs)"; exit 1; }
# Each process's last report line: "... fpdu tx N rx N ... retx N ...".
for log in "$logs/4096/client0.log" "$logs/4096/server.log"; do
  read -r fpdus retx < <(grep '^\[' "$log" | tail -n 1 |
                         sed -n 's/.*fpdu tx \([0-9]*\) .* retx \([0-9]*\) .*/\1 \2/p')
  echo "many_conns_test: ${log##*/}: $retx retransmissions for $fpdus FPDUs sent"
  [[ -n $fpdus && $fpdus -gt 0 && $(((retx - 4096) * 300)) -le $fpdus ]] ||
    { echo "many_conns_test: TCP resent on a link that loses nothing (logs $logs)"; exit 1; }
done
FI_SOFTRDMA_FAULTS=drop=0.01 conns_round "$logs/4096-lossy" 4096 1 5
[[ -z $ROUND_WHY ]] || { echo "many_conns_test: 4096 connections, 1 % loss: $ROUND_WHY (logs $logs)"; exit 1; }
echo "many_conns_test: 4096 connections with 1 % loss: $ROUND_RATE ops/s," \
     "$(grep -ho 'dropped [0-9]*' "$logs/4096-lossy/server.log") frames at the server"
rm -rf "$logs"
echo "many_conns_test: passed"
