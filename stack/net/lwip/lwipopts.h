// lwIP build options for SoftRDMA's userspace TCP/IP (lwIP 2.1.3 raw API,
// one process-wide stack driven by lwip_transport.cc's poll loop).
//
// Every option that differs from lwIP's default, or that the prototype
// (shared/notes/lwip-dpdk-prototype.md) found to matter, is set here with the
// reason. Only softrdma_lwip's own translation units see this file: nothing
// outside the library includes lwIP headers, so struct layouts can never
// disagree with the compiled core.
#ifndef SOFTRDMA_LWIPOPTS_H
#define SOFTRDMA_LWIPOPTS_H

// --- Threading ---------------------------------------------------------------
// No tcpip thread and no OS layer: the lwIP transport calls the raw API under
// the process lock (stack/common/big_lock.h), so lwIP needs no locking (the Debian
// package's SYS_LIGHTWEIGHT_PROT cost 2-7% of busy time in the prototype).
#define NO_SYS 1
#define SYS_LIGHTWEIGHT_PROT 0
#define LWIP_TIMERS 1  // sys_check_timeouts(), called from every poll
#define LWIP_NETCONN 0
#define LWIP_SOCKET 0

// --- Protocols ---------------------------------------------------------------
// IPv4 TCP only (plus ARP and ICMP echo for debugging a link with ping).
// IPv6 off: smaller pcbs and addresses, and the iWARP CM uses sockaddr_in.
#define LWIP_IPV4 1
#define LWIP_IPV6 0
#define LWIP_TCP 1
#define LWIP_UDP 0
#define LWIP_RAW 0
#define LWIP_ICMP 1
#define LWIP_IGMP 0
#define LWIP_DHCP 0
#define LWIP_AUTOIP 0
#define LWIP_DNS 0
#define LWIP_ARP 1
#define LWIP_ETHERNET 1
// TCP never sends more than the path MTU and our peers do the same, so IP
// fragments never carry our traffic: skip the reassembly buffers.
#define IP_REASSEMBLY 0
#define IP_FRAG 0
#define IP_FORWARD 0
#define LWIP_ALTCP 0

// --- Memory: static pools, nothing from malloc --------------------------------
// The Debian build mallocs every TX pbuf and tcp_seg (2 mallocs per segment,
// 11% of sender CPU). Here all memory is static and bounded: memp pools for
// the fixed-size objects, and mem_malloc (PBUF_RAM payloads) served from
// size-class pools (lwippools.h) instead of lwIP's first-fit heap, whose scan
// grows with fragmentation under thousands of in-flight segments.
#define MEM_LIBC_MALLOC 0
#define MEMP_MEM_MALLOC 0
#define MEM_USE_POOLS 1
#define MEMP_USE_CUSTOM_POOLS 1
#define MEM_USE_POOLS_TRY_BIGGER_POOL 1
#define MEM_ALIGNMENT 8
#define MEM_SIZE (1024 * 1024)  // unused with MEM_USE_POOLS; sets mem_size_t to u32
// Thousands of connections: 16384 active/TIME_WAIT pcbs (about 4 MiB; lwIP
// recycles the oldest TIME_WAIT ones when this runs out), so a process can
// hold 10,000 connections with room for their TIME_WAITs, and 1024
// listeners (each native RDM endpoint listens; a listener pcb is ~40 B).
#define MEMP_NUM_TCP_PCB 16384
#define MEMP_NUM_TCP_PCB_LISTEN 1024
// One tcp_seg per queued TX segment and per out-of-order RX segment, shared
// by all connections (a connection queues at most its peer's window plus
// kLwipMaxTxSpace, ~1600 segments at MSS 1460). When these or the payload
// pools (lwippools.h) run dry, tcp_write reports ERR_MEM and the transport
// parks the rest of the send in the connection: a send never fails midway.
#define MEMP_NUM_TCP_SEG 32768
// PBUF_REF/ROM descriptors: only ICMP replies and ARP use them (RX frames
// carry their own pbuf_custom inside the frame buffer).
#define MEMP_NUM_PBUF 256
// Nothing on our path allocates PBUF_POOL (RX uses the frames themselves), so
// the pool is empty; that also skips init.c's check that it could hold TCP_WND.
#define PBUF_POOL_SIZE 0
#define MEMP_NUM_ARP_QUEUE 1024
#define MEMP_NUM_SYS_TIMEOUT (LWIP_NUM_SYS_TIMEOUT_INTERNAL + 4)
// Zero-copy RX: a received frame stays in the link's buffer, wrapped by a
// pbuf_custom that lives in the frame's private area (FrameLink RxFrame::priv).
#define LWIP_SUPPORT_CUSTOM_PBUF 1

// --- TCP segment size -----------------------------------------------------------
// TCP_MSS is the compile-time ceiling; the MSS actually used is bounded at
// run time by the outgoing netif's MTU (TCP_CALCULATE_EFF_SEND_MSS) and the
// peer's MSS option, so one build serves 1500-byte links (MSS 1460),
// 9000-byte jumbo links and the memif mesh (MSS 8960), and the packet link,
// whose kernel cuts 64 KiB segments to the wire (packet_link.h: MTU 65000,
// MSS 64960). lwIP clamps the peer's MSS to TCP_MSS.
#define TCP_MSS 64960
#define TCP_CALCULATE_EFF_SEND_MSS 1

// --- Windows and send buffer ------------------------------------------------------
// The packaged 64 KiB window caps a connection at ~0.75 * 64 KiB / RTT (3.5-8
// Gbit/s at 20-100 us); 1 MiB held 10-15 Gbit/s up to 200 us. 2 MiB leaves
// headroom for 100 Gbit/s-class links at ~100 us. The receive window is also
// the number of frame buffers one slow reader can pin (zero-copy RX), which is
// why it is not larger: size the port's mbuf pool for connections x TCP_WND.
#define LWIP_WND_SCALE 1
#define TCP_WND (2 * 1024 * 1024)
#define TCP_RCV_SCALE 6  // 0xFFFF << 6 = 4 MiB - 64 >= TCP_WND (and < 2 * TCP_WND)
// Unacknowledged plus unsent bytes per connection. The transport itself
// keeps the unsent part under kLwipMaxTxSpace (256 KiB; tcp_write walks that
// queue on every call), so in practice this bounds the peer's window plus
// 256 KiB and never binds below a 2 MiB window.
#define TCP_SND_BUF (4 * 1024 * 1024)
// Per-connection pbuf count limit for queued data. Sized for the worst run-time
// MSS we expect (536) so the byte limit, not the count, normally binds; must
// fit u16 and be <= MEMP_NUM_TCP_SEG (sanity check in init.c).
#define TCP_SND_QUEUELEN ((2 * TCP_SND_BUF) / 536)
// Only the netconn API reads TCP_SNDLOWAT/TCP_SNDQUEUELOWAT, but init.c checks
// them: the default (TCP_SND_BUF / 2) trips "#error TCP_SNDLOWAT must at least
// be 4*MSS below u16_t overflow" once TCP_SND_BUF exceeds 64 KiB.
#define TCP_SNDLOWAT (2 * TCP_MSS + 1)
// init.c's TCP checks assume a 16-bit send buffer ("TCP_SNDLOWAT must be
// 4*MSS below u16_t overflow" fails for any MSS over 16 KiB); the ones that
// still apply are static_asserts in lwip_frames.cc.
#define LWIP_DISABLE_TCP_SANITY_CHECKS 1
#define TCP_SNDQUEUELOWAT 16
// TCP_OVERSIZE = MSS: each new segment gets a pbuf of a full (run-time) MSS,
// so consecutive small tcp_write calls (FPDU header, payload, CRC) fill one
// segment by memcpy instead of chaining a pbuf per piece. Costs pool memory
// for lone small segments (a 64-byte FPDU flushed alone holds an MSS-sized
// buffer until acked); the pools in lwippools.h are sized for that.
#define TCP_OVERSIZE TCP_MSS
// Segments are built from several pbufs; linkoutput gathers the chain into
// one frame buffer (one copy either way). =1 would force COPY semantics and
// MSS-sized allocations for every write.
#define LWIP_NETIF_TX_SINGLE_PBUF 0
// Out-of-order queueing (needed for loss recovery without go-back-N on the
// receive side) and SACK blocks in our ACKs: lwIP's own sender ignores SACK,
// but a Linux peer (kernel siw, or our kernel-TCP transport) recovers several
// losses per window with it instead of waiting for RTOs.
#define TCP_QUEUE_OOSEQ 1
#define LWIP_TCP_SACK_OUT 1
#define LWIP_TCP_MAX_SACK_NUM 4
#define TCP_OOSEQ_MAX_BYTES TCP_WND
#define LWIP_TCP_TIMESTAMPS 0
#define TCP_LISTEN_BACKLOG 1  // tcp_backlog_delayed/accepted bound unaccepted conns
// Listeners set SOF_REUSEADDR so a port still held by old connections
// (TIME_WAIT, or ones it accepted) can be listened on again, as
// SO_REUSEADDR allows on Linux; the transport refuses a second listener.
#define SO_REUSE 1
#define TCP_DEFAULT_LISTEN_BACKLOG 0xff
// Ephemeral ports. lwIP 2.1.3's own range macro maps a random seed onto
// 0xc000..0xffff inclusive, but tcp_new_port() increments before it wraps:
// a seed of 0xffff (1 process in 16384) overflows the u16 to port 0, and the
// process's first connect fails with ERR_BUF. Seeds land below the end here.
#define TCP_LOCAL_PORT_RANGE_START 0xc000
#define TCP_LOCAL_PORT_RANGE_END 0xffff
#define TCP_ENSURE_LOCAL_PORT_RANGE(port) \
  ((u16_t)(TCP_LOCAL_PORT_RANGE_START +     \
           (u16_t)((port) % (TCP_LOCAL_PORT_RANGE_END - TCP_LOCAL_PORT_RANGE_START))))
#define LWIP_CALLBACK_API 1
#define LWIP_EVENT_API 0

// --- Timers -------------------------------------------------------------------------
// lwIP's TCP clock: the fast timer (delayed ACKs, refused data) runs every
// TCP_TMR_INTERVAL, the slow timer (RTO, persist, TIME_WAIT) every 2x that,
// and the RTO is counted in slow ticks with an effective floor of ~3 ticks.
// 250 ms (default) means RTOs of 1.5 s and more. Measured over the test pipe
// (lwip_transport_test, FaultInjectionBothWays): a lost lone segment is
// recovered after ~55 ms at 10 ms and ~127 ms at 25 ms; 2 x 4 MiB under 1%
// drop/dup/corrupt and 2% reordering took 0.6-1.2 s at 10 ms, 4.3 s at 25 ms.
// (A loss inside a burst is fast-retransmitted within ~0.1 ms either way.)
// The price is walking the pcb lists 100 times a second.
#define TCP_TMR_INTERVAL 10
// SYNs are retried at a fixed interval (Conn::attach sets it to 200 ms, not
// lwIP's 3 s): 12 retries give a peer 2.6 s, as 6 x 3 s did before.
#define TCP_SYNMAXRTX 12
// Keepalive on every connection (Conn::attach): an idle connection whose
// peer vanished (a killed process, a link that stays down) is found within
// KEEPIDLE + KEEPCNT x KEEPINTVL = 10 s and its QP flushed with errors,
// instead of a posted receive waiting forever. With data outstanding, the
// retransmission limit (TCP_MAXRTX, 12: 49-86 s measured by peer_fault_test)
// ends it first.
#define LWIP_TCP_KEEPALIVE 1
#define TCP_KEEPIDLE_DEFAULT 5000
#define TCP_KEEPINTVL_DEFAULT 1000
#define TCP_KEEPCNT_DEFAULT 5

// --- Checksums ------------------------------------------------------------------------
// Per-netif control: links whose frames cannot be corrupted (memif between
// SoftRDMA processes) skip generating and checking IP/TCP checksums, which
// were 33-56% of the prototype's busy CPU. Other links keep full checksums.
#define LWIP_CHECKSUM_CTRL_PER_NETIF 1
#define CHECKSUM_GEN_IP 1
#define CHECKSUM_GEN_TCP 1
#define CHECKSUM_GEN_ICMP 1
#define CHECKSUM_CHECK_IP 1
#define CHECKSUM_CHECK_TCP 1
#define CHECKSUM_CHECK_ICMP 1
// Checksum-on-copy would sum every tcp_write even when the output netif then
// skips checksums (it is decided before the route is known), so it is off:
// trusted links pay nothing, others pay one extra pass at output.
#define LWIP_CHECKSUM_ON_COPY 0
#define LWIP_CHKSUM_ALGORITHM 3  // 32-bit-at-a-time variant of the generic C sum

// --- Netifs, routing, ARP ---------------------------------------------------------------
// A process must reach its own addresses (libfabric's rxm connects to itself):
// packets to a local IP go through the owning netif's loopback queue, which
// the poll loop drains with netif_poll_all(). 127.0.0.1 works too.
#define LWIP_NETIF_LOOPBACK 1
#define LWIP_HAVE_LOOPIF 1
#define LWIP_NETIF_LOOPBACK_MULTITHREADING 0
#define LWIP_LOOPBACK_MAX_PBUFS 0
#define LWIP_SINGLE_NETIF 0
// Our own routing over several point-to-point links: a dest-IP -> link table
// consulted before lwIP's subnet match (lwip_hooks.h). The source-aware form
// of the IP4 route hook is needed because the hook must run before the
// subnet scan, which would otherwise send traffic between two local
// addresses through loopback even when the table names a link.
#define LWIP_HOOK_FILENAME "lwip_hooks.h"
#define LWIP_HOOK_IP4_ROUTE_SRC(src, dest) softrdma_lwip_route((src), (dest))
#define LWIP_HOOK_ETHARP_GET_GW(netif, dest) softrdma_lwip_next_hop((netif), (dest))
// Unpredictable initial sequence numbers (RFC 6528) instead of lwIP's counter.
#define LWIP_HOOK_TCP_ISN(lip, lport, rip, rport) softrdma_lwip_isn((lip), (lport), (rip), (rport))
// tcp_input finds a segment's pcb in a hash index (lwip_pcb_index.cc) before
// scanning the active list, which thousands of connections make long. The
// index learns of freed pcbs through the one ext arg.
#define LWIP_HOOK_TCP_FIND_ACTIVE(sport, dport, src, dest, idx) \
  softrdma_lwip_find_active((sport), (dport), (src), (dest), (idx))
#define LWIP_HOOK_TCP_FOUND_ACTIVE(pcb) softrdma_lwip_found_active(pcb)
// In-order data is acknowledged by softrdma_lwip_data_ack (lwip_acks.cc):
// one ACK per received burst instead of one per second segment.
#define LWIP_HOOK_TCP_DATA_ACK(pcb, len) softrdma_lwip_data_ack((pcb), (len))
// The RTO an ACK sets: lwIP's estimate, with a floor on lossless links.
#define LWIP_HOOK_TCP_RTO(pcb) softrdma_lwip_rto(pcb)
#define LWIP_TCP_PCB_NUM_EXT_ARGS 1
// Netif hints: lwIP remembers each pcb's ARP entry, and the transport reads
// the hint pointer in linkoutput to find the sending pcb (lwIP counts no
// retransmissions itself, the transport does).
#define LWIP_NETIF_HWADDRHINT 1
#define ARP_TABLE_SIZE 64
// The first SYN to a new neighbour waits in the ARP queue instead of being
// dropped (a 3 s SYN retransmission otherwise).
#define ARP_QUEUEING 1
#define ARP_QUEUE_LEN 64
#define ETHARP_TABLE_MATCH_NETIF 1
// Static entries: the embedded memif mesh knows each peer's MAC (derived
// from its pid) and its peers answer no ARP for addresses on other netifs.
#define ETHARP_SUPPORT_STATIC_ENTRIES 1
#define LWIP_NETIF_STATUS_CALLBACK 0
#define LWIP_NETIF_LINK_CALLBACK 0

// --- Statistics and debugging --------------------------------------------------------------
// lwip_transport keeps its own counters. lwIP's stats (global, unlocked:
// read under the process lock) are on only for IP and TCP, whose checksum and
// length errors are frames refused deep in the stack (counted in rx_errors).
#define LWIP_STATS 1
#define LINK_STATS 0
#define ETHARP_STATS 0
#define IPFRAG_STATS 0
#define ICMP_STATS 0
#define UDP_STATS 0
#define MEM_STATS 0
#define MEMP_STATS 0
#define SYS_STATS 0
#define IP_STATS 1
#define TCP_STATS 1
#define LWIP_STATS_LARGE 1  // 32-bit counters
#define LWIP_STATS_DISPLAY 0
#define LWIP_DEBUG 0
#define LWIP_PERF 0

#endif  // SOFTRDMA_LWIPOPTS_H
