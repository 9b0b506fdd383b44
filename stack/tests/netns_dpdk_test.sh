#!/usr/bin/env bash
# Two hosts in network namespaces joined by a veth pair, each running
# srdma_perf on the DPDK path (lwIP on an af_packet port bound to its side of
# the veth): every operation (send, write, read, write_imm, fadd, cas),
# bandwidth (sizes 0 B .. 64 MiB) and latency (0 B .. 1 MiB), data
# verification on (-c).
#
# The kernel has no address on either veth, so it cannot carry the TCP
# connection: the iWARP traffic is raw Ethernet frames that lwIP builds and
# af_packet moves. Checked, besides both sides' exit codes (0 = every byte
# verified):
#  - both processes report transport dpdk;
#  - per run, the veth's byte counters in the direction(s) the data flows
#    grew by at least the run's 64 MiB messages (the data crossed the veth);
#  - while each run is going, neither namespace has a kernel TCP socket and
#    the server process (in the host namespace) owns none either;
#  - at the end both namespaces' kernel TCP counters (/proc/net/snmp: opens,
#    segments in/out, resets) are zero, while the kernel's IP layer did see
#    the frames arrive (IpInReceives > 0) and dropped them as not its own.
# How the ports get into the namespaces: the server with FI_SOFTRDMA_NETNS
# (the process stays in the host namespace, only the port is probed in the
# namespace), the client by running inside its namespace (`ip netns exec`).
#
# usage: netns_dpdk_test.sh <path-to-srdma_perf>
# Needs root (netns, veth, af_packet). Fails, never skips, without it.
# Environment: NETNS_DPDK_CASES (default: all) restricts the cases to those
# whose name matches this extended regex.
set -u

perf=${1:?usage: netns_dpdk_test.sh <path-to-srdma_perf>}
fail() { echo "netns_dpdk_test: FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/perf_server.sh"
[[ -x $perf ]] || fail "$perf is not executable"
[[ $(id -u) == 0 ]] || fail "needs root (network namespaces, veth, af_packet)"
for tool in ip ss timeout awk; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not installed"
done

run_timeout=90  # seconds per run (the tool's own deadline; timeout(1) backs it up)
sizes="0,1,4095,64K,1M,64M"
big=$((64 << 20))
cases_re=${NETNS_DPDK_CASES:-.}

id=$$
ns_s=srdma-s$id ns_c=srdma-c$id  # server's and client's "hosts"
if_s=srs$id if_c=src$id           # their ends of the veth (IFNAMSIZ: <= 15)
addr_s=192.168.77.1 addr_c=192.168.77.2
port=18515
tmp=$(mktemp -d "${TMPDIR:-/tmp}/netns_dpdk.XXXXXX") || fail "mktemp"
server_pid=""
client_pid=""

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  [[ -n $client_pid ]] && kill "$client_pid" 2>/dev/null
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$ns_s" 2>/dev/null  # takes its veth end, and with it the pair
  ip netns del "$ns_c" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- the two hosts ---------------------------------------------------------
source "$(dirname "$0")/netns_pair.sh"
netns_pair_up "$ns_s" "$ns_c" "$if_s" "$if_c"

# veth byte counters: tx of one end is what crossed towards the other.
tx_bytes() {  # ns iface
  ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"
}

# A kernel SNMP counter of a namespace: snmp_counter ns Tcp InSegs
snmp_counter() {
  ip netns exec "$1" awk -v p="$2:" -v f="$3" '
    $1 == p && !hdr { for (i = 2; i <= NF; ++i) col[$i] = i; hdr = 1; next }
    $1 == p && hdr { print $col[f]; exit }' /proc/net/snmp
}

# Kernel TCP sockets where there must be none: in both namespaces, and
# owned by the server process (which lives in the host namespace).
kernel_tcp_sockets() {
  ip netns exec "$ns_s" ss -tanH
  ip netns exec "$ns_c" ss -tanH
  [[ -n $server_pid ]] && ss -tanpH | grep -F "pid=$server_pid," || true
}

start_server() {  # extra args
  : >"$tmp/server.log"
  FI_SOFTRDMA_TRANSPORT=dpdk FI_SOFTRDMA_NETNS=$ns_s FI_SOFTRDMA_ADDR=$addr_s/24 \
    FI_SOFTRDMA_DEVARGS=net_af_packet0,iface=$if_s \
    timeout $((run_timeout + 15)) "$perf" -p "$port" --timeout "$run_timeout" "$@" \
    >"$tmp/server.log" 2>&1 &
  server_pid=$!
  wait_listening "$server_pid" "$tmp/server.log" "$port"
}

passed=0
failed=0
failures=()

# run_case NAME CRC C2S_MIN S2C_MIN CLIENT_ARGS...: CRC 0|1 for both sides;
# the least bytes that must cross the veth each way (client to server,
# server to client).
run_case() {
  local name=$1 crc=$2 c2s_min=$3 s2c_min=$4
  shift 4
  [[ $name =~ $cases_re ]] || return 0
  local start=$SECONDS why="" rc src socks c2s0 s2c0 c2s s2c
  c2s0=$(tx_bytes "$ns_c" "$if_c")
  s2c0=$(tx_bytes "$ns_s" "$if_s")
  if ! start_server --crc "$crc"; then
    why="the server did not start"
  else
    ip netns exec "$ns_c" env FI_SOFTRDMA_TRANSPORT=dpdk FI_SOFTRDMA_ADDR=$addr_c/24 \
      FI_SOFTRDMA_DEVARGS=net_af_packet0,iface=$if_c \
      timeout $((run_timeout + 15)) "$perf" -p "$port" --timeout "$run_timeout" --crc "$crc" \
      "$@" "$addr_s" \
      >"$tmp/client.log" 2>&1 &
    client_pid=$!
    sleep 1  # mid-run (or just done): no kernel TCP socket anywhere
    socks=$(kernel_tcp_sockets)
    wait "$client_pid"
    rc=$?
    client_pid=""
    [[ $rc -ne 0 ]] && kill "$server_pid" 2>/dev/null  # it would wait for its deadline
    wait "$server_pid"
    src=$?
    server_pid=""
    c2s=$(($(tx_bytes "$ns_c" "$if_c") - c2s0))
    s2c=$(($(tx_bytes "$ns_s" "$if_s") - s2c0))
    if [[ $rc -ne 0 || $src -ne 0 ]]; then
      why="client exit $rc, server exit $src (1: data mismatch, 2: error, 124: timed out)"
    elif ! grep -q "| transport dpdk | crc $([[ $crc == 1 ]] && echo on || echo off) |" \
        "$tmp/client.log"; then
      why="the client did not run on transport dpdk with crc=$crc"
    elif [[ -n $socks ]]; then
      why="kernel TCP sockets during the run: $socks"
    elif ((c2s < c2s_min || s2c < s2c_min)); then
      why="the veth carried $c2s B client->server and $s2c B server->client, want >= $c2s_min and >= $s2c_min"
    fi
  fi
  if [[ -z $why ]]; then
    passed=$((passed + 1))
    echo "ok   $name ($((SECONDS - start)) s; veth $((c2s >> 20)) MiB c->s, $((s2c >> 20)) MiB s->c)"
  else
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    server_pid=""
    failed=$((failed + 1))
    failures+=("$name")
    echo "FAIL $name: $why"
    echo "--- client: $*"
    cat "$tmp/client.log" 2>/dev/null
    echo "--- server"
    cat "$tmp/server.log"
  fi
}

# Bandwidth runs take every size to 64 MiB; a 64 MiB size runs twice
# (--max-bytes 64M caps the count at 2), so >= 128 MiB cross the veth the
# data's way. Latency runs (one at a time, echoed) stop at 1 MiB to keep the
# test within a few minutes on a busy 2-core machine.
data=$((2 * big))
lat_sizes="0,1,4095,64K,1M"
for kind in bw lat; do
  for op in send write read write_imm fadd cas; do
    c2s=0 s2c=0
    [[ $kind == bw ]] && s=$sizes || s=$lat_sizes
    [[ $kind == bw ]] && moved=$data || moved=$((10 << 20))  # 1 MiB x 10
    case $op in
      fadd|cas) args=(-n 500); c2s=$((500 * 8)); s2c=$((500 * 8)) ;;
      write) [[ $kind == lat ]] && s=${s#0,}  # a polled Write needs a last byte
             args=(-s "$s" -n 10 --max-bytes 64M); c2s=$moved ;;
      read) args=(-s "$s" -n 10 --max-bytes 64M); s2c=$moved ;;
      *) args=(-s "$s" -n 10 --max-bytes 64M); c2s=$moved ;;
    esac
    [[ $kind == lat && $op != read && $op != fadd && $op != cas ]] && s2c=$moved  # echoes
    run_case "$op $kind" 1 "$c2s" "$s2c" -o "$op" -t "$kind" -c "${args[@]}"
  done
done
# CRC off changes every FPDU's trailer: one data pass each way.
run_case "write bw crc=0" 0 "$data" 0 -o write -t bw -c -s "$sizes" -n 10 --max-bytes 64M
run_case "read bw crc=0" 0 0 "$data" -o read -t bw -c -s "$sizes" -n 10 --max-bytes 64M

# The kernel never carried TCP in either namespace, though it saw the frames.
for ns in "$ns_s" "$ns_c"; do
  for f in ActiveOpens PassiveOpens InSegs OutSegs OutRsts AttemptFails; do
    v=$(snmp_counter "$ns" Tcp "$f")
    if [[ $v != 0 ]]; then
      echo "FAIL kernel TCP in $ns: Tcp $f = ${v:-unreadable}, want 0"
      failed=$((failed + 1))
      failures+=("kernel TCP $ns $f")
    fi
  done
  v=$(snmp_counter "$ns" Ip InReceives)
  if [[ ${v:-0} -eq 0 ]] && ((passed > 0)); then
    echo "FAIL $ns: the kernel saw no IP frame on the veth (Ip InReceives = ${v:-unreadable})"
    failed=$((failed + 1))
    failures+=("no frames in $ns")
  else
    echo "kernel in $ns: Tcp opens/segments 0, Ip InReceives $v InAddrErrors $(snmp_counter "$ns" Ip InAddrErrors)"
  fi
done

echo "netns_dpdk_test: $passed passed, $failed failed"
if [[ $failed -gt 0 || $passed -eq 0 ]]; then
  printf '  failed: %s\n' "${failures[@]}"
  exit 1
fi
