#!/bin/sh
# An rsh agent for Open MPI that "logs in" to a host simulated as a network
# namespace (netns_test.sh): mpirun --mca plm_rsh_agent <this> runs
#   netns_rsh.sh [rsh/ssh options] HOST COMMAND...
# and COMMAND (the orted line, meant for a remote shell) runs in namespace
# HOST, in a UTS namespace of its own whose hostname is HOST (so the daemon
# and its ranks see the host name mpirun knows them by, and their session
# directories in /tmp do not collide with mpirun's).
#
# Per-host settings: if $NETNS_RSH_CONF/HOST.env exists it is sourced with
# every variable exported before COMMAND runs, so the orted and through it
# the ranks get that host's FI_SOFTRDMA_* (as a login shell's profile
# would on a real machine).
# As a user: with NETNS_RSH_RUNS set, the host's /run is
# $NETNS_RSH_RUNS/HOST (its files: softrdma-switch's socket) and COMMAND
# runs as NETNS_RSH_USER (a uid; default 65534, nobody) with its runtime
# directory, as a login as that user would.
if [ "${1:-}" = "--inside" ]; then  # our second half, inside the namespaces
  host=$2 profile=$3
  shift 3
  hostname "$host" || exit 255
  if [ -n "${NETNS_RSH_RUNS:-}" ]; then
    mount --bind "$NETNS_RSH_RUNS/$host" /run || exit 255
    uid=${NETNS_RSH_USER:-65534}
    exec setpriv --reuid="$uid" --regid="$uid" --clear-groups \
      env HOME=/tmp XDG_RUNTIME_DIR="/run/user/$uid" /bin/sh -c "$profile $*"
  fi
  exec /bin/sh -c "$profile $*"
fi
while [ $# -gt 0 ]; do
  case $1 in
    -x|-n|-q|-T|-t|-tt) shift ;;  # ssh/rsh flags Open MPI may add
    -l|-p|-o) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=${1:?usage: netns_rsh.sh HOST COMMAND...}
shift
[ $# -gt 0 ] || { echo "netns_rsh.sh: no command for $host" >&2; exit 2; }
ip netns list | awk '{print $1}' | grep -qx -- "$host" ||
  { echo "netns_rsh.sh: no network namespace $host" >&2; exit 255; }
profile=
if [ -n "${NETNS_RSH_CONF:-}" ] && [ -f "$NETNS_RSH_CONF/$host.env" ]; then
  profile="set -a; . '$NETNS_RSH_CONF/$host.env'; set +a;"
fi
# As ssh does: the words of COMMAND joined by spaces, read by a shell.
exec ip netns exec "$host" unshare --uts --mount "$0" --inside "$host" "$profile" "$@"
