#!/usr/bin/env bash
# MPI across two namespace hosts as users run it (mpi-tests/hosts_mpi_lib.sh:
# softrdma-switch on each host, every rank as nobody, mpirun on a head node
# with one hostfile): 8 B latency and 1 MiB bandwidth between one rank on
# each host, the 8 B allreduce latency of 8 ranks (4 per host), and MPI
# put/get latency (8 B) and bandwidth (1 MiB) under a passive-target lock.
# Paths, on the same links:
#   softrdma         Open MPI's parameter set (--tune): cm PML, ofi MTL over
#                    softrdma;ofi_rxm; one-sided by osc rdma over the ofi
#                    BTL on softrdma's own FI_EP_RDM (RDMA Writes, Reads);
#                    memif between same-host ranks
#   softrdma-native  the same, the MTL on softrdma's own FI_EP_RDM too
#   tcp-btl          ob1 with the tcp BTL (vader between same-host ranks);
#                    one-sided by osc pt2pt, the only route Debian's Open
#                    MPI has there
#   tcp-ofi          cm with libfabric's tcp;ofi_rxm (osc pt2pt)
# R rounds, each running every (path, benchmark) once, interleaved;
# medians [min-max] and the ratios to each peer.
# usage: [mtu=N] hosts_mpi_bench.sh <prov dir> <mpi-tests bin dir> <softrdma-switch> <amca file> [rounds (5)]
# Needs root (namespaces; the ranks drop to nobody).
set -uo pipefail
usage="usage: hosts_mpi_bench.sh <prov dir> <bin dir> <softrdma-switch> <amca file> [rounds]"
prov=${1:?$usage}
bin=${2:?$usage}
switch=${3:?$usage}
amca=${4:?$usage}
rounds=${5:-5}
fail() { echo "hosts_mpi_bench: FAIL: $*" >&2; exit 1; }
amca=$(cd "$(dirname "$amca")" && pwd)/$(basename "$amca")
switch=$(cd "$(dirname "$switch")" && pwd)/$(basename "$switch")
bin=$(cd "$bin" && pwd)
for p in mpi_bench_latency mpi_bench_bw mpi_bench_coll_lat mpi_bench_rma; do
  [[ -x $bin/$p ]] || fail "no $bin/$p"
done
# shellcheck source=mpi-tests/hosts_mpi_lib.sh
source "$(dirname "$0")/../mpi-tests/hosts_mpi_lib.sh"

paths="softrdma softrdma-native tcp-btl tcp-ofi"
benches="latency bw allreduce put_lat get_lat put_bw get_bw"
# path_args <path> <bench>
path_args() {
  local osc=""
  [[ $2 == put_* || $2 == get_* ]] && osc="--mca osc pt2pt"
  case $1 in
    softrdma) echo "--tune $amca" ;;
    softrdma-native) echo "--tune $amca -x FI_PROVIDER=^ofi_rxm" ;;
    tcp-btl) echo "--mca pml ob1 --mca btl tcp,vader,self $osc" ;;
    tcp-ofi) echo "--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp;ofi_rxm" \
                  "-x FI_PROVIDER=tcp -x FI_TCP_IFACE=$iface $osc" ;;
  esac
}
# bench name -> ranks, placement, program and its options, the size it reports
bench_line() {
  case $1 in
    latency) echo "2 node mpi_bench_latency -m 8:8 -i 5000 8" ;;
    bw) echo "2 node mpi_bench_bw -m 1048576:1048576 -I 10 1048576" ;;
    allreduce) echo "8 slot mpi_bench_coll_lat allreduce -m 8:8 -i 2000 8" ;;
    put_lat | get_lat) echo "2 node mpi_bench_rma ${1%_lat} -m 8:8 -i 2000 8" ;;
    put_bw | get_bw) echo "2 node mpi_bench_rma ${1%_bw} -b -m 1048576:1048576 -I 10 1048576" ;;
  esac
}
results=$tmp/results
for ((r = 1; r <= rounds; ++r)); do
  for b in $benches; do
    read -r -a w <<<"$(bench_line "$b")"
    np=${w[0]} map=${w[1]} size=${w[-1]}
    unset 'w[-1]'
    for p in $paths; do
      # shellcheck disable=SC2046  # the path's options are words
      mpirun_hosts 300 -np "$np" --map-by "$map" $(path_args "$p" "$b") \
        "$bin/${w[2]}" "${w[@]:3}" >"$tmp/run.log" 2>&1
      v=$(awk -v s="$size" '!/^#/ && $1 == s { print $2 }' "$tmp/run.log" | tail -1)
      if [[ -z $v ]]; then
        echo "round $r: $p $b failed:"; tail -20 "$tmp/run.log"; v=fail
      fi
      echo "$p $b $v" >>"$results"
    done
  done
done

echo "MPI across 2 namespace hosts, MTU $mtu, $rounds rounds (ranks as nobody; softrdma through softrdma-switch)"
printf '%-16s %-30s %-30s %s\n' path benchmark "median [min-max]" failed
awk -v paths="$paths" -v benches="$benches" '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && a[j - 1] > a[j]; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { k = $1 SUBSEP $2; if ($3 == "fail") { f[k]++; next } v[k, ++n[k]] = $3 }
  END {
    nb = split(benches, bs); np = split(paths, ps)
    label["latency"] = "latency 8 B (us)"; label["bw"] = "bandwidth 1 MiB (MB/s)"
    label["allreduce"] = "allreduce 8 B, 8 ranks (us)"
    label["put_lat"] = "put latency 8 B (us)"; label["get_lat"] = "get latency 8 B (us)"
    label["put_bw"] = "put bandwidth 1 MiB (MB/s)"; label["get_bw"] = "get bandwidth 1 MiB (MB/s)"
    for (i = 1; i <= nb; ++i) for (j = 1; j <= np; ++j) {
      k = ps[j] SUBSEP bs[i]; c = n[k]
      if (!c) { printf "%-16s %-30s %-30s %d\n", ps[j], label[bs[i]], "-", f[k]; continue }
      delete a; lo = hi = v[k, 1]
      for (m = 1; m <= c; ++m) { a[m] = v[k, m]; if (a[m] < lo) lo = a[m]; if (a[m] > hi) hi = a[m] }
      med[k] = median(a, c)
      printf "%-16s %-30s %-30s %d\n", ps[j], label[bs[i]], sprintf("%.2f [%.2f-%.2f]", med[k], lo, hi), f[k]
    }
    for (i = 1; i <= nb; ++i) for (j = 1; j <= 2; ++j) {
      s = med[ps[j] SUBSEP bs[i]]; t = med["tcp-btl" SUBSEP bs[i]]; o = med["tcp-ofi" SUBSEP bs[i]]
      if (s && t && o)
        printf "%s / tcp-btl %.2fx, / tcp-ofi %.2fx: %s\n", ps[j], s / t, s / o, label[bs[i]]
    }
  }' "$results"
