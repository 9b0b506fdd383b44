#!/usr/bin/env bash
# Peer faults over the DPDK path (issue 6; docs/soak.md, "Faults"): one
# long-lived srdma_soak server survives clients that are SIGKILLed and a
# network partition, checks every byte throughout, and gives its resources
# back at the end.
#
# Two hosts in network namespaces joined by a veth pair, each engine on an
# af_packet DPDK port bound to its end (as netns_dpdk_test.sh): the kernel
# carries no TCP, lwIP does. The server (`srdma_soak --server
# --serve-until-idle`) runs in namespace A for the whole test; clients run in
# namespace B:
#  a. kill: KILLS times a client (4 connections, mixed operations, every byte
#     checked) is SIGKILLed a random 0.5-4 s into its transfers. Over
#     af_packet a dead process sends nothing (no RST): the server must notice
#     each lost connection by itself, log it as an error it survived within
#     DETECT_BOUND seconds of the client's last sign of life, and go on.
#  b. partition: a 20 s client run during which the veth is down for 3 s
#     (`ip link set down` in namespace B): the run must end with exit 0 (every
#     byte verified, no mismatch, no lost connection) and the TCP retransmit
#     counters must show that the partition happened.
#  c. clean: a 10 s client run to completion (exit 0); then the server, idle
#     for IDLE s, exits 0 after checking that QPs, MRs, connections, held
#     frames and mbufs in use are back to their values before the first client
#     and live RSS within 8 MiB of what it was when it first fell idle. The
#     test checks those figures again from the server's log.
# Throughout: the server never reports a data mismatch.
#
# usage: peer_fault_test.sh <path-to-srdma_soak>
# Needs root (netns, veth, af_packet). Fails, never skips, without it.
# Environment: PEER_FAULT_KILLS (default 5), PEER_FAULT_SEED (the kill times'
# random seed; default: from the clock, printed).
set -u

soak=${1:?usage: peer_fault_test.sh <path-to-srdma_soak>}
fail() { echo "peer_fault_test: FAIL: $*" >&2; exit 1; }
[[ -x $soak ]] || fail "$soak is not executable"
[[ $(id -u) == 0 ]] || fail "needs root (network namespaces, veth, af_packet)"
for tool in ip timeout awk; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not installed"
done

kills=${PEER_FAULT_KILLS:-5}
seed=${PEER_FAULT_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$seed
detect_bound=120 # s from a client's last sign of life to the server's loss line: lwIP gives up
                 # after TCP_MAXRTX (12) retransmits, RTO doubling up to x128 (measured 45-85 s)
stall=150        # the server's own backstop (--stall): beyond the bound, so
                 # the detection measured is the engine's (lwIP's), not ours
idle=8           # the server exits after this long with nothing open
server_limit=230 # s: the server's --timeout (the whole test, with margin)

id=$$
ns_s=srdma-fs$id ns_c=srdma-fc$id
if_s=fs$id if_c=fc$id
addr_s=192.168.78.1 addr_c=192.168.78.2
port=18617
tmp=$(mktemp -d "${TMPDIR:-/tmp}/peer_fault.XXXXXX") || fail "mktemp"
server_pid=""
client_pid=""
t_start=$SECONDS

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  [[ -n $client_pid ]] && kill -9 "$client_pid" 2>/dev/null
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$ns_s" 2>/dev/null
  ip netns del "$ns_c" 2>/dev/null
  if [[ -n ${keep_logs:-}${PEER_FAULT_KEEP:-} ]]; then echo "logs kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Failing: show the logs, keep them.
die() {
  echo "peer_fault_test: FAIL: $*"
  echo "--- server stderr"; cat "$tmp/server.err"
  echo "--- server stdout (last 15 lines)"; tail -15 "$tmp/server.log"
  keep_logs=1
  exit 1
}

# --- the two hosts (as netns_dpdk_test.sh) -----------------------------------
source "$(dirname "$0")/netns_pair.sh"
netns_pair_up "$ns_s" "$ns_c" "$if_s" "$if_c"

now() { date +%s.%N; }

# The server's latest report line's figure after WORD (e.g. "retx", "qps",
# "lost"); the engine counters follow the "|".
server_figure() {
  awk -v w="$1" '/^\[.*\] server conns/ { for (i = 1; i < NF; ++i) if ($i == w) v = $(i + 1) }
                 END { print v + 0 }' "$tmp/server.log"
}
server_open() {  # connections open, by the tool's own count
  awk '/^\[.*\] server conns/ { for (i = 1; i < NF; ++i) if ($i == "conns") { v = $(i + 1); break } }
       END { print v + 0 }' "$tmp/server.log"
}

# --- the server, for the whole test -------------------------------------------
: >"$tmp/server.log"
FI_SOFTRDMA_TRANSPORT=dpdk FI_SOFTRDMA_NETNS=$ns_s FI_SOFTRDMA_ADDR=$addr_s/24 \
  FI_SOFTRDMA_DEVARGS=net_af_packet0,iface=$if_s \
  timeout $((server_limit + 15)) "$soak" --server -p "$port" --serve-until-idle "$idle" \
  --stall "$stall" --timeout "$server_limit" --report 0.5 \
  >"$tmp/server.log" 2>"$tmp/server.err" &
server_pid=$!
for ((i = 0; i < 200; ++i)); do
  grep -q "listening on port $port " "$tmp/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || die "the server exited at start"
  sleep 0.05
done
grep -q "transport dpdk" "$tmp/server.log" || die "the server is not on transport dpdk"

# start_client LOG ARGS...: a client in namespace B, in the background.
# ip and env exec, so $client_pid is srdma_soak's own: SIGKILL must hit the
# engine's process itself (no timeout(1) in between; --timeout bounds it).
start_client() {
  local log=$1
  shift
  ip netns exec "$ns_c" env FI_SOFTRDMA_TRANSPORT=dpdk FI_SOFTRDMA_ADDR=$addr_c/24 \
    FI_SOFTRDMA_DEVARGS=net_af_packet0,iface=$if_c \
    "$soak" -p "$port" --no-bye --report 0.25 --timeout 100 "$@" "$addr_s" >"$log" 2>&1 &
  client_pid=$!
}
# wait_main LOG: until the client reports from its main phase (transfers run).
wait_main() {
  local i
  for ((i = 0; i < 200; ++i)); do
    grep -q '^\[.* main ' "$1" && return 0
    kill -0 "$client_pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
client_figure() {  # LOG WORD: the figure after WORD in the client's last report
  awk -v w="$2" '/^\[.* main / { for (i = 1; i < NF; ++i) if ($i == w) v = $(i + 1) }
                 END { print v + 0 }' "$1"
}

# --- a. SIGKILLed clients -------------------------------------------------------
echo "peer_fault_test: seed $seed, $kills kills"
t_a=$SECONDS
for ((k = 1; k <= kills; ++k)); do
  log=$tmp/kill$k.log
  start_client "$log" -d 60 -n 4 -s 256K --seed $((seed + k))
  wait_main "$log" || { cat "$log"; die "kill $k: the client did not start transferring"; }
  ms=$((500 + RANDOM % 3501))
  sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
  kill -9 "$client_pid"
  echo "$k $(now)" >>"$tmp/kills"
  wait "$client_pid" 2>/dev/null
  client_pid=""
  echo "  kill $k: SIGKILL after ${ms} ms of transfers ($(client_figure "$log" ops) ops reported)"
done
# Every connection of the dead clients must be noticed and dropped.
t_wait=$SECONDS
while (($(server_open) > 0)); do
  ((SECONDS - t_wait > detect_bound + 5)) && die "connections of dead clients still open after $((SECONDS - t_wait)) s"
  kill -0 "$server_pid" 2>/dev/null || die "the server exited during the kills"
  sleep 0.5
done
sleep 0.6  # one more report line
kill -0 "$server_pid" 2>/dev/null || die "the server did not survive the kills"
lost_lines=$(grep -c 'lost before the end after .*; survived' "$tmp/server.err")
((lost_lines >= kills)) || die "$lost_lines lost connections logged for $kills killed clients"
worst=$(awk '/; survived/ { for (i = 1; i < NF; ++i) if ($i == "after") { s = $(i + 1); if (s > m) m = s } }
             END { printf "%.3f", m }' "$tmp/server.err")
grep -q 'stalled: no progress' "$tmp/server.err" &&
  die "a connection was only dropped by the server's own --stall backstop, not by the engine"
awk -v w="$worst" -v b="$detect_bound" 'BEGIN { exit !(w <= b) }' ||
  die "a lost connection was noticed $worst s after the client's last sign of life (bound $detect_bound s)"
[[ $(server_figure errors) == 0 ]] || die "data mismatches at the server"
echo "ok   kill: $lost_lines connections of $kills killed clients lost and survived;" \
  "detection $(awk '/; survived/ { for (i = 1; i < NF; ++i) if ($i == "after") printf "%s ", $(i + 1) }' \
  "$tmp/server.err")s (worst $worst s, bound $detect_bound s); $((SECONDS - t_a)) s"
# By cause: "reset by peer" when the next client, on the same address, answers
# the server's retransmissions with RSTs; "timed out" when lwIP gave up.
awk '/; survived/ { for (i = 1; i < NF; ++i) if ($i == "after") t = $(i + 1)
                   c = $0; sub(/.*\): /, "", c); sub(/; survived/, "", c)
                   n[c]++; if (!(c in lo) || t < lo[c]) lo[c] = t; if (t > hi[c]) hi[c] = t }
     END { for (c in n) printf "     %2d x %s, %.1f-%.1f s after the last sign of life\n", n[c], c, lo[c], hi[c] }' \
  "$tmp/server.err"

# --- b. partition ---------------------------------------------------------------
t_b=$SECONDS
log=$tmp/partition.log
retx_s0=$(server_figure retx)
start_client "$log" -d 20 -n 4 -s 256K --seed $((seed + 100))
wait_main "$log" || { cat "$log"; die "partition: the client did not start transferring"; }
sleep 5
retx_c0=$(client_figure "$log" retx)
ip -n "$ns_c" link set "$if_c" down || die "link down"
t_down=$(now)
sleep 3
ip -n "$ns_c" link set "$if_c" up || die "link up"
t_up=$(now)
wait "$client_pid"
rc=$?
client_pid=""
retx_c=$(($(client_figure "$log" retx) - retx_c0))
sleep 0.6
retx_s=$(($(server_figure retx) - retx_s0))
if [[ $rc -ne 0 ]] || ! grep -q '^SUMMARY .* errors 0 .* exit 0' "$log"; then
  cat "$log"
  die "partition: the client exited $rc (1: mismatch, 2: error or lost connection)"
fi
((retx_c + retx_s > 0)) || { cat "$log"; die "partition: no TCP retransmit on either side: did the link go down?"; }
kill -0 "$server_pid" 2>/dev/null || die "the server did not survive the partition"
echo "ok   partition: link down $(awk -v a="$t_down" -v b="$t_up" 'BEGIN { printf "%.1f", b - a }') s" \
  "in a 20 s run: exit 0, $(awk '/^SUMMARY/ { for (i = 1; i < NF; ++i) if ($i == "bytes_verified") print substr($(i + 2), 2) }' "$log") GiB verified" \
  "(with the server), TCP retransmits client $retx_c server $retx_s; $((SECONDS - t_b)) s"

# --- c. a clean run, then everything back ------------------------------------
t_c=$SECONDS
log=$tmp/clean.log
start_client "$log" -d 10 -n 4 -s 256K --seed $((seed + 200))
wait "$client_pid"
rc=$?
client_pid=""
[[ $rc -eq 0 ]] || { cat "$log"; die "clean run: the client exited $rc"; }
wait "$server_pid"
src=$?
server_pid=""
res=$(grep '^SERVER RESOURCES' "$tmp/server.log")
base=$(grep '^# server resources: baseline' "$tmp/server.log")
[[ $src -eq 0 ]] || die "the server exited $src (1: mismatch or resources not back, 2: error)"
grep -q '^SERVER SUMMARY .* mismatches 0 ' "$tmp/server.log" || die "the server saw mismatches"
fig() { sed -n "s/.* $2 \([0-9.]*\).*/\1/p" <<<"$1"; }  # TEXT WORD
for w in qps mrs conns frames; do
  [[ $(fig "$res" "$w") == 0 ]] || die "server resources at the end: $w $(fig "$res" "$w"), want 0 ($res)"
done
mbufs() { sed -n 's/.*mbufs in use \([0-9]*\).*/\1/p' <<<"$1"; }
(($(mbufs "$res") <= $(mbufs "$base"))) ||
  die "mbufs in use not back to the baseline: $base / $res"
[[ $res == *" back" ]] || die "server resources not back: $res"
echo "ok   clean: client exit 0, server exit 0; $((SECONDS - t_c)) s"
echo "     ${base#\# server resources: }"
echo "     end: ${res#SERVER RESOURCES }"
grep '^SERVER SUMMARY' "$tmp/server.log" | sed 's/^/     /'
echo "peer_fault_test: passed in $((SECONDS - t_start)) s"
