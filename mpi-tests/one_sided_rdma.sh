#!/usr/bin/env bash
# Whether an MPI job's one-sided traffic went by RDMA (osc rdma over the
# ofi BTL over softrdma's FI_EP_RDM): in the job's log, every rank's engine
# counters (FI_SOFTRDMA_STATS=stderr) show RDMA Writes and Read Requests it
# sent, and the ranks together Atomic Requests. Prints what it found; exit
# 1 if not.
# usage: one_sided_rdma.sh <log> <ranks>
set -uo pipefail
log=${1:?usage: one_sided_rdma.sh <log> <ranks>}
np=${2:?ranks}
# "softrdma: pid N counters: ... writes_tx=W read_requests_tx=R atomic_requests_tx=A"
read -r ranks writers readers atomics < <(awk '/^softrdma: pid [0-9]* counters:/ {
  n++; for (i = 1; i <= NF; ++i) { split($i, kv, "=")
    if (kv[1] == "writes_tx" && kv[2] > 0) w++
    if (kv[1] == "read_requests_tx" && kv[2] > 0) r++
    if (kv[1] == "atomic_requests_tx") a += kv[2] } }
  END { print n + 0, w + 0, r + 0, a + 0 }' "$log")
echo "one-sided: $ranks of $np ranks reported counters; $writers sent RDMA Writes," \
     "$readers Read Requests; $atomics Atomic Requests in all"
[[ $ranks == "$np" && $writers == "$np" && $readers == "$np" ]] && ((atomics > 0))
