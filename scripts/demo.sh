#!/usr/bin/env bash
# The README's demo: SoftRDMA on this machine's embedded default (lwIP on
# DPDK memif, no hugepages, no NIC), through libfabric as users meet it.
#  1. Installed into libfabric's provider directory, fi_info lists the
#     softrdma provider and softrdma;ofi_rxm, with no variable set.
#  2. fi_pingpong -p softrdma -e msg, server and client as two processes,
#     client given 127.0.0.1 as with the tcp provider, data verified (-c).
#  3. The same through ofi_rxm (-e rdm), as MPI uses it.
#  4. srdma_perf: 8 B Send latency and 1 MiB RDMA Write bandwidth, on the
#     DPDK path and, for comparison, on kernel TCP.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
if [[ ! -f build/prov/libsoftrdma-fi.so || ! -x build/stack/tools/srdma_perf ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j "$(nproc)" --target softrdma-fi srdma_perf
fi
# Installed where libfabric looks by default: no FI_PROVIDER_PATH from here on.
cmake --install build >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# pingpong PROVIDER EP ARGS...: server in the background, client in front.
pingpong() {
  local prov=$1 ep=$2
  shift 2
  local port
  port=$(free_port)
  timeout 120 fi_pingpong -p "$prov" -e "$ep" -B "$port" "$@" >/tmp/softrdma-demo-srv.log 2>&1 &
  local srv=$!
  sleep 1
  timeout 120 fi_pingpong -p "$prov" -e "$ep" -P "$port" "$@" 127.0.0.1
  wait $srv
}

echo "== fi_info -p softrdma (installed provider, nothing set)"
fi_info -p softrdma | grep -E "provider|type|protocol" | sort | uniq -c
echo "== FI_PROVIDER=softrdma fi_info -t FI_EP_RDM"
FI_PROVIDER=softrdma fi_info -t FI_EP_RDM | grep -E "provider" | sort | uniq -c

for size in 8 1048576; do
  echo; echo "== fi_pingpong -p softrdma -e msg -S $size (DPDK memif), data verified"
  pingpong softrdma msg -I 1000 -S $size -c
  echo; echo "== fi_pingpong -p 'softrdma;ofi_rxm' -e rdm -S $size (DPDK memif), data verified"
  pingpong "softrdma;ofi_rxm" rdm -I 1000 -S $size -c
done

perf=build/stack/tools/srdma_perf
for transport in dpdk kernel; do
  echo; echo "== srdma_perf over $transport: 8 B Send latency, 1 MiB Write bandwidth"
  port=$(free_port)
  FI_SOFTRDMA_TRANSPORT=$transport timeout 120 "$perf" -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 1
  FI_SOFTRDMA_TRANSPORT=$transport timeout 60 "$perf" -p "$port" -o send -t lat -s 8 -n 20000 127.0.0.1
  wait $srv || true
  FI_SOFTRDMA_TRANSPORT=$transport timeout 120 "$perf" -p "$port" >/dev/null 2>&1 &
  srv=$!
  sleep 1
  FI_SOFTRDMA_TRANSPORT=$transport timeout 60 "$perf" -p "$port" -o write -t bw -s 1M -n 2000 127.0.0.1
  wait $srv || true
done
