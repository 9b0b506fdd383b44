// lwIP transport: link frames as pbufs. A received frame becomes a pbuf
// without a copy or an allocation; an outgoing segment in one pbuf is lent
// to the port, else copied into a TX buffer.
#include <errno.h>

#include <cstdint>
#include <new>

#include "lwip/pbuf.h"
#include "netif/ethernet.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace softrdma::net::lwip_impl {

namespace {

// Lives in RxFrame::priv, inside the frame's own buffer: wrapping a frame as
// a pbuf allocates nothing, and freeing the pbuf gives the frame back.
struct RxPbuf {
  struct pbuf_custom pc;
  Link* link;
  void* handle;
};
static_assert(sizeof(RxPbuf) <= kFramePrivSize, "pbuf_custom must fit the frame's scratch area");

}  // namespace

// lwippools.h's size classes must hold one full segment of each MSS with
// its headroom (a PBUF_TRANSPORT pbuf), else every segment falls through to
// the next class or fails.
constexpr size_t kPbufOverhead =
    LWIP_MEM_ALIGN_SIZE(LWIP_MEM_ALIGN_SIZE(sizeof(struct pbuf)) + PBUF_TRANSPORT_HLEN +
                        PBUF_IP_HLEN + PBUF_LINK_HLEN + PBUF_LINK_ENCAPSULATION_HLEN);
static_assert(kPbufOverhead + LWIP_MEM_ALIGN_SIZE(1460) <= 1544, "lwippools.h: 1544 class");
static_assert(kPbufOverhead + LWIP_MEM_ALIGN_SIZE(8960) <= 9040, "lwippools.h: 9040 class");
static_assert(kPbufOverhead + LWIP_MEM_ALIGN_SIZE(TCP_MSS) <= 65040, "lwippools.h: 65040 class");
// init.c's checks that still apply (lwipopts.h turns them off).
static_assert(TCP_SND_QUEUELEN <= MEMP_NUM_TCP_SEG && TCP_SND_BUF >= 2 * TCP_MSS &&
              TCP_SND_QUEUELEN >= 2 * (TCP_SND_BUF / TCP_MSS) && TCP_SNDLOWAT < TCP_SND_BUF);

void Stack::input(Link* l, const RxFrame& f) {
  if (f.len < SIZEOF_ETH_HDR || f.len > 0xFFFF || f.priv == nullptr ||
      reinterpret_cast<uintptr_t>(f.priv) % alignof(RxPbuf) != 0) {
    l->port->rx_release(f.handle);
    ++ctr.rx_input_errors;
    return;
  }
  auto* r = new (f.priv) RxPbuf;
  r->pc.custom_free_function = &Stack::rx_free;
  r->link = l;
  r->handle = f.handle;
  auto len = static_cast<u16_t>(f.len);
  pbuf* p = pbuf_alloced_custom(PBUF_RAW, len, PBUF_REF, &r->pc, const_cast<uint8_t*>(f.data), len);
  ++l->held;
  ++ctr.rx_frames;
  ctr.rx_bytes += f.len;
  if (l->nif.input(p, &l->nif) != ERR_OK) {
    pbuf_free(p);
    ++ctr.rx_input_errors;
  }
}

void Stack::rx_free(pbuf* p) {
  auto* r = reinterpret_cast<RxPbuf*>(p);
  Link* l = r->link;
  void* handle = r->handle;  // r lives in the frame: read it before release
  --l->held;
  l->port->rx_release(handle);
}

err_t Stack::link_output(struct netif* nif, pbuf* p) {
  auto* l = static_cast<Link*>(nif->state);
  Stack& s = *g_stack;
  const uint32_t len = p->tot_len;
  int rc = s.lend(l, p);
  if (rc == 0) rc = s.copy_out(l, p);
  if (rc < 0) {
    // lwIP keeps a TCP segment it could not send at the head of unsent
    // (an ACK, as a flag); run_io pushes that pcb again (lwIP's timers
    // would, much later).
    ++s.ctr.tx_no_buffer;
    s.retry_later(nif->hints);
    return ERR_MEM;
  }
  l->dirty = true;
  s.links_dirty_ = true;
  ++s.ctr.tx_frames;
  s.ctr.tx_bytes += len;
  return ERR_OK;
}

// A frame in one pbuf (every TCP segment: TCP_OVERSIZE gives each its own
// MSS-sized pbuf, headers in front) is lent to ports that can take it, not
// copied. lwIP rewrites a segment's headers only when it outputs it again,
// i.e. in link_output, and never its payload. Returns tx_lend's answer.
int Stack::lend(Link* l, pbuf* p) {
  constexpr int kMaxLentRefs = 64;  // pbuf refs are a u8: stay well below
  if (p->next != nullptr || p->ref >= kMaxLentRefs) return 0;
  const auto* frame = static_cast<const uint8_t*>(p->payload);
  pbuf_ref(p);  // first: the port may call lent_done before returning
  int rc = l->port->tx_lend(frame, p->len, &Stack::lent_done, p);
  if (rc <= 0) {
    pbuf_free(p);  // drops only our reference
    return rc;
  }
  // lwIP's own reference keeps the frame readable here.
  if (l->nif.hints != nullptr) note_tcp_tx(l->nif.hints, frame, p->len);
  ++ctr.tx_lent;
  return 1;
}

// A lent frame holds its own reference on the pbuf (lwIP's, for
// retransmission, is separate) until the port is done reading it. Ports
// call this with the process lock held: from tx calls, rx_burst's flush and
// their destruction, all made under it.
void Stack::lent_done(void* /*frame*/, void* p) { pbuf_free(static_cast<pbuf*>(p)); }

int Stack::copy_out(Link* l, pbuf* p) {
  void* handle = nullptr;
  uint8_t* buf = l->port->tx_begin(p->tot_len, &handle);
  if (buf == nullptr) return -ENOBUFS;
  pbuf_copy_partial(p, buf, p->tot_len, 0);
  if (l->nif.hints != nullptr) note_tcp_tx(l->nif.hints, buf, p->tot_len);
  l->port->tx_commit(handle, p->tot_len);
  return 1;
}

}  // namespace softrdma::net::lwip_impl
