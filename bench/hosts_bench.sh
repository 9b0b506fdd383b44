#!/usr/bin/env bash
# fi_pingpong across two namespace hosts on a bridge (the hosts of
# fi-tests/hosts_test.sh: kernel address on each host's one veth, nothing
# configured), softrdma's host path (af_xdp) against the tcp provider, -e msg
# and -e rdm (softrdma;ofi_rxm against tcp;ofi_rxm), side by side in one run
# on the same veths: R rounds, each running every (provider, size) once,
# interleaved; medians and spread per cell.
# usage: hosts_bench.sh <dir with libsoftrdma-fi.so> [rounds (5)] [iterations at 8 B (2000)]
#                       [iterations at 1 MiB (100)]
# Needs root.
set -uo pipefail
prov=${1:?usage: hosts_bench.sh <prov dir> [rounds] [iters 8 B] [iters 1 MiB]}
rounds=${2:-5}
small=${3:-2000}
big=${4:-100}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=fi-tests/hosts_lib.sh
source "$here/../fi-tests/hosts_lib.sh"

results=$tmp/results  # provider size usec_per_xfer MB_per_s
configs=("softrdma msg" "tcp msg" "softrdma;ofi_rxm rdm" "tcp;ofi_rxm rdm")
for r in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    read -r p ep <<<"$c"
    for size in 8 1048576; do
      n=$small
      ((size > 8)) && n=$big
      name=${p/;/+}-$size-$r
      if run_pingpong "$name" "$p" "$ep" "$size" "$n" 60; then
        # The client's result line: bytes #sent #ack total time MB/sec usec/xfer ...
        awk -v p="$p" -v s="$size" '$2 ~ /^[0-9]/ && NF >= 8 { print p, s, $7, $6 }' \
          "$tmp/$name.cli" >>"$results"
      else
        echo "round $r: $p $size failed:"; cat "$tmp/$name.cli"
        echo "$p $size fail fail" >>"$results"
      fi
    done
  done
done
echo "fi_pingpong across namespace hosts, $rounds rounds (8 B: -I $small, 1 MiB: -I $big)"
printf '%-17s %-8s %-28s %-28s %s\n' provider size "usec/xfer median [min-max]" "MB/s median [min-max]" failed
for c in "${configs[@]}"; do
  read -r p _ <<<"$c"
  for size in 8 1048576; do
    awk -v p="$p" -v s="$size" 'BEGIN { n = 0; f = 0 }
      $1 == p && $2 == s && $3 == "fail" { f++ }
      $1 == p && $2 == s && $3 != "fail" { u[n] = $3; m[n] = $4; n++ }
      function med(a, k,   i, j, t) {
        for (i = 0; i < k; i++) for (j = i + 1; j < k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return k % 2 ? a[int(k / 2)] : (a[k / 2 - 1] + a[k / 2]) / 2
      }
      END {
        if (!n) { printf "%-17s %-8s %-28s %-28s %d\n", p, s, "-", "-", f; exit }
        mu = med(u, n); lo = u[0]; hi = u[n - 1]
        mm = med(m, n); mlo = m[0]; mhi = m[n - 1]
        printf "%-17s %-8s %-28s %-28s %d\n", p, s, sprintf("%.2f [%.2f-%.2f]", mu, lo, hi),
               sprintf("%.2f [%.2f-%.2f]", mm, mlo, mhi), f
      }' "$results"
  done
done
