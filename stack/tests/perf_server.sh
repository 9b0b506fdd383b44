# Sourced by the tests that run srdma_perf as separate processes.

# A port the kernel just handed out on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_listening PID LOG PORT [SECONDS]: true once the srdma_perf server PID
# has logged that it listens on PORT (default: up to 10 s); false if it
# exits first or takes longer. Empty LOG before starting the server: the
# redirection happens in the child, maybe after a read of the old contents.
wait_listening() {
  local pid=$1 log=$2 port=$3 tries=$((${4:-10} * 20)) i
  for ((i = 0; i < tries; ++i)); do
    grep -q "listening on port $port " "$log" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
