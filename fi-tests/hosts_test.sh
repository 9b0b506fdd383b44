#!/usr/bin/env bash
# fi_pingpong across hosts as users run it: two or more network namespaces
# on a bridge, each with its kernel address on its one interface
# (10.N.0.1/24, .2, ...) and a /run of its own, as real hosts have. Servers
# run in host A, clients in every other host are given A's kernel address
# exactly as with `-p tcp` (and, with three hosts or more, C's client is
# given B's too), one after another; no FI_SOFTRDMA_* variable is set (only
# FI_PROVIDER_PATH).
# The one set-up step is the administrator's: the mark on each interface
# (`ip link set dev IF alias softrdma`, see README "Across hosts"; root
# processes), or, given a switch program, softrdma-switch started on each
# host (every fi_pingpong then runs as the user nobody). Whichever opens
# the NIC uses a packet socket, or with nic=af_xdp an AF_XDP port
# (FI_SOFTRDMA_NIC, given to the switch or to each process).
#
# Asserts, for -e msg at 8 B, 64 KiB and 1 MiB with data checks (-c), and
# -e rdm through softrdma;ofi_rxm:
#  - both ends pass;
#  - the data took the bypass path: each interface's XDP program redirected
#    (ethtool -S: rx_queue_0_xdp_redirect) at least the frames the payload
#    needs (over af_packet: frames the interface received that the kernel's
#    TCP did not, /proc/net/snmp InSegs, in segments of up to 64 KiB), while
#    each host's kernel TCP (OutSegs) sent far fewer segments than that
#    (its out-of-band socket only);
#  - the kernel's own TCP on another port (an echo server in A, as ssh
#    would be) answers B throughout.
# With two hosts, the link between them goes down for 3 s mid-run and the
# pair must finish with its data checked (TCP retransmits across it).
# With a switch, also: four pairs of ranks at once, each pair checking its
# data; a request no switch knows from another local user is refused and
# the switch serves on; a rank SIGKILLed mid-run ends its peer with an error
# (no hang) and the switch lets its ports go; the switch SIGKILLed mid-run
# ends both ranks with errors, and once restarted new ranks work and a
# server (srdma_soak) that lived through the restart answers again.
# Everything it creates (namespaces, bridge, veths, temp dir) goes at exit.
# With mtu=N (hosts_lib.sh) above 1500, large messages must also have
# crossed in fewer frames than 1500-octet links need (jumbo frames used).
# usage: [mtu=N] [nic=af_xdp] hosts_test.sh <dir with libsoftrdma-fi.so> [iterations] [hosts (2)]
#                             [softrdma-switch srdma_soak]
# Needs root. Fails, never skips.
set -uo pipefail
prov=${1:?usage: hosts_test.sh <prov dir> [iterations] [hosts] [softrdma-switch srdma_soak]}
iters=${2:-1000}
nhosts=${3:-2}
switch=${4:-}
soak=${5:-}
mark=1
[[ -n $switch ]] && mark=0 && switch=$(cd "$(dirname "$switch")" && pwd)/$(basename "$switch")
[[ -z $switch || -x $soak ]] || { echo "hosts_test: with a switch, give srdma_soak too" >&2; exit 2; }
fail() { echo "hosts_test: FAIL: $*" >&2; exit 1; }

nic=${nic:-}  # unset: the default (af_packet)
[[ -z $nic || $nic == af_packet || $nic == af_xdp ]] || fail "nic is af_packet or af_xdp, not $nic"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=fi-tests/hosts_lib.sh
source "$here/hosts_lib.sh"
# The NIC is a packet socket (the default) or an AF_XDP port (nic=af_xdp),
# in the switch (which hosts_lib.sh starts with FI_SOFTRDMA_NIC=$nic) or in
# each process.
if [[ -z $switch && $nic == af_xdp ]]; then
  on_host_xdp() {
    local i=$1; shift
    on_host "$i" env FI_SOFTRDMA_NIC=af_xdp "$@"
  }
  run_as=on_host_xdp
fi

# The kernel's own TCP on A (ssh's stand-in): an echo server, asked by B
# every 0.2 s while the runs go on.
on_host 0 python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 2222)); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(c.recv(64)); c.close()' >"$tmp/echo.log" 2>&1 &
for _ in $(seq 50); do  # listening before B starts asking
  ip netns exec "${hosts[0]}" ss -Hltn 'sport = :2222' | grep -q . && break
  sleep 0.1
done
on_host 1 python3 -c '
import os, socket, sys, time
ok = bad = 0
for _ in range(100000):
    try:
        with socket.create_connection((sys.argv[1], 2222), timeout=2) as c:
            c.sendall(b"ping"); ok += c.recv(64) == b"ping"
    except OSError as e:
        bad += 1; print("echo:", e, flush=True)
    with open(sys.argv[2] + ".new", "w") as f:  # replaced whole: never read half-written
        print(f"ok={ok} bad={bad}", file=f)
    os.replace(sys.argv[2] + ".new", sys.argv[2])
    time.sleep(0.2)' "${addr[0]}" "$tmp/echo.count" >>"$tmp/echo.log" 2>&1 &

if [[ -n $switch ]]; then
  for ((i = 0; i < nhosts; ++i)); do start_switch "$i"; done
fi

# --- the runs -------------------------------------------------------------------
# pingpong <name> <provider> <ep> <size> <iterations> <server> <client>
pingpong() {
  local name=$1 p=$2 ep=$3 size=$4 n=$5 a=$6 b=$7
  local r0 r1 s0 s1
  r0=$(bypassed "$a") r1=$(bypassed "$b") s0=$(out_segs "$a") s1=$(out_segs "$b")
  local ok=1
  run_pingpong "$name" "$p" "$ep" "$size" "$n" 240 "$a" "$b" || ok=0
  echo "--- $name: client"; cat "$tmp/$name.cli"; echo "--- $name: server"; cat "$tmp/$name.srv"
  ((ok)) || fail "$name: fi_pingpong -p '$p' -e $ep -S $size from host $b to host $a"
  # Each way: n messages of size (ofi_rxm adds little) in frames of
  # frame_payload octets; the kernel's TCP would need MTU-sized segments.
  local bytes=$((n * size)) need kneed
  need=$((bytes / frame_payload))
  kneed=$((bytes / (mtu - 52)))
  local dr0=$(($(bypassed "$a") - r0)) dr1=$(($(bypassed "$b") - r1))
  local ds0=$(($(out_segs "$a") - s0)) ds1=$(($(out_segs "$b") - s1))
  local A=${letters:a:1} B=${letters:b:1}
  echo "$name: bypass ($via) $A=$dr0 $B=$dr1 frames (payload needs >= $need); kernel TCP OutSegs $A=$ds0 $B=$ds1"
  ((dr0 >= need && dr1 >= need && dr0 >= n && dr1 >= n)) ||
    fail "$name: the bypass path carried too few frames ($A $dr0, $B $dr1; payload needs $need)"
  # Jumbo links: fewer frames than 1500-octet ones would need, even with an
  # ACK for every data frame.
  if ((mtu > 1500 && need > 1000)) && [[ $via == xdp ]]; then
    ((dr0 < bytes / (1500 - 52) && dr1 < bytes / (1500 - 52))) ||
      fail "$name: $A $dr0 / $B $dr1 frames for $bytes B: the MTU of $mtu was not used"
  fi
  # The out-of-band socket's few segments per run, and the echo's 5 a second.
  if ((kneed > 1000)); then
    ((ds0 < kneed / 10 && ds1 < kneed / 10)) ||
      fail "$name: kernel TCP sent $ds0 ($A) / $ds1 ($B) segments: the payload went through the kernel"
  fi
}

# Every other host's client against A's servers; with a third host, its
# client against B's server too (two hosts neither of which is the first).
big=$(((iters + 9) / 10))
for ((c = 1; c < nhosts; ++c)); do
  h=${letters:c:1}
  pingpong "msg8-$h" softrdma msg 8 "$iters" 0 "$c"
  pingpong "msg64k-$h" softrdma msg 65536 "$iters" 0 "$c"
  pingpong "msg1m-$h" softrdma msg 1048576 "$big" 0 "$c"
  pingpong "rdm8-$h" "softrdma;ofi_rxm" rdm 8 "$iters" 0 "$c"
  pingpong "rdm64k-$h" "softrdma;ofi_rxm" rdm 65536 "$big" 0 "$c"
done
if ((nhosts >= 3)); then
  pingpong msg1m-CB softrdma msg 1048576 "$big" 1 2
  pingpong rdm64k-CB "softrdma;ofi_rxm" rdm 65536 "$big" 1 2
fi

[[ -n $switch ]] && source "$here/hosts_switch_faults.sh"

read -r echo_state <"$tmp/echo.count" 2>/dev/null || echo_state="none"
echo "kernel echo (port 2222, A <- B) during the runs: $echo_state"
if ! [[ $echo_state =~ ^ok=([0-9]+)\ bad=0$ ]] || ((BASH_REMATCH[1] == 0)); then
  cat "$tmp/echo.log"
  fail "the kernel's own TCP between the hosts broke: $echo_state"
fi

# --- the link down for 3 s mid-run (two hosts; after the echo, which the cut
# would break): TCP carries the pair across the outage, data checked.
if ((nhosts == 2)); then
  n=600000  # about 10 s of 8 B round trips either way: the cut falls inside
  [[ -n $switch ]] && n=200000
  $run_as 0 timeout 120 fi_pingpong -p softrdma -e msg -S 8 -I "$n" -c -B 47710 >"$tmp/cut.srv" 2>&1 &
  srv=$!
  for _ in $(seq 50); do
    ip netns exec "${hosts[0]}" ss -Hltn 'sport = :47710' | grep -q . && break
    sleep 0.1
  done
  $run_as 1 timeout 120 fi_pingpong -p softrdma -e msg -S 8 -I "$n" -c -P 47710 "${addr[0]}" \
    >"$tmp/cut.cli" 2>&1 &
  cli=$!
  # Cut once messages flow (the pair's set-up, an AF_XDP port's above all,
  # can take seconds on a slow host: a cut before the connect is another test).
  seen=$(bypassed 0)
  for _ in $(seq 600); do
    (($(bypassed 0) - seen >= 2000)) && break
    kill -0 "$cli" 2>/dev/null || break
    sleep 0.1
  done
  (($(bypassed 0) - seen >= 2000)) || { cat "$tmp/cut.cli" "$tmp/cut.srv"; fail "link cut: no messages flowed before the cut"; }
  kill -0 "$cli" || { cat "$tmp/cut.cli" "$tmp/cut.srv"; fail "link cut: the pair ended before the cut"; }
  ip link set "${ports[1]}" down && sleep 3 && ip link set "${ports[1]}" up || fail "link cut"
  t0=$SECONDS
  wait "$cli" && wait "$srv" ||
    { cat "$tmp/cut.cli" "$tmp/cut.srv"; fail "the pair did not survive the link down for 3 s"; }
  echo "link down 3 s: the pair finished, data checked, $((SECONDS - t0)) s after the link came back"
fi
echo "hosts_test: PASS"
