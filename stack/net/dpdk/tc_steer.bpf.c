// The packet path's programs (af_packet with the kernel's offloads,
// packet_link.h), compiled with clang -target bpf at build time and loaded
// by tc_steer.cc:
//  - softrdma_pick, the packet socket's filter: it receives only TCP
//    segments to a port in softrdma_ports;
//  - softrdma_keep, on the interface's tcx ingress: those segments end
//    there, after the socket took its copy; the kernel's TCP, which would
//    reset them, never sees them. Everything else is the kernel's.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "steer_ports.bpf.h"

// Whether skb is an IPv4 TCP segment (not a fragment) to a steered port.
static __always_inline int steered(struct __sk_buff* skb) {
  struct ethhdr eth;
  struct iphdr ip;
  __u16 port;
  if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) || eth.h_proto != bpf_htons(ETH_P_IP))
    return 0;
  if (bpf_skb_load_bytes(skb, sizeof(eth), &ip, sizeof(ip)) || ip.protocol != IPPROTO_TCP ||
      ip.ihl < 5 || (ip.frag_off & bpf_htons(0x3fff)))
    return 0;
  // The destination port: two octets into the TCP header.
  if (bpf_skb_load_bytes(skb, sizeof(eth) + ip.ihl * 4 + 2, &port, sizeof(port))) return 0;
  return bpf_map_lookup_elem(&softrdma_ports, &port) != 0;
}

SEC("socket")
int softrdma_pick(struct __sk_buff* skb) { return steered(skb) ? skb->len : 0; }

SEC("tc")
int softrdma_keep(struct __sk_buff* skb) { return steered(skb) ? TC_ACT_SHOT : TC_ACT_OK; }

char _license[] SEC("license") = "Dual BSD/GPL";
