# Sourced by hosts_test.sh when softrdma-switch serves the hosts (ranks as
# nobody): several ranks per host at once, another local user at the
# switch's control socket, a rank killed (both switches back to what they
# held before), the switch killed and restarted (a server from before the
# kill answers again). Needs $soak (srdma_soak).
# shellcheck shell=bash

pid_on() {  # host, program: the pid of that program on the host, if any
  ip netns pids "${hosts[$1]}" | xargs -r ps -o pid=,comm= -p | awk -v c="$2" '$2 == c { print $1; exit }'
}
attached() { grep -c " attached$" "$tmp/switch$1.log"; }
# ends_within <seconds> <pid>...: each exits non-zero (an error, not
# success and not a hang) within the time; fails otherwise.
ends_with_error_within() {
  local secs=$1 p rc; shift
  for p in "$@"; do
    for _ in $(seq $((secs * 10))); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && fail "a rank still runs ${secs} s after its peer or switch went"
    wait "$p"; rc=$?
    ((rc != 0)) || fail "a rank whose peer or switch went reported success"
  done
}
# A long 8 B exchange from B to A as nobody: sets srv_pid and cli_pid (the
# timeout wrappers) once both are exchanging.
long_pair() {
  local name=$1
  as_user 0 timeout 120 fi_pingpong -p softrdma -e msg -S 8 -I 100000000 -B 47700 \
    >"$tmp/$name.srv" 2>&1 &
  srv_pid=$!
  for _ in $(seq 50); do
    ip netns exec "${hosts[0]}" ss -Hltn 'sport = :47700' | grep -q . && break
    sleep 0.1
  done
  as_user 1 timeout 120 fi_pingpong -p softrdma -e msg -S 8 -I 100000000 -P 47700 "${addr[0]}" \
    >"$tmp/$name.cli" 2>&1 &
  cli_pid=$!
  sleep 3
  kill -0 "$srv_pid" && kill -0 "$cli_pid" ||
    { cat "$tmp/$name.srv" "$tmp/$name.cli"; fail "$name: the pair did not start"; }
}

# --- idle: the switch sleeps ------------------------------------------------------
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
sp=$(switch_pid 0)
t0=$(cpu_ticks "$sp"); sleep 3; t1=$(cpu_ticks "$sp")
echo "idle switch: $((t1 - t0)) CPU ticks in 3 s ($(getconf CLK_TCK) a second)"
((t1 - t0 <= 6)) || fail "the idle switch burns CPU: $((t1 - t0)) ticks in 3 s"

# --- ranks at once: four pairs, each with its own control port ---------------
before=$(attached 0)
srvs=() clis=()
for k in 0 1 2 3; do
  as_user 0 timeout 240 fi_pingpong -p softrdma -e msg -S 65536 -I "$big" -c -B $((47600 + k)) \
    >"$tmp/par$k.srv" 2>&1 &
  srvs+=($!)
done
for k in 0 1 2 3; do
  for _ in $(seq 50); do
    ip netns exec "${hosts[0]}" ss -Hltn "sport = :$((47600 + k))" | grep -q . && break
    sleep 0.1
  done
done
for k in 0 1 2 3; do
  as_user 1 timeout 240 fi_pingpong -p softrdma -e msg -S 65536 -I "$big" -c -P $((47600 + k)) \
    "${addr[0]}" >"$tmp/par$k.cli" 2>&1 &
  clis+=($!)
done
for k in 0 1 2 3; do
  wait "${srvs[$k]}" && wait "${clis[$k]}" ||
    { cat "$tmp/par$k.srv" "$tmp/par$k.cli" "$tmp/switch0.log"; fail "pair $k of four at once failed"; }
done
echo "four pairs at once: passed; host A's switch attached $(($(attached 0) - before)) ranks"
grep -q "(uid 65534) attached" "$tmp/switch0.log" && ! grep -q "(uid 0) attached" "$tmp/switch0.log" ||
  { cat "$tmp/switch0.log"; fail "ranks were not the ordinary user's"; }
(($(attached 0) - before >= 4)) || fail "host A's switch saw fewer than four ranks"

# --- another local user at the control socket ----------------------------------
as_user 0 /usr/bin/python3 -c '
import socket, struct, sys
for msg in (b"garbage", struct.pack("<IIIiH", 0x53525357, 2, 3, 0, 80) + bytes(30)):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1]); s.send(msg); s.settimeout(2)
    try:
        print("switch answered", len(s.recv(256)), "octets")  # 0: it hung up
    except OSError as e:
        print("switch:", e)
' "/run/softrdma-switch/$iface.ctl" >"$tmp/stranger.log" 2>&1 || { cat "$tmp/stranger.log"; fail "probe"; }
cat "$tmp/stranger.log"
grep -q "malformed request; dropped" "$tmp/switch0.log" && grep -q "out of turn; dropped" "$tmp/switch0.log" ||
  { cat "$tmp/switch0.log"; fail "the switch did not refuse a stranger's requests"; }
# A user who attaches properly: a privileged port is refused, any port is
# given (and let go when the user leaves).
as_user 0 /usr/bin/python3 -c '
import array, socket, struct, sys
MSG = "<IIIiH6sIIIIII"  # switch_proto.h: Msg
def msg(op, port=0): return struct.pack(MSG, 0x53525357, 2, op, 0, port, bytes(6), 0, 0, 0, 0, 0, 0)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1]); s.settimeout(5)
s.send(msg(1))
data, anc, _, _ = s.recvmsg(64, socket.CMSG_SPACE(3 * 4))
fds = array.array("i")
for level, kind, d in anc:
    fds.frombytes(d[: len(d) - len(d) % 4])
assert struct.unpack(MSG, data)[2] == 2 and len(fds) == 3, "no welcome with three descriptors"
for port in (80, 0):
    s.send(msg(3, port))
    r = struct.unpack(MSG, s.recv(64))
    print("hold", port, "->", "rc", r[3], "port", r[4])
' "/run/softrdma-switch/$iface.ctl" >"$tmp/holder.log" 2>&1 || { cat "$tmp/holder.log"; fail "holder probe"; }
cat "$tmp/holder.log"
grep -q "^hold 80 -> rc -13 " "$tmp/holder.log" || fail "the switch gave nobody a privileged port"
grep -Eq "^hold 0 -> rc 0 port [1-9]" "$tmp/holder.log" || fail "the switch gave no port"
[[ -n $(switch_pid 0) ]] || fail "the switch died of a stranger's request"

# --- a rank SIGKILLed mid-run ---------------------------------------------------
# What a switch holds for its ranks: descriptors (control connections,
# kicks, port reservations) and mapped rings.
switch_holds() {
  local p
  p=$(switch_pid "$1")
  echo "fds $(find "/proc/$p/fd" -mindepth 1 | wc -l) rings $(grep -c softrdma-switch-rings "/proc/$p/maps")"
}
base0=$(switch_holds 0) base1=$(switch_holds 1)
long_pair killrank
during1=$(switch_holds 1)
[[ $during1 != "$base1" ]] || fail "B's switch holds nothing for a running rank ($during1)"
kill -KILL "$(pid_on 1 fi_pingpong)"
ends_with_error_within 60 "$srv_pid"
wait "$cli_pid"
grep -q "ports let go" "$tmp/switch1.log" || fail "B's switch kept a dead rank's ports"
echo "rank SIGKILLed: its peer ended with an error: $(tail -1 "$tmp/killrank.srv")"
for _ in $(seq 50); do
  [[ $(switch_holds 0) == "$base0" && $(switch_holds 1) == "$base1" ]] && break
  sleep 0.1
done
echo "switches after the pair: A $(switch_holds 0), B $(switch_holds 1) (before: A $base0, B $base1; B during: $during1)"
[[ $(switch_holds 0) == "$base0" && $(switch_holds 1) == "$base1" ]] ||
  fail "a switch did not give back what it held for the gone ranks"

# --- the switch SIGKILLed mid-run, then restarted -------------------------------
# A server that outlives its switch (srdma_soak surviving lost clients, on
# B as nobody) must answer again once the switch is back: a client of A
# before the kill and one after the restart, every byte checked. Its port
# is below the ephemeral range, where no earlier connection of the host
# can hold it.
lasting_port=29720
lasting_client() {
  as_user 0 timeout 90 "$soak" -p "$lasting_port" -n 2 -q 2 -s 64K -d 2 --no-bye "${addr[1]}" \
    >"$tmp/$1.log" 2>&1 || { cat "$tmp/$1.log" "$tmp/lasting.srv"; fail "$1: a client of B's lasting server failed"; }
}
as_user 1 timeout 600 "$soak" --server -p "$lasting_port" --serve-until-idle 300 >"$tmp/lasting.srv" 2>&1 &
lasting=$!
for _ in $(seq 50); do
  ip netns exec "${hosts[1]}" ss -Hltn "sport = :$lasting_port" | grep -q . && break
  sleep 0.1
done
lasting_client lasting-before
long_pair killswitch
stop_switch 1 KILL
ends_with_error_within 60 "$srv_pid" "$cli_pid"
echo "switch SIGKILLed: both ranks ended with errors: $(tail -1 "$tmp/killswitch.cli") / $(tail -1 "$tmp/killswitch.srv")"
kill -0 "$lasting" || { cat "$tmp/lasting.srv"; fail "B's lasting server died with its switch"; }
start_switch 1
pingpong msg8-restarted softrdma msg 8 "$iters" 0 1
echo "switch restarted: new ranks work"
t0=$SECONDS
lasting_client lasting-after
kill -0 "$lasting" || { cat "$tmp/lasting.srv"; fail "B's lasting server did not survive"; }
kill "$lasting"
echo "switch restarted: B's server from before the kill answered again ($((SECONDS - t0)) s): $(grep '^SUMMARY' "$tmp/lasting-after.log" | cut -c1-80)"
