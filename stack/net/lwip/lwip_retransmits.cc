// lwIP transport: counting TCP retransmissions from the segments it sends.
#include <cstddef>
#include <cstdint>

#include "lwip/ip.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "netif/ethernet.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace softrdma::net::lwip_impl {
namespace {

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

}  // namespace

Conn* Stack::conn_of(struct netif_hint* hint) {
  if (hint == nullptr) return nullptr;
  const auto* pcb = reinterpret_cast<const tcp_pcb*>(reinterpret_cast<const char*>(hint) -
                                                     offsetof(struct tcp_pcb, netif_hints));
  // A listener's RST, or a SYN-ACK from a pcb that still carries its
  // listener's arg until lwIP calls accept: not a Conn.
  if (pcb->state == LISTEN || pcb->state == SYN_RCVD) return nullptr;
  return static_cast<Conn*>(pcb->callback_arg);
}

// lwIP counts no retransmissions (its RTO path has no statistic at all), so
// count them here: while a pcb outputs a segment, lwIP points the netif's
// hint at the pcb's own netif_hints, which finds the pcb and so our Conn.
// A data segment that starts below the highest sequence already sent is a
// retransmission.
void Stack::note_tcp_tx(struct netif_hint* hint, const uint8_t* frame, uint32_t len) {
  if (len < SIZEOF_ETH_HDR + IP_HLEN + TCP_HLEN || be16(frame + 12) != ETHTYPE_IP) return;
  const uint8_t* ip = frame + SIZEOF_ETH_HDR;
  size_t ihl = static_cast<size_t>(ip[0] & 0x0F) * 4;
  if (ip[9] != IP_PROTO_TCP || SIZEOF_ETH_HDR + ihl + TCP_HLEN > len) return;
  const uint8_t* th = ip + ihl;
  size_t doff = static_cast<size_t>(th[12] >> 4) * 4;
  size_t tot = be16(ip + 2);
  if (tot < ihl + doff) return;
  uint32_t seg = static_cast<uint32_t>(tot - ihl - doff) + ((th[13] & (TCP_SYN | TCP_FIN)) ? 1 : 0);
  if (seg == 0) return;  // pure ACK or RST: no sequence space
  Conn* c = conn_of(hint);
  if (c == nullptr) return;
  uint32_t seq = be32(th + 4);
  uint32_t end = seq + seg;
  if (!c->snd_max_valid_) {
    c->snd_max_valid_ = true;
    c->snd_max_ = end;
    return;
  }
  if (TCP_SEQ_LT(seq, c->snd_max_)) {
    ++ctr.tcp_retransmits;
    ctr.tcp_retransmit_bytes += (TCP_SEQ_LT(end, c->snd_max_) ? end : c->snd_max_) - seq;
  }
  if (TCP_SEQ_GT(end, c->snd_max_)) c->snd_max_ = end;
}

}  // namespace softrdma::net::lwip_impl
