#!/usr/bin/env bash
# MPI across hosts as users run it: two network namespace hosts on a bridge
# (fi-tests/hosts_lib.sh), each with its kernel address on its one
# interface and softrdma-switch running on it (the administrator's one
# step); a head node (the bridge's address in the root namespace) runs
# mpirun with one hostfile, which starts the daemons through an rsh agent
# (netns_rsh.sh) as the user nobody: 4 ranks per host, 8 in all, over
# Open MPI's parameter set (--tune packaging/amca/softrdma), no per-rank or
# per-host setting (no FI_SOFTRDMA_* variable but FI_SOFTRDMA_STATS, which
# only reports the counters).
#
# For mpi_p2p (0 B to 64 MiB, every ordered pair) and mpi_coll, over
# softrdma;ofi_rxm and over softrdma's own FI_EP_RDM, and mpi_onesided (by
# RDMA as the parameter set has it, and over the MTL with --mca osc pt2pt),
# asserts:
#  - PASS, and all 8 ranks' MTL chose the provider the job asked for;
#  - cross-host pairs took the bypass path: each host's NIC gave softrdma
#    at least the frames the cross-host payload needs (hosts_lib.sh:
#    bypassed), while its kernel TCP sent far fewer segments than the
#    payload would take (Open MPI's out-of-band traffic);
#  - every rank attached to its host's switch as nobody, and same-host
#    pairs used the memif mesh (each rank announced a mesh link).
# usage: hosts_mpi_test.sh <prov dir> <mpi-tests bin dir> <softrdma-switch> <amca file> [seconds per job]
# Needs root (namespaces; the ranks drop to nobody). Fails, never skips.
set -uo pipefail
prov=${1:?usage: hosts_mpi_test.sh <prov dir> <bin dir> <switch> <amca file> [seconds]}
bin=${2:?bin dir}
switch=${3:?softrdma-switch}
amca=${4:?amca file}
secs=${5:-240}
fail() { echo "hosts_mpi_test: FAIL: $*" >&2; exit 1; }
amca=$(cd "$(dirname "$amca")" && pwd)/$(basename "$amca")
switch=$(cd "$(dirname "$switch")" && pwd)/$(basename "$switch")
for p in mpi_p2p mpi_coll mpi_onesided; do [[ -x $bin/$p ]] || fail "no $bin/$p"; done
bin=$(cd "$bin" && pwd)
# shellcheck source=mpi-tests/hosts_mpi_lib.sh
source "$(dirname "$0")/hosts_mpi_lib.sh"

# job <program> <cross-host payload each way, octets (at least)> [mpirun options]
# want: the provider the ranks' MTL must choose.
want='softrdma;ofi_rxm'
job() {
  local prog=$1 payload=$2 log=$tmp/$1.log
  shift 2
  local r0 r1 s0 s1
  r0=$(bypassed 0) r1=$(bypassed 1) s0=$(out_segs 0) s1=$(out_segs 1)
  mpirun_hosts "$secs" -np 8 --tune "$amca" --mca mtl_ofi_verbose 1 -x FI_SOFTRDMA_DEBUG=1 "$@" \
    "$bin/$prog" >"$log" 2>&1
  local rc=$? why=""
  local n need kneed dr0 dr1 ds0 ds1 links
  n=$(grep -c "mtl:ofi:prov: $want\$" "$log")
  need=$((payload / frame_payload))  # bypass frames
  kneed=$((payload / 1448))          # the kernel's segments, had it carried the payload
  dr0=$(($(bypassed 0) - r0)) dr1=$(($(bypassed 1) - r1))
  ds0=$(($(out_segs 0) - s0)) ds1=$(($(out_segs 1) - s1))
  links=$(grep -o 'softrdma\[[0-9]*\]: link to' "$log" | sort -u | wc -l)
  echo "$prog: rc=$rc; $n of 8 ranks on $want; bypass ($via) A=$dr0 B=$dr1 frames" \
       "(cross-host payload needs >= $need); kernel TCP OutSegs A=$ds0 B=$ds1; $links ranks opened mesh links"
  if [[ $rc == 124 || $rc == 137 ]]; then why="timed out after ${secs}s"
  elif [[ $rc != 0 ]]; then why="mpirun exited with $rc"
  elif ! grep -q "^PASS " "$log"; then why="no PASS line"
  elif [[ $n != 8 ]]; then why="$n of 8 ranks chose $want"
  elif ((dr0 < need || dr1 < need)); then why="the bypass path carried too few frames"
  elif ((kneed > 10000 && (ds0 > kneed / 10 || ds1 > kneed / 10))); then why="the payload went through the kernel's TCP"
  elif ((links < 8)); then why="only $links of 8 ranks opened memif mesh links to same-host ranks"
  fi
  [[ -z $why ]] || { cat "$log"; fail "$prog: $why"; }
}

# Cross-host payload at least: p2p sends 0-4 MiB between every ordered pair
# and up to 64 MiB from rank 0 (4 of its peers are on the other host).
job mpi_p2p $((4 * 64 * 1024 * 1024))
# Two-sided over the native endpoint: libfabric lists ofi_rxm's first.
want=softrdma job mpi_p2p $((4 * 64 * 1024 * 1024)) -x FI_PROVIDER=^ofi_rxm
want=softrdma job mpi_coll 0 -x FI_PROVIDER=^ofi_rxm
job mpi_coll 0
job mpi_onesided 0 --mca osc pt2pt  # one-sided over the MTL (see onesided.c)
# By RDMA (osc rdma, the ofi BTL, softrdma's FI_EP_RDM), across the hosts too.
job mpi_onesided 0 -x FI_SOFTRDMA_STATS=stderr
bash "$(dirname "$0")/one_sided_rdma.sh" "$tmp/mpi_onesided.log" 8 ||
  fail "mpi_onesided: one-sided traffic did not go by RDMA"
for ((i = 0; i < nhosts; ++i)); do
  a=$(grep -c "(uid 65534) attached" "$tmp/switch$i.log")
  r=$(grep -c "(uid 0) attached" "$tmp/switch$i.log")
  echo "host ${letters:i:1}: switch attached $a ranks as nobody, $r as root"
  ((a >= 12 && r == 0)) || { cat "$tmp/switch$i.log"; fail "host $i's ranks did not all come as nobody"; }
done
echo "hosts_mpi_test: PASS"
