# Hosts as network namespaces on a bridge (nhosts of them, default 2), each
# with its kernel address on its one interface (eth1: 10.N.0.1/24, .2, ...)
# and a /run of its own, for scripts that source this file (hosts_test.sh,
# bench/hosts_bench.sh, mpi-tests/hosts_mpi_test.sh). The administrator's
# one set-up step per host is either the mark on the interface (mark=1, the
# default: root processes open the NIC themselves) or a running
# softrdma-switch (switch=<program>: start_switch, with FI_SOFTRDMA_NIC=$nic
# when nic is set; the processes then run as
# an ordinary user, nobody, with as_user). Sets hosts, addr, iface, tmp,
# on_host, as_user, run_pingpong, start_switch and stop_switch; removes
# everything it made at exit. Needs root and $prov (the provider's
# directory); defines fail() unless the caller did.
# shellcheck shell=bash
declare -F fail >/dev/null || fail() { echo "hosts: FAIL: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || fail "needs root (network namespaces, veth, AF_XDP)"
# shellcheck source=scripts/netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/netns_lib.sh"
for tool in ip ethtool fi_pingpong unshare setpriv timeout awk python3; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not installed"
done
: "${prov:?hosts_lib.sh: set prov (the provider directory) first}"
[[ -f $prov/libsoftrdma-fi.so ]] || fail "no $prov/libsoftrdma-fi.so"
prov=$(cd "$prov" && pwd)  # the hosts run elsewhere (ip netns exec)

nhosts=${nhosts:-2}
mtu=${mtu:-1500}  # every link's MTU: the veths and the bridge
mark=${mark:-1}
switch=${switch:-}
((nhosts >= 2 && nhosts <= 26)) || fail "nhosts is 2 to 26, not $nhosts"
[[ $mtu =~ ^[0-9]+$ ]] && ((mtu >= 576 && mtu <= 65535)) || fail "mtu is 576 to 65535, not $mtu"
id=$$
hosts=() ports=() addr=()
letters=ABCDEFGHIJKLMNOPQRSTUVWXYZ
br=hhbr$id
iface=eth1  # each host's one interface
net=$(free_subnet)
[[ -n $net ]] || fail "no free 10.x.0.0/24 subnet"
for ((i = 0; i < nhosts; ++i)); do
  l=${letters:i:1}
  hosts+=("hh$l$id")
  ports+=("hh${l,}$id")  # the bridge's end of the host's veth
  addr+=("$net.$((i + 1))")
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hosts_test.XXXXXX") || fail "mktemp"

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  kill_netns "${hosts[@]}"
  for h in "${hosts[@]}"; do ip netns del "$h" 2>/dev/null; done  # takes the veths
  ip link del "$br" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'fail interrupted' INT TERM

# --- the hosts ----------------------------------------------------------------
ip link add "$br" mtu "$mtu" type bridge || fail "cannot create bridge $br"
ip link set "$br" up || fail "$br up"
for ((i = 0; i < nhosts; ++i)); do
  h=${hosts[$i]}
  ip netns add "$h" || fail "ip netns add $h"
  ip -n "$h" link set lo up || fail "lo up in $h"
  ip netns exec "$h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
    net.ipv6.conf.default.disable_ipv6=1 || fail "sysctl in $h"
  ip link add "${ports[$i]}" mtu "$mtu" type veth peer name "$iface" mtu "$mtu" netns "$h" ||
    fail "veth of $h (MTU $mtu)"
  ip link set "${ports[$i]}" master "$br" up || fail "${ports[$i]} into $br"
  ip -n "$h" addr add "${addr[$i]}/24" dev "$iface" || fail "address in $h"
  ip -n "$h" link set "$iface" up || fail "$iface up in $h"
  if ((mark)); then
    ip -n "$h" link set dev "$iface" alias softrdma || fail "marking $iface in $h"
  fi
  # The host's /run; nobody's runtime directory in it, as logind makes it.
  mkdir -p "$tmp/run$i/user/65534" || fail "mkdir in $tmp"
  chown 65534:65534 "$tmp/run$i/user/65534" && chmod 700 "$tmp/run$i/user/65534" &&
    chmod 755 "$tmp/run$i" "$tmp/run$i/user" || fail "modes in $tmp/run$i"
done

# A command on host i: its namespace, the host's /run (hosts share no
# files), and an environment with nothing but the provider's path. as_user:
# the same as nobody, with its runtime directory, as a job's rank runs.
on_host() {
  local i=$1; shift
  ip netns exec "${hosts[$i]}" unshare -m sh -c 'mount --bind "$0" /run && exec "$@"' \
    "$tmp/run$i" env -i PATH="$PATH" FI_PROVIDER_PATH="$prov" "$@"
}
as_user() {
  local i=$1; shift
  on_host "$i" setpriv --reuid=65534 --regid=65534 --clear-groups \
    env XDG_RUNTIME_DIR=/run/user/65534 "$@"
}
# Which path frames took on host i. bypassed: frames that reached softrdma
# so far: the XDP program's redirects (nic=af_xdp), or, over a packet
# socket (the default), what the interface received less what the kernel's
# TCP took (softrdma's tcx program keeps its frames from the kernel).
# frame_payload: the payload octets a full frame of that path carries (a
# packet socket's segments are 64 KiB, less 52 octets of IPv4 and TCP
# headers with timestamps). out_segs: the kernel's TCP segments sent.
via=packet
[[ ${nic:-} == af_xdp ]] && via=xdp
frame_payload=$((65000 - 52))
[[ $via == xdp ]] && frame_payload=$((mtu - 52))
tcp_count() {  # host counter
  # shellcheck disable=SC2016  # awk's $ fields
  ip netns exec "${hosts[$1]}" awk -v c="$2" '
    $1 == "Tcp:" && !hdr { for (i = 2; i <= NF; ++i) col[$i] = i; hdr = 1; next }
    $1 == "Tcp:" && hdr { print $col[c]; exit }' /proc/net/snmp
}
out_segs() { tcp_count "$1" OutSegs; }
bypassed() {
  if [[ $via == xdp ]]; then
    ip netns exec "${hosts[$1]}" ethtool -S "$iface" |
      awk -F': *' '/rx_queue_[0-9]+_xdp_redirect/ { n += $2 } END { print n + 0 }'
  else
    echo $(($(ip netns exec "${hosts[$1]}" cat "/sys/class/net/$iface/statistics/rx_packets") -
            $(tcp_count "$1" InSegs)))
  fi
}

# The program ranks run through (run_pingpong): on_host, or as_user when
# switches serve the hosts.
run_as=on_host
[[ -n $switch ]] && run_as=as_user

# start_switch <host>: softrdma-switch on the host's interface (as root,
# the one set-up step), logging to $tmp/switch<host>.log; returns once its
# control socket is there.
start_switch() {
  local i=$1
  [[ -x $switch ]] || fail "no switch program $switch"
  on_host "$i" env ${nic:+FI_SOFTRDMA_NIC=$nic} "$switch" "$iface" >>"$tmp/switch$i.log" 2>&1 &
  for _ in $(seq 100); do
    [[ -S $tmp/run$i/softrdma-switch/$iface.ctl ]] && return 0
    sleep 0.1
  done
  cat "$tmp/switch$i.log"
  fail "softrdma-switch on host $i did not start"
}
# The pid of host i's switch (not the wrapper's).
switch_pid() {
  ip netns pids "${hosts[$1]}" | xargs -r ps -o pid=,comm= -p | awk '$2 == "softrdma-switch" { print $1 }'
}
# stop_switch <host> [signal]: ends host i's switch and waits for it.
stop_switch() {
  local i=$1 sig=${2:-TERM} p
  p=$(switch_pid "$i")
  [[ -n $p ]] || fail "no switch running on host $i"
  kill -"$sig" "$p"
  for _ in $(seq 100); do
    kill -0 "$p" 2>/dev/null || return 0
    sleep 0.1
  done
  fail "softrdma-switch on host $i did not end on SIG$sig"
}

# run_pingpong <name> <provider> <ep> <size> <iterations> [seconds] [server]
# [client]: the server on host <server> (default 0), the client on host
# <client> (default 1) given the server's address; logs in $tmp/<name>.srv
# and .cli.
run_pingpong() {
  local name=$1 p=$2 ep=$3 size=$4 n=$5 secs=${6:-240} s=${7:-0} c=${8:-1}
  $run_as "$s" timeout "$secs" fi_pingpong -p "$p" -e "$ep" -S "$size" -I "$n" -c \
    >"$tmp/$name.srv" 2>&1 &
  local srv=$! ok=0
  for _ in $(seq 50); do  # the server's control socket appears when it is ready
    if $run_as "$c" timeout "$secs" fi_pingpong -p "$p" -e "$ep" -S "$size" -I "$n" -c "${addr[$s]}" \
        >"$tmp/$name.cli" 2>&1; then
      ok=1; break
    fi
    grep -q "Connection refused\|ctrl/connect" "$tmp/$name.cli" || break
    sleep 0.2
  done
  wait $srv || ok=0
  ((ok))
}
