# Helpers for tests that make hosts out of network namespaces
# (fi-tests/hosts_lib.sh, mpi-tests/netns_test.sh).
# shellcheck shell=bash

# free_subnet [first]: prints a 10.x.0 prefix (a /24) that no interface or
# route of this machine uses, trying x from first (default 99) upwards and
# then from 20; prints nothing when all are taken.
free_subnet() {
  local first=${1:-99} r
  for r in $(seq "$first" 254) $(seq 20 254); do
    ip -4 -o addr show | grep -q " 10\.$r\.0\." && continue
    ip -4 route show | grep -q "^10\.$r\.0\." && continue
    echo "10.$r.0"
    return 0
  done
}

# kill_netns <namespace>...: SIGKILL every process in them (daemons too).
kill_netns() {
  local h pids
  for h in "$@"; do
    mapfile -t pids < <(ip netns pids "$h" 2>/dev/null)
    ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
  done
  return 0
}
