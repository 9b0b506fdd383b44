#!/usr/bin/env bash
# fi_pingpong across two namespace hosts on a bridge (the hosts of
# fi-tests/hosts_test.sh: kernel address on each host's one veth, nothing
# configured), softrdma's host path against the tcp provider, -e msg and
# -e rdm (softrdma;ofi_rxm against tcp;ofi_rxm), side by side in one run on
# the same veths: R rounds, each running every (provider, size) once,
# interleaved; medians and spread per cell. softrdma runs four ways: through
# softrdma-switch on each host with the processes as nobody ("switch" rows,
# as users run it), or as root processes that open the NIC themselves
# ("root"); either over a packet socket with the kernel's offloads (the
# default) or over AF_XDP ("-xdp" rows, FI_SOFTRDMA_NIC=af_xdp). The
# switches' CPU time per message is reported. Two floors run at 8 B in the
# same rounds (bench/wire_floor, beside the switch's build tree or
# floor=<program>): a raw Ethernet frame bounced between packet sockets, and
# kernel TCP sockets, no library, both busy-polling (wire:raw, wire:tcp).
# usage: hosts_bench.sh <dir with libsoftrdma-fi.so> <softrdma-switch> [rounds (5)]
#                       [iterations at 8 B (2000)] [iterations at 1 MiB (100)]
# Needs root. mtu=N sets every link's MTU (default 1500).
set -uo pipefail
prov=${1:?usage: hosts_bench.sh <prov dir> <softrdma-switch> [rounds] [iters 8 B] [iters 1 MiB]}
switch_prog=${2:?usage: hosts_bench.sh <prov dir> <softrdma-switch> [rounds] [iters 8 B] [iters 1 MiB]}
rounds=${3:-5}
small=${4:-2000}
big=${5:-100}
here=$(cd "$(dirname "$0")" && pwd)
switch=$(cd "$(dirname "$switch_prog")" && pwd)/$(basename "$switch_prog")
floor=${floor:-$(dirname "$switch")/../../../bench/wire_floor}
[[ -x $floor ]] || { echo "hosts_bench: no wire_floor program ($floor); set floor=" >&2; exit 1; }
floor=$(cd "$(dirname "$floor")" && pwd)/$(basename "$floor")
# shellcheck source=fi-tests/hosts_lib.sh
source "$here/../fi-tests/hosts_lib.sh"

# Switches up (how=switch: ranks as nobody; switch-xdp: the switches over
# AF_XDP) or down (how=root, root-xdp).
switches_up=""
use() {
  local i want=""
  [[ $1 == switch* ]] && want=$1
  if [[ $want != "$switches_up" ]]; then
    if [[ -n $switches_up ]]; then
      for ((i = 0; i < nhosts; ++i)); do stop_switch "$i"; done
    fi
    nic=""
    [[ $want == switch-xdp ]] && nic=af_xdp
    if [[ -n $want ]]; then
      for ((i = 0; i < nhosts; ++i)); do start_switch "$i"; done
    fi
    switches_up=$want
  fi
  run_as=on_host
  [[ $1 == switch* ]] && run_as=as_user
  [[ $1 == root-xdp ]] && run_as=on_host_xdp
}
on_host_xdp() {
  local i=$1; shift
  on_host "$i" env FI_SOFTRDMA_NIC=af_xdp "$@"
}
switch_ticks() {  # both switches' CPU time so far, in clock ticks
  local i t=0 p
  for ((i = 0; i < nhosts; ++i)); do
    p=$(switch_pid "$i")
    [[ -n $p ]] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  echo "$t"
}

results=$tmp/results  # label size usec_per_xfer MB_per_s
swcpu=$tmp/switch_cpu  # size ticks messages
configs=("switch softrdma msg" "switch-xdp softrdma msg" "root softrdma msg"
         "root-xdp softrdma msg" "- tcp msg"
         "switch softrdma;ofi_rxm rdm" "switch-xdp softrdma;ofi_rxm rdm" "root softrdma;ofi_rxm rdm"
         "root-xdp softrdma;ofi_rxm rdm" "- tcp;ofi_rxm rdm")
label_of() { if [[ $1 == - ]]; then echo "$2"; else echo "$2($1)"; fi; }
labels=()
for c in "${configs[@]}"; do
  read -r how p ep <<<"$c"
  labels+=("$(label_of "$how" "$p")")
done
# run_floor <raw|tcp> <round trips>: the ping side's median half round trip.
run_floor() {
  local kind=$1 n=$2 pong out
  if [[ $kind == raw ]]; then
    on_host 0 "$floor" raw pong "$iface" >/dev/null 2>&1 &
  else
    on_host 0 "$floor" tcp pong 47611 >/dev/null 2>&1 &
  fi
  pong=$!
  sleep 0.3
  if [[ $kind == raw ]]; then
    out=$(on_host 1 timeout 60 "$floor" raw ping "$iface" "$n")
  else
    out=$(on_host 1 timeout 60 "$floor" tcp ping "${addr[0]}" 47611 "$n")
  fi
  kill "$pong" 2>/dev/null
  kill_netns "${hosts[0]}"
  wait "$pong" 2>/dev/null
  sed -n 's/^median \([0-9.]*\) us.*/\1/p' <<<"$out"
}
labels+=(wire:raw wire:tcp)

for r in $(seq "$rounds"); do
  use -
  for kind in raw tcp; do
    u=$(run_floor "$kind" "$small")
    if [[ -n $u ]]; then echo "wire:$kind 8 $u 0" >>"$results"; else echo "wire:$kind 8 fail fail" >>"$results"; fi
  done
  for c in "${configs[@]}"; do
    read -r how p ep <<<"$c"
    label=$(label_of "$how" "$p")
    use "$how"
    for size in 8 1048576; do
      n=$small
      ((size > 8)) && n=$big
      name=${label//[;()]/+}-$size-$r
      t0=$(switch_ticks)
      if run_pingpong "$name" "$p" "$ep" "$size" "$n" 60; then
        # The client's result line: bytes #sent #ack total time MB/sec usec/xfer ...
        awk -v p="$label" -v s="$size" '$2 ~ /^[0-9]/ && NF >= 8 { print p, s, $7, $6 }' \
          "$tmp/$name.cli" >>"$results"
        [[ $how == switch* && $p == softrdma ]] && echo "$how $size $(($(switch_ticks) - t0)) $((2 * n))" >>"$swcpu"
      else
        echo "round $r: $label $size failed:"; cat "$tmp/$name.cli"
        echo "$label $size fail fail" >>"$results"
      fi
    done
  done
done
echo "fi_pingpong across namespace hosts, MTU $mtu, $rounds rounds (8 B: -I $small, 1 MiB: -I $big)"
printf '%-28s %-8s %-28s %-28s %s\n' provider size "usec/xfer median [min-max]" "MB/s median [min-max]" failed
for p in "${labels[@]}"; do
  sizes="8 1048576"
  [[ $p == wire:* ]] && sizes=8
  for size in $sizes; do
    awk -v p="$p" -v s="$size" 'BEGIN { n = 0; f = 0 }
      $1 == p && $2 == s && $3 == "fail" { f++ }
      $1 == p && $2 == s && $3 != "fail" { u[n] = $3; m[n] = $4; n++ }
      function med(a, k,   i, j, t) {
        for (i = 0; i < k; i++) for (j = i + 1; j < k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return k % 2 ? a[int(k / 2)] : (a[k / 2 - 1] + a[k / 2]) / 2
      }
      END {
        if (!n) { printf "%-28s %-8s %-28s %-28s %d\n", p, s, "-", "-", f; exit }
        mu = med(u, n); lo = u[0]; hi = u[n - 1]
        mm = med(m, n); mlo = m[0]; mhi = m[n - 1]
        printf "%-28s %-8s %-28s %-28s %d\n", p, s, sprintf("%.2f [%.2f-%.2f]", mu, lo, hi),
               sprintf("%.2f [%.2f-%.2f]", mm, mlo, mhi), f
      }' "$results"
  done
done
# The switches' CPU (both hosts together) per message of softrdma -e msg
# through them, all rounds summed.
hz=$(getconf CLK_TCK)
awk -v hz="$hz" '{ k = $1 " " $2; t[k] += $3; m[k] += $4 }
  END { for (k in t) { split(k, w, " ")
          printf "%s CPU, -e msg %s B: %.2f us per message (both switches, %d messages)\n",
                 w[1], w[2], t[k] * 1e6 / hz / m[k], m[k] } }' "$swcpu"
