// Hooks lwIP's core calls into the lwIP transport (lwip_links.cc,
// lwip_isn.cc; named in lwipopts.h via LWIP_HOOK_FILENAME). All run with the
// process lock held, inside lwIP.
#ifndef SOFTRDMA_LWIP_HOOKS_H
#define SOFTRDMA_LWIP_HOOKS_H

#include "lwip/ip4_addr.h"
#include "lwip/netif.h"

#ifdef __cplusplus
extern "C" {
#endif

// The netif for dest (src may be NULL or any): local delivery, then the
// route table, else NULL so lwIP's subnet/default rules apply.
struct netif* softrdma_lwip_route(const ip4_addr_t* src, const ip4_addr_t* dest);
// The neighbour to ARP for when dest is outside the netif's subnet.
const ip4_addr_t* softrdma_lwip_next_hop(struct netif* netif, const ip4_addr_t* dest);
// RFC 6528 initial sequence number.
u32_t softrdma_lwip_isn(const ip_addr_t* local_ip, u16_t local_port, const ip_addr_t* remote_ip,
                        u16_t remote_port);

// tcp_input's demultiplexing (tcp_in.c as patched by patch_tcp_in.cmake):
// the active pcb for a segment's four-tuple (ports in host order) or NULL
// to scan lwIP's list, and the pcb that scan found (lwip_pcb_index.cc).
struct tcp_pcb;
struct tcp_pcb* softrdma_lwip_find_active(u16_t src_port, u16_t dest_port, const ip_addr_t* src,
                                          const ip_addr_t* dest, u8_t netif_idx);
void softrdma_lwip_found_active(struct tcp_pcb* pcb);
// tcp_receive took len octets of in-order data for pcb: acknowledge them
// now or delay the ACK (lwip_acks.cc).
void softrdma_lwip_data_ack(struct tcp_pcb* pcb, u16_t len);
// The retransmission timeout an ACK sets (tcp_in.c as patched): lwIP's
// estimate, with a floor on lossless links (lwip_links.cc).
s16_t softrdma_lwip_rto(const struct tcp_pcb* pcb);

#ifdef __cplusplus
}
#endif

#endif  // SOFTRDMA_LWIP_HOOKS_H
