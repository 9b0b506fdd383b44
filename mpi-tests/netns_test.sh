#!/usr/bin/env bash
# MPI across two hosts, simulated: two network namespaces, Open MPI launching
# one rank into each through an rsh agent (netns_rsh.sh: `ip netns exec HOST`),
# each rank on softrdma's DPDK path over af_packet on its host's data
# interface, with the address from configuration (FI_SOFTRDMA_ADDR), as on
# real machines.
#
#   root namespace: bridge BR 10.R.0.1/24 (Open MPI's out-of-band network:
#   |  mpirun <-> orted, PMIx; kernel TCP)
#   +-- veth -- HOST A: oob 10.R.0.2/24   data veth (no kernel address)
#   +-- veth -- HOST B: oob 10.R.0.3/24   data veth (no kernel address)
#                       A's and B's data veths are one pair: the "data
#                       network"; the ranks' lwIP talks 10.77.0.1 <-> .2 on it.
#
# Per host, $conf/HOST.env (sourced by the agent, like a login profile) sets
# FI_SOFTRDMA_TRANSPORT=dpdk, FI_SOFTRDMA_DEVARGS=net_af_packet0,iface=<data
# veth>, FI_SOFTRDMA_ADDR=<data ip>/24; mpirun's -x passes only what is the
# same everywhere. Each program (mpi_p2p, mpi_coll; np=2, one rank per host)
# must print PASS under a timeout, and:
#  - each rank picked softrdma;ofi_rxm and published its data address
#    (fi_getname = FI_SOFTRDMA_ADDR's ip) to the other (FI_LOG_LEVEL=info);
#  - the data veth carried at least the run's payload each way (p2p: 64 MiB
#    each way, coll: less), while the out-of-band veths carried a small
#    fraction of it and each namespace's kernel TCP (/proc/net/snmp) sent
#    fewer segments than the payload would need: the data was lwIP's frames
#    through DPDK's af_packet port, not the kernel's TCP.
#    (On the separate data veth the kernel has no address at all.)
# Everything it creates (namespaces, veths, bridge, temp dir) goes on exit;
# a job runs under a timeout (default 60 s) and any failure prints its log.
#
# usage: netns_test.sh <dir with libsoftrdma-fi.so> <dir with mpi_p2p, mpi_coll> [seconds per job]
# Environment: NETNS_TEST_LINK=shared puts each rank's DPDK port on its
# host's out-of-band interface instead (one NIC carrying the kernel's IP and
# lwIP's, in different subnets; the out-of-band volume check is then moot);
# NETNS_TEST_SAVE=dir keeps the jobs' logs there.
# Needs root. Fails, never skips.
set -uo pipefail
prov=${1:?usage: netns_test.sh <prov dir> <mpi-tests bin dir> [seconds per job]}
bin=${2:?usage: netns_test.sh <prov dir> <mpi-tests bin dir> [seconds per job]}
secs=${3:-60}
link=${NETNS_TEST_LINK:-separate}
here=$(cd "$(dirname "$0")" && pwd)
agent=$here/netns_rsh.sh
fail() { echo "netns_test: FAIL: $*" >&2; exit 1; }
# shellcheck source=scripts/netns_lib.sh
source "$here/../scripts/netns_lib.sh"

[[ $(id -u) == 0 ]] || fail "needs root (network namespaces, veth, af_packet)"
for tool in ip mpirun unshare timeout awk; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not installed"
done
[[ -f $prov/libsoftrdma-fi.so ]] || fail "no $prov/libsoftrdma-fi.so"
for p in mpi_p2p mpi_coll; do [[ -x $bin/$p ]] || fail "no $bin/$p"; done
[[ -x $agent ]] || fail "$agent is not executable"

id=$$
hosts=("srdma-a$id" "srdma-b$id")  # namespace = host name
br=srbr$id                      # interface names: <= 15 characters
oob_ns=("sroa$id" "srob$id") oob_root=("srpa$id" "srpb$id")
data_if=("srda$id" "srdb$id")
data_ip=(10.77.0.1 10.77.0.2)
case $link in
  separate) dpdk_if=("${data_if[@]}") ;;
  shared) dpdk_if=("${oob_ns[@]}") ;;  # one NIC: the kernel's IP and lwIP's side by side
  *) fail "NETNS_TEST_LINK is separate or shared, not $link" ;;
esac
# An out-of-band subnet no interface of this machine uses.
oob_net=$(free_subnet $((id % 200 + 20)))
[[ -n $oob_net ]] || fail "no free 10.x.0.0/24 subnet for the out-of-band network"
oob_ip=("$oob_net.2" "$oob_net.3")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpi_netns.XXXXXX") || fail "mktemp"
job=""

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  # An interrupted job: timeout(1) passes TERM on to mpirun.
  [[ -n $job ]] && kill -TERM "$job" 2>/dev/null
  kill_netns "${hosts[@]}"  # orteds (daemonized) and ranks
  if [[ -n $job ]]; then  # mpirun gets 5 s to go, then SIGKILL
    for _ in $(seq 50); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    pkill -KILL -P "$job" 2>/dev/null
    kill -KILL "$job" 2>/dev/null
    wait "$job" 2>/dev/null
  fi
  for h in "${hosts[@]}"; do ip netns del "$h" 2>/dev/null; done  # takes the veths
  ip link del "$br" 2>/dev/null
  for i in "${oob_root[@]}"; do ip link del "$i" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "netns_test: FAIL: interrupted" >&2; exit 1' INT TERM

# --- the hosts ----------------------------------------------------------------
ip link add "$br" type bridge || fail "cannot create bridge $br"
ip addr add "$oob_net.1/24" dev "$br" || fail "address on $br"
ip link set "$br" up || fail "$br up"
for i in 0 1; do
  h=${hosts[$i]}
  ip netns add "$h" || fail "ip netns add $h"
  ip -n "$h" link set lo up || fail "lo up in $h"
  # Nothing IPv6: the data veth stays silent but for what DPDK sends.
  ip netns exec "$h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
    net.ipv6.conf.default.disable_ipv6=1 || fail "sysctl in $h"
  ip link add "${oob_root[$i]}" type veth peer name "${oob_ns[$i]}" netns "$h" ||
    fail "cannot create the out-of-band veth of $h"
  ip link set "${oob_root[$i]}" master "$br" up || fail "${oob_root[$i]} into $br"
  ip -n "$h" addr add "${oob_ip[$i]}/24" dev "${oob_ns[$i]}" || fail "address in $h"
  ip -n "$h" link set "${oob_ns[$i]}" up || fail "${oob_ns[$i]} up"
done
ip link add "${data_if[0]}" netns "${hosts[0]}" type veth peer name "${data_if[1]}" \
  netns "${hosts[1]}" || fail "cannot create the data veth"
for i in 0 1; do
  ip -n "${hosts[$i]}" link set "${data_if[$i]}" up || fail "${data_if[$i]} up"
  # Each host's configuration, as its profile would have it.
  cat >"$tmp/${hosts[$i]}.env" <<EOF
FI_SOFTRDMA_TRANSPORT=dpdk
FI_SOFTRDMA_DEVARGS=net_af_packet0,iface=${dpdk_if[$i]}
FI_SOFTRDMA_ADDR=${data_ip[$i]}/24
EOF
done
printf '%s slots=1\n' "${hosts[@]}" >"$tmp/hostfile"

# --- measurements ----------------------------------------------------------------
stat_of() {  # host iface tx_bytes|rx_bytes
  ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"
}
snmp_counter() {  # host Tcp OutSegs
  # shellcheck disable=SC2016  # awk's $ fields
  ip netns exec "$1" awk -v p="$2:" -v f="$3" '
    $1 == p && !hdr { for (i = 2; i <= NF; ++i) col[$i] = i; hdr = 1; next }
    $1 == p && hdr { print $col[f]; exit }' /proc/net/snmp
}

# run_job PROGRAM MIN_BYTES_EACH_WAY
run_job() {
  local prog=$1 min=$2 log=$tmp/$1.log start=$SECONDS rc
  local a2b0 b2a0 oob0 seg0=() seg=() i
  a2b0=$(stat_of "${hosts[0]}" "${dpdk_if[0]}" tx_bytes)
  b2a0=$(stat_of "${hosts[1]}" "${dpdk_if[1]}" tx_bytes)
  oob0=0
  for i in 0 1; do
    oob0=$((oob0 + $(stat_of "${hosts[$i]}" "${oob_ns[$i]}" tx_bytes) \
                 + $(stat_of "${hosts[$i]}" "${oob_ns[$i]}" rx_bytes)))
    seg0[i]=$(snmp_counter "${hosts[$i]}" Tcp OutSegs)
  done
  # oob/btl over the bridge only; routed direct: daemons talk to mpirun
  # alone; no tree spawn: mpirun starts both daemons through the agent.
  NETNS_RSH_CONF=$tmp timeout -k 10 "$secs" mpirun --allow-run-as-root \
    --hostfile "$tmp/hostfile" -np 2 --map-by node \
    --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 --mca routed direct \
    --mca oob_tcp_if_include "$oob_net.0/24" --mca btl_tcp_if_include "$oob_net.0/24" \
    --mca pml cm --mca mtl ofi --mca mtl_ofi_verbose 1 \
    -x FI_PROVIDER_PATH="$prov" -x FI_PROVIDER=softrdma -x FI_SOFTRDMA_DEBUG=1 \
    -x FI_LOG_LEVEL=info \
    "$bin/$prog" >"$log" 2>&1 &
  job=$!
  wait "$job"  # in the background so that INT/TERM end the test at once
  rc=$?
  job=""
  local why="" a2b b2a oob n
  a2b=$(($(stat_of "${hosts[0]}" "${dpdk_if[0]}" tx_bytes) - a2b0))
  b2a=$(($(stat_of "${hosts[1]}" "${dpdk_if[1]}" tx_bytes) - b2a0))
  oob=$((-oob0))
  for i in 0 1; do
    oob=$((oob + $(stat_of "${hosts[$i]}" "${oob_ns[$i]}" tx_bytes) \
               + $(stat_of "${hosts[$i]}" "${oob_ns[$i]}" rx_bytes)))
    seg[i]=$(($(snmp_counter "${hosts[$i]}" Tcp OutSegs) - seg0[i]))
  done
  n=$(grep -c 'mtl:ofi:prov: softrdma;ofi_rxm' "$log")
  if [[ $rc == 124 || $rc == 137 ]]; then
    why="timed out after ${secs}s"
  elif [[ $rc != 0 ]]; then
    why="mpirun exited with $rc"
  elif ! grep -q "^PASS " "$log"; then
    why="no PASS line"
  elif [[ $n != 2 ]]; then
    why="$n of 2 ranks chose softrdma;ofi_rxm"
  elif ! grep -q "^\[${hosts[0]}:.*mtl:ofi:prov: softrdma;ofi_rxm" "$log" ||
       ! grep -q "^\[${hosts[1]}:.*mtl:ofi:prov: softrdma;ofi_rxm" "$log"; then
    why="the ranks did not run one on each of ${hosts[*]}"
  elif ! grep -q "fi_sockaddr_in://${data_ip[0]}:" "$log" ||
       ! grep -q "fi_sockaddr_in://${data_ip[1]}:" "$log"; then
    why="the ranks' addresses (ofi_rxm's AV) are not ${data_ip[*]} from FI_SOFTRDMA_ADDR"
  elif ((a2b < min || b2a < min)); then
    why="the DPDK port's veth carried $a2b B a->b and $b2a B b->a, want >= $min each way"
  elif [[ $link == separate ]] && ((oob * 20 > a2b + b2a)); then
    why="the out-of-band veths carried $oob B, more than 5% of the data veth's $((a2b + b2a)) B"
  elif ((seg[0] * 1448 > min || seg[1] * 1448 > min)); then
    why="kernel TCP sent ${seg[0]} and ${seg[1]} segments in the namespaces: enough to carry the data"
  fi
  [[ -n ${NETNS_TEST_SAVE:-} ]] && cp "$log" "$NETNS_TEST_SAVE/"
  if [[ -n $why ]]; then
    echo "--- $prog log"
    cat "$log"
    fail "$prog np=2 across ${hosts[*]}: $why"
  fi
  grep "^PASS " "$log"
  local oob_note=""
  [[ $link == separate ]] && oob_note=" out-of-band veths $((oob >> 10)) KiB in all;"
  echo "ok   $prog np=2 across two namespace hosts ($((SECONDS - start)) s, $link links):" \
       "DPDK af_packet veth $((a2b >> 20)) MiB a->b, $((b2a >> 20)) MiB b->a;$oob_note" \
       "kernel TCP segments sent ${seg[0]} (a), ${seg[1]} (b)"
}

run_job mpi_p2p $((64 << 20))
run_job mpi_coll $((4 << 20))
echo "netns_test: OK"
