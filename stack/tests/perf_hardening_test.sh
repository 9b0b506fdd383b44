#!/usr/bin/env bash
# An srdma_perf server facing requests outside the protocol's limits
# (stack/tools/perf_protocol.h): perf_hostile_client sends Hellos that ask for
# 8 GiB and 1 GiB of buffers, empty or wrapping regions, bad depths, strides,
# counts and magic. The server must reject each with a reason, print why,
# stay alive, stay small (VmHWM under 256 MiB: it allocates nothing for a
# rejected client), and then serve a normal client with every byte checked.
#
# The server runs under a 4 GiB address-space limit, so a server that does
# try to allocate what it was asked for fails here instead of taking the
# machine's memory. An AddressSanitizer build reserves terabytes of shadow
# address space, so there the bound is ASan's own hard RSS limit instead.
#
# usage: perf_hardening_test.sh <path-to-srdma_perf> <path-to-perf_hostile_client>
set -u

perf=${1:?usage: perf_hardening_test.sh <srdma_perf> <perf_hostile_client>}
hostile=${2:?usage: perf_hardening_test.sh <srdma_perf> <perf_hostile_client>}
for bin in "$perf" "$hostile"; do
  [[ -x $bin ]] || { echo "perf_hardening_test: $bin is not executable" >&2; exit 2; }
done

max_hwm_kb=$((256 * 1024))
tmp=$(mktemp -d)
server_pid=""
trap '[[ -z $server_pid ]] || kill "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT

source "$(dirname "$0")/perf_server.sh"

fail() {
  echo "FAIL: $*"
  echo "--- server log"
  cat "$tmp/server.log"
  exit 1
}

start_server() {
  if ldd "$perf" 2>/dev/null | grep -q libasan; then
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=4096" exec "$perf" -p "$port" --timeout 60
  fi
  ulimit -v $((4 * 1024 * 1024)) && exec "$perf" -p "$port" --timeout 60
}

started=0
for ((attempt = 0; attempt < 5; ++attempt)); do
  port=$(free_port)
  : >"$tmp/server.log"
  (start_server) >"$tmp/server.log" 2>&1 &
  server_pid=$!
  if wait_listening "$server_pid" "$tmp/server.log" "$port"; then
    started=1
    break
  fi
  kill "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
done
[[ $started -eq 1 ]] || fail "the server did not start"

timeout 90 "$hostile" "$port" >"$tmp/hostile.log" 2>&1
hostile_rc=$?
cat "$tmp/hostile.log"
[[ $hostile_rc -eq 0 ]] || fail "perf_hostile_client exit $hostile_rc: not every request was rejected"

kill -0 "$server_pid" 2>/dev/null || fail "the server exited after the hostile requests"
hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status")
echo "server VmHWM after the hostile requests: ${hwm_kb:-?} kB (bound $max_hwm_kb kB)"
[[ -n $hwm_kb && $hwm_kb -lt $max_hwm_kb ]] || fail "the server grew to ${hwm_kb:-?} kB"

# The server says why it turned each one away.
expected=$(grep -c '^ok ' "$tmp/hostile.log")
said=$(grep -c '^srdma_perf: rejected a client: ' "$tmp/server.log")
[[ $said -eq $expected ]] || fail "the server printed $said rejections for $expected requests"

# And it still serves: verified Write bandwidth, then its clean exit.
timeout 75 "$perf" -p "$port" --timeout 60 -o write -t bw -c -s 1,64K,1M -n 50 127.0.0.1 \
  >"$tmp/client.log" 2>&1
client_rc=$?
wait "$server_pid"
server_rc=$?
server_pid=""
cat "$tmp/client.log"
[[ $client_rc -eq 0 ]] || fail "the normal client failed (exit $client_rc)"
[[ $server_rc -eq 0 ]] || fail "the server failed serving the normal client (exit $server_rc)"
rows=$(grep -cE '^ +(1|65536|1048576) +50 ' "$tmp/client.log")
[[ $rows -eq 3 ]] || fail "the normal client printed $rows of 3 result rows"
grep -q '^# srdma_perf server: done, 0 mismatches$' "$tmp/server.log" ||
  fail "the server did not report a clean run"

echo "perf_hardening_test: $expected hostile requests rejected, server at ${hwm_kb} kB, normal run verified"
