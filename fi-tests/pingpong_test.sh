#!/usr/bin/env bash
# fi_pingpong over softrdma, server and client as two processes on this
# machine, the client given 127.0.0.1 exactly as with the tcp provider, every
# size (-S all: 0 B to 6 MiB) with data verification (-c).
# rdm is ofi_rxm over softrdma's FI_EP_MSG; rdm-native softrdma's own
# FI_EP_RDM endpoint (ofi_rxm left out, so -p softrdma names only it).
# Usage: pingpong_test.sh <dir with libsoftrdma-fi.so> <msg|rdm|rdm-native> [iterations]
set -euo pipefail
dir=$1
ep=$2
iters=${3:-10}
export FI_PROVIDER_PATH=$dir
prov=softrdma
[[ $ep == rdm ]] && prov="softrdma;ofi_rxm"
if [[ $ep == rdm-native ]]; then
  ep=rdm
  export FI_PROVIDER=^ofi_rxm
fi
# A free out-of-band port per run so that ctest -j can run tests side by side.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=$(mktemp -d)
trap 'rm -rf "$log"; kill $srv 2>/dev/null || true' EXIT
# A run directory of this test's own: both ends exit normally, so nothing
# of theirs may stay in it.
mkdir -m 700 "$log/run"
export FI_SOFTRDMA_RUNDIR=$log/run
timeout 120 fi_pingpong -p "$prov" -e "$ep" -B "$port" -I "$iters" -S all -c >"$log/srv" 2>&1 &
srv=$!
ok=0
for _ in $(seq 50); do  # the server's control socket appears when it is ready
  if timeout 120 fi_pingpong -p "$prov" -e "$ep" -P "$port" -I "$iters" -S all -c 127.0.0.1 \
      >"$log/cli" 2>&1; then
    ok=1
    break
  fi
  grep -q "Connection refused\|ctrl/connect" "$log/cli" || break
  sleep 0.2
done
wait $srv && srv_ok=1 || srv_ok=0
echo "--- client"; cat "$log/cli"; echo "--- server"; cat "$log/srv"
if [[ $ok != 1 || $srv_ok != 1 ]]; then
  echo "FAIL: fi_pingpong -p '$prov' -e $ep"
  exit 1
fi
# Every size of -S all must have run: 0 B up to 6 MiB.
for size in "^0 " "^1k " "^64k " "^1m " "^6m "; do
  grep -q -E "$size" "$log/cli" || { echo "FAIL: size ${size} missing"; exit 1; }
done
left=$(ls -A "$log/run")
[[ -z $left ]] || { echo "FAIL: left in the run directory: $left"; exit 1; }
echo "PASS: fi_pingpong -p '$prov' -e $ep -S all -c"
