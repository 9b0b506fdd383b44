// The map both of softrdma's BPF objects steer by (xdp_steer.bpf.c,
// tc_steer.bpf.c; edited by port_steer.cc): the TCP ports softrdma holds.
#pragma once

#include <linux/bpf.h>

#include <bpf/bpf_helpers.h>

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u16);  // TCP port, network byte order
  __type(value, __u8);
} softrdma_ports SEC(".maps");
