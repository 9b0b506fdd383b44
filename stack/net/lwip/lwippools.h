// Size classes for mem_malloc (MEM_USE_POOLS): every PBUF_RAM pbuf lwIP
// allocates (TX segments, ACKs, ARP, loopback copies) comes from the smallest
// class that fits, in O(1) and without fragmentation. Sizes are usable bytes
// (lwIP adds its own pool-index header):
//   256   ACK/RST/SYN headers with options, ARP, small ICMP
//   1544  one MSS-1460 segment with all headers (24 struct pbuf + 56 headroom
//         + 1464), or a loopback copy of a 1500-byte IP packet (40 + 1500)
//   9040  one MSS-8960 segment (80 + 8960), or a loopback copy of a
//         9000-byte packet (lwIP's own 127.0.0.1 netif gets MTU 9000)
//   65040 one MSS-64960 segment of the packet link (80 + 64960); the
//         pool's untouched pages cost nothing, and a connection's 2 MiB
//         window takes 32 of them
// lwip_frames.cc static_asserts these against lwIP's real layout.
// The counts bound the bytes in flight over all connections (about 18 MiB at
// MSS 1460, 18 MiB at MSS 8960); when a class runs dry the next bigger one
// is tried, then tcp_write reports ERR_MEM and the transport parks the bytes.
// memp_init links every element, so the pages are touched at start-up
// (~28 MiB resident).
LWIP_MALLOC_MEMPOOL_START
LWIP_MALLOC_MEMPOOL(4096, 256)
LWIP_MALLOC_MEMPOOL(12288, 1544)
LWIP_MALLOC_MEMPOOL(2048, 9040)
LWIP_MALLOC_MEMPOOL(256, 65040)
LWIP_MALLOC_MEMPOOL_END
