# Sourced by many_conns_test.sh and bench/conns_bench.sh: one srdma_soak
# server and N clients on this host over the memif mesh, every operation
# checked, the server's resources checked to come back when all are gone.
# Needs $root (the repository) and $soak (srdma_soak); DPDK path, so root.

source "$root/stack/tests/perf_server.sh"  # free_port, wait_listening

# Each process keeps its heap on transparent huge pages (glibc's
# glibc.malloc.hugetlb=1, as the README advises for thousands of
# connections): their state on 4 KiB pages costs a TLB miss at nearly every
# step, dearly in a VM. CONNS_PAGES=4k runs on the default pages instead.
soak_env() {
  echo FI_SOFTRDMA_TRANSPORT=dpdk
  [[ ${CONNS_PAGES:-thp} == 4k ]] ||
    echo "GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"
}

# conns_round DIR CONNS CLIENTS SECONDS: each client opens CONNS connections
# to the server (2 operations in flight each, 0..4 KiB) for SECONDS. Sets
# ROUND_RATE (the clients' operations per second, summed), ROUND_CONNS (the
# server's most connections at once) and ROUND_WHY (empty if every process
# exited 0 and no close took over 5 s). Logs stay in DIR.
conns_round() {
  local dir=$1 conns=$2 clients=$3 secs=$4 port i rc pids=() limit
  mkdir -p "$dir"
  ROUND_RATE=0 ROUND_CONNS=0 ROUND_WHY=""
  limit=$((secs * 3 + 120))
  port=$(free_port)
  : >"$dir/server.log"
  local envs
  mapfile -t envs < <(soak_env)
  env "${envs[@]}" timeout $((limit + 60)) "$soak" --server -p "$port" \
    --serve-until-idle 3 --timeout "$limit" >"$dir/server.log" 2>&1 &
  local server=$!
  if ! wait_listening "$server" "$dir/server.log" "$port" 30; then
    kill "$server" 2>/dev/null
    ROUND_WHY="the server did not start: $(tail -n 3 "$dir/server.log")"
    return
  fi
  for ((i = 0; i < clients; ++i)); do
    env "${envs[@]}" timeout $((limit + 30)) "$soak" -p "$port" -n "$conns" -q 2 \
      -s 4K -d "$secs" -r 1 --no-bye --flat-mib 64 --timeout "$limit" 127.0.0.1 \
      >"$dir/client$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < clients; ++i)); do
    wait "${pids[$i]}"
    rc=$?
    [[ $rc -ne 0 && -z $ROUND_WHY ]] && ROUND_WHY="client $i exited $rc: $(grep -E 'MISMATCH|srdma_soak client|^# main' "$dir/client$i.log" | head -n 3)"
  done
  wait "$server"
  rc=$?
  [[ $rc -ne 0 && -z $ROUND_WHY ]] && ROUND_WHY="the server exited $rc: $(grep -E 'SERVER|srdma_soak server' "$dir/server.log" | head -n 3)"
  local slow
  slow=$(cat "$dir"/client*.log | grep -c 'close took over 5 s')
  [[ $slow -ne 0 && -z $ROUND_WHY ]] && ROUND_WHY="$slow closes took over 5 s"
  # "# main: 14.1 s, 300 conns, 5528753 ops (391941/s); ..."
  ROUND_RATE=$(cat "$dir"/client*.log | sed -n 's/^# main: .* ops (\([0-9]*\)\/s).*/\1/p' |
               awk '{ s += $1 } END { printf "%d", s }')
  ROUND_CONNS=$(sed -n 's/^\[.*\] server conns *\([0-9]*\) .*/\1/p' "$dir/server.log" |
                sort -n | tail -n 1)
  ROUND_CONNS=${ROUND_CONNS:-0}
}
