// The af_xdp ports' mbuf pool, which DPDK 22.11's af_xdp PMD registers as
// the AF_XDP socket's UMEM: mbufs x object size from the pool's first
// object. Without hugepages (4 KiB pages) the mempool starts an object
// that would cross a page on the next page, so objects of ~2.4 KB lay 4 KiB
// apart and the UMEM ended at ~60% of the pool: the kernel refused every
// frame from an mbuf beyond it (tx_invalid_descs), and the TCP segment in it
// never left, however often lwIP sent it again (the "1 MiB Writes end in a
// reset" of af_xdp). Objects of exactly 2 or 4 KiB, without the mempool's
// channel-spreading pad, tile the pages instead.
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <string>

#include "stack/net/dpdk/port_impl.h"

namespace softrdma::net::dpdk_port {

// The kernel copies a received frame XDP_PACKET_HEADROOM into the buffer,
// past the headroom DPDK declares (its own plus the mbuf's).
constexpr uint32_t kKernelHeadroom = 256;

rte_mempool* create_xdp_pool(const char* name, uint32_t mbufs, uint32_t cache, uint32_t room,
                             std::string* why) {
  constexpr uint32_t kFlags = RTE_MEMPOOL_F_NO_SPREAD;
  const uint32_t fixed = sizeof(rte_mbuf) + kFramePrivSize;
  const uint32_t least = RTE_PKTMBUF_HEADROOM + kKernelHeadroom + room;
  uint32_t largest = 0;  // the longest frame an object holds
  for (uint32_t object : {2048u, 4096u}) {
    // The largest buffer whose object (header, mbuf, private area, buffer)
    // is exactly `object` octets.
    uint32_t buf = object - fixed;
    while (buf > least && rte_mempool_calc_obj_size(fixed + buf, kFlags, nullptr) > object)
      buf -= RTE_CACHE_LINE_SIZE;
    if (rte_mempool_calc_obj_size(fixed + buf, kFlags, nullptr) != object) continue;
    if (buf > RTE_PKTMBUF_HEADROOM + kKernelHeadroom)
      largest = buf - RTE_PKTMBUF_HEADROOM - kKernelHeadroom;
    if (buf < least) continue;
    rte_mempool* mp = rte_mempool_create_empty(name, mbufs, fixed + buf, cache,
                                               sizeof(rte_pktmbuf_pool_private), SOCKET_ID_ANY,
                                               kFlags);
    if (mp == nullptr) break;
    rte_pktmbuf_pool_private priv{};
    priv.mbuf_data_room_size = static_cast<uint16_t>(buf);
    priv.mbuf_priv_size = kFramePrivSize;
    if (rte_mempool_set_ops_byname(mp, "ring_mp_mc", nullptr) != 0) {
      rte_mempool_free(mp);
      break;
    }
    rte_pktmbuf_pool_init(mp, &priv);
    if (rte_mempool_populate_default(mp) < 0) {
      rte_mempool_free(mp);
      break;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
    return mp;
  }
  if (largest > kEthHeader + kVlanTag && room > largest) {  // no multi-buffer AF_XDP frames here
    *why = "af_xdp: the interface's MTU gives " + std::to_string(room) + " B frames; a 4 KiB " +
           "AF_XDP frame holds at most " + std::to_string(largest) + " B (an MTU of at most " +
           std::to_string(largest - kEthHeader - kVlanTag) + ")";
    return nullptr;
  }
  *why = "af_xdp mbuf pool (" + std::to_string(mbufs) + " objects of 2 or 4 KiB for " +
         std::to_string(room) + " B frames): " + rte_strerror(rte_errno);
  return nullptr;
}

}  // namespace softrdma::net::dpdk_port
