#!/usr/bin/env bash
# Runs an MPI program over softrdma the way users type it (Open MPI's cm PML
# and ofi MTL, FI_PROVIDER=softrdma, the provider found through
# FI_PROVIDER_PATH), under a timeout, and checks that it really went that
# way: the MTL picked softrdma;ofi_rxm, every rank opened memif links of the
# DPDK mesh, and the program printed its PASS line.
# ONE_SIDED_RDMA=1: the program's one-sided traffic must go by RDMA
# (one_sided_rdma.sh reads the ranks' counters, FI_SOFTRDMA_STATS).
# NATIVE_RDM=1: the MTL must use softrdma's own FI_EP_RDM (ofi_rxm is left
# out of libfabric's list, FI_PROVIDER=^ofi_rxm).
# Usage: mpirun-softrdma.sh <dir with libsoftrdma-fi.so> <np> <seconds> <program> [mpirun options...]
set -uo pipefail
dir=$1 np=$2 secs=$3 prog=$4
shift 4
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Debian's /etc/openmpi/openmpi-mca-params.conf says "mtl = ^ofi": the
# command line's "--mca mtl ofi" overrides it. --oversubscribe: 4 ranks on
# this 2-core machine; Open MPI then lets ranks yield instead of spinning.
# MPIRUN_TUNE=<file>: select the path with the parameter set users are
# given (packaging/amca/softrdma) instead of the options.
if [[ -n ${MPIRUN_TUNE:-} ]]; then
  select=(--tune "$MPIRUN_TUNE")
else
  select=(--mca pml cm --mca mtl ofi -x FI_PROVIDER=softrdma)
fi
[[ -n ${ONE_SIDED_RDMA:-} ]] && select+=(-x FI_SOFTRDMA_STATS=stderr)
want='softrdma;ofi_rxm'
if [[ -n ${NATIVE_RDM:-} ]]; then
  select+=(-x FI_PROVIDER=^ofi_rxm)
  want=softrdma
fi
timeout -k 10 "$secs" mpirun --allow-run-as-root --oversubscribe -np "$np" \
  "${select[@]}" --mca mtl_ofi_verbose 1 \
  -x FI_PROVIDER_PATH="$dir" -x FI_SOFTRDMA_DEBUG=1 \
  "$@" "$prog" >"$log" 2>&1
rc=$?
cat "$log"
fail() { echo "FAIL: $*"; exit 1; }
[[ $rc == 124 || $rc == 137 ]] && fail "timed out after ${secs}s"
[[ $rc == 0 ]] || fail "mpirun exited with $rc"
# Each rank's MTL names its provider once.
n=$(grep -c "mtl:ofi:prov: $want\$" "$log")
[[ $n == "$np" ]] || fail "$n of $np ranks chose $want"
# The mesh announces every memif link it opens (FI_SOFTRDMA_DEBUG=1): at
# least one per rank, since every rank talks to another.
links=$(grep -o 'softrdma\[[0-9]*\]: link to' "$log" | sort -u | wc -l)
(( links >= np )) || fail "only $links of $np ranks opened DPDK memif links"
grep -q "^PASS " "$log" || fail "no PASS line"
if [[ -n ${ONE_SIDED_RDMA:-} ]]; then
  bash "$(dirname "$0")/one_sided_rdma.sh" "$log" "$np" || fail "one-sided traffic did not go by RDMA"
fi
echo "OK: $(basename "$prog") np=$np over $want on the DPDK memif mesh"
