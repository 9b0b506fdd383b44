#!/usr/bin/env bash
# Thousands of connections over the memif mesh (stack/tests/many_conns_lib.sh):
# an srdma_soak server and its clients on this host, two mixed operations in
# flight per connection (0..4 KiB), every byte checked, heaps on transparent
# huge pages (many_conns_lib.sh). Four shapes, each run once per round,
# rounds interleaved:
#   300      one client, 300 connections
#   4096     one client, 4096 connections
#   4096-4k  the same on the default 4 KiB pages
#   10k      three clients, 3334 connections each: 10,002 in the server
# Prints the aggregate operations per second, median [min-max], the server's
# most connections at once, and the medians' ratio of 4096 to 300.
# usage: conns_bench.sh <srdma_soak> [rounds (5)] [seconds per run (10)]
# Needs root (DPDK).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
soak=${1:?usage: conns_bench.sh <srdma_soak> [rounds] [seconds]}
rounds=${2:-5}
secs=${3:-10}
source "$root/stack/tests/many_conns_lib.sh"
[[ $(id -u) -eq 0 ]] || { echo "conns_bench: needs root (DPDK)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/conns_bench.XXXXXX)
results=$tmp/results

shape() {
  case $1 in
    300) echo "300 1" ;;
    4096 | 4096-4k) echo "4096 1" ;;
    10k) echo "3334 3" ;;
  esac
}

for ((r = 1; r <= rounds; ++r)); do
  for s in 300 4096 4096-4k 10k; do
    read -r conns clients <<<"$(shape "$s")"
    pages=thp
    [[ $s == *-4k ]] && pages=4k
    CONNS_PAGES=$pages conns_round "$tmp/r$r-$s" "$conns" "$clients" "$secs"
    if [[ -n $ROUND_WHY ]]; then
      echo "round $r: $s failed: $ROUND_WHY"
      echo "$s fail 0" >>"$results"
    else
      echo "$s $ROUND_RATE $ROUND_CONNS" >>"$results"
    fi
  done
done

echo "srdma_soak over the memif mesh, $(nproc) CPUs, $rounds rounds of ${secs} s," \
     "2 operations in flight per connection, 0..4 KiB, every byte checked," \
     "heaps on transparent huge pages unless -4k"
printf '%-8s %-34s %-14s %s\n' shape "ops/s median [min-max]" "server conns" failed
awk '
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { if ($2 == "fail") { f[$1]++; next } v[$1, ++n[$1]] = $2; if ($3 > c[$1]) c[$1] = $3 }
  END {
    split("300 4096 4096-4k 10k", order, " ")
    for (i = 1; i <= 4; ++i) {
      s = order[i]
      if (!n[s]) { printf "%-8s %-34s %-14s %d\n", s, "-", "-", f[s]; continue }
      delete a; lo = hi = v[s, 1]
      for (k = 1; k <= n[s]; ++k) { a[k] = v[s, k]; if (v[s, k] < lo) lo = v[s, k]; if (v[s, k] > hi) hi = v[s, k] }
      med[s] = median(a, n[s])
      printf "%-8s %-34s %-14d %d\n", s, sprintf("%d [%d-%d]", med[s], lo, hi), c[s], f[s]
    }
    if (med["300"] > 0) printf "4096 / 300: %.2f (on 4 KiB pages %.2f); 10k / 300: %.2f\n", med["4096"] / med["300"], med["4096-4k"] / med["300"], med["10k"] / med["300"]
  }' "$results"
rm -rf "$tmp"
