# Two hosts for the DPDK-path tests: network namespaces joined by a veth
# pair, the ends up, loopback up, no IPv6 and no IPv4 address, so the kernel
# stays silent on the veth and drops the iWARP frames it sees as addressed
# to someone else (lwIP on an af_packet port answers for the address).
#
# usage (sourced; needs a fail function): netns_pair_up NS_A NS_B IF_A IF_B
netns_pair_up() {
  local ns_a=$1 ns_b=$2 if_a=$3 if_b=$4 ns
  ip netns add "$ns_a" || fail "ip netns add $ns_a"
  ip netns add "$ns_b" || fail "ip netns add $ns_b"
  ip link add "$if_a" netns "$ns_a" type veth peer name "$if_b" netns "$ns_b" ||
    fail "cannot create the veth pair"
  for ns in "$ns_a" "$ns_b"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
      net.ipv6.conf.default.disable_ipv6=1 || fail "sysctl in $ns"
    ip -n "$ns" link set lo up || fail "lo up in $ns"
  done
  ip -n "$ns_a" link set "$if_a" up || fail "$if_a up"
  ip -n "$ns_b" link set "$if_b" up || fail "$if_b up"
}
