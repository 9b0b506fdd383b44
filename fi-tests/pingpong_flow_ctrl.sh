#!/usr/bin/env bash
# fi_pingpong -e rdm with and without ofi_rxm's flow-control ops: under this
# host's libfabric rxm turns them on for its connections ("flow control on"
# from the provider); with fi_version() faked to a release whose layout the
# provider does not know, the ops are refused with a warning and rxm's own
# sending still passes every size with data checked.
# Usage: pingpong_flow_ctrl.sh <dir with libsoftrdma-fi.so> <fake_fi_version.so>
set -uo pipefail
dir=$1 fake=$2
here=$(cd "$(dirname "$0")" && pwd)

out=$(FI_LOG_LEVEL=info FI_LOG_PROV=softrdma bash "$here/pingpong_test.sh" "$dir" rdm 2>&1)
rc=$?
echo "$out" | tail -n 40
[[ $rc == 0 ]] || { echo "FAIL: fi_pingpong -e rdm"; exit 1; }
grep -q "flow control on" <<<"$out" || { echo "FAIL: rxm did not turn flow control on"; exit 1; }

out=$(FI_LOG_LEVEL=warn LD_PRELOAD=$fake bash "$here/pingpong_test.sh" "$dir" rdm 2>&1)
rc=$?
echo "$out" | tail -n 40
[[ $rc == 0 ]] || { echo "FAIL: fi_pingpong -e rdm without the flow-control ops"; exit 1; }
grep -q "ofi_rxm flow control not offered: libfabric 1.99" <<<"$out" ||
  { echo "FAIL: no warning that the ops were refused"; exit 1; }
if grep -q "flow control on" <<<"$out"; then echo "FAIL: flow control on though refused"; exit 1; fi
echo "PASS: rxm gets the flow-control ops under libfabric $(fi_info --version | sed -n 's/^libfabric: //p'), and runs without them when refused"
