// The host path's XDP program (compiled with clang -target bpf at build
// time; DPDK's af_xdp PMD loads it through its xdp_prog= devarg).
//
// The interface stays the kernel's: only TCP segments to a port softrdma
// reserved in the kernel (softrdma_ports, filled by xdp_steer.cc) go to the
// AF_XDP socket of the queue they came in on (xsks_map: the name DPDK 22.11
// looks up and fills). Everything else -- ARP, ICMP, IP fragments, the
// kernel's own TCP (ssh, MPI's out-of-band sockets) -- passes to the kernel.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "steer_ports.bpf.h"

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);    // rx queue
  __type(value, __u32);  // AF_XDP socket
} xsks_map SEC(".maps");

// [0]: the pid of the process serving the interface (a later one finds
// the program a crashed process left attached, owner gone, and replaces it);
// [1]: frames steered to it so far.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, __u32);
} softrdma_owner SEC(".maps");

SEC("xdp")
int softrdma_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  struct iphdr* ip = (void*)(eth + 1);
  if ((void*)(ip + 1) > end || ip->protocol != IPPROTO_TCP || ip->ihl < 5) return XDP_PASS;
  if (ip->frag_off & bpf_htons(0x3fff)) return XDP_PASS;  // fragments: the kernel reassembles
  struct tcphdr* tcp = (void*)ip + ip->ihl * 4;
  if ((void*)(tcp + 1) > end) return XDP_PASS;
  __u16 port = tcp->dest;
  if (!bpf_map_lookup_elem(&softrdma_ports, &port)) return XDP_PASS;
  __u32 k = 1;
  __u32* steered = bpf_map_lookup_elem(&softrdma_owner, &k);
  if (steered) __sync_fetch_and_add(steered, 1);
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
