# MPI jobs across namespace hosts, for scripts that source this file
# (hosts_mpi_test.sh, bench/hosts_mpi_bench.sh): two hosts of
# fi-tests/hosts_lib.sh with softrdma-switch running on each (the
# administrator's one step), a head node (the bridge's address in the root
# namespace) where mpirun runs with one hostfile (4 slots per host), and
# daemons started through an rsh agent (netns_rsh.sh) as the user nobody.
# Needs $prov and $switch (absolute) and fail(); sets hostfile, agent and
# mpirun_hosts.
# shellcheck shell=bash
hosts_mpi_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
agent=$hosts_mpi_here/netns_rsh.sh
command -v mpirun >/dev/null || fail "mpirun not installed"
mark=0 nhosts=2
# shellcheck source=fi-tests/hosts_lib.sh
source "$hosts_mpi_here/../fi-tests/hosts_lib.sh"

ip addr add "$net.254/24" dev "$br" || fail "head node address"
hostfile=$tmp/hostfile
for ((i = 0; i < nhosts; ++i)); do
  start_switch "$i"
  mkdir -p "$tmp/runs" && ln -s "$tmp/run$i" "$tmp/runs/${hosts[$i]}"
  echo "${hosts[$i]} slots=4" >>"$hostfile"
done
chmod 755 "$tmp"  # nobody's daemons read nothing here, but traverse to nothing either

# mpirun_hosts <seconds> <mpirun options and program...>: mpirun from the
# head node over the hosts, Open MPI's traffic on the hosts' network,
# nothing of softrdma's set but the provider's path. The hosts share one
# machine's cores, as an oversubscribed node does: ranks are not bound (each
# host's first rank on core 0 would put two busy-polling ranks on one core,
# taking turns a scheduler tick, 4 ms, apart) and yield when idle.
mpirun_hosts() {
  local secs=$1
  shift
  NETNS_RSH_RUNS=$tmp/runs timeout -k 10 "$secs" mpirun --allow-run-as-root \
    --hostfile "$hostfile" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 --mca routed direct \
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" \
    -x FI_PROVIDER_PATH="$prov" "$@"
}
