// When received data is acknowledged. lwIP acknowledges every second
// segment; between hosts a third of a bulk transfer's frames were then pure
// ACKs, each a frame's work for the switch, the kernel's path and the
// sender. Receive comes in bursts (a port's rx burst in one pass), so one
// ACK per burst is enough, as kernel TCP acknowledges a GRO-coalesced burst
// once: a segment that would have been the second is not acknowledged at
// once but marked, and Stack::ack_bursts sends one ACK at the end of the
// pass, after the owners took the data in (a reply of theirs carries it).
// A lone segment keeps its delayed ACK for the owner's next poll
// (Stack::flush_acks). At most kStretchBytes wait for the pass's end.
// Slow start counts what each ACK covers (patch_tcp_in.cmake), so fewer
// ACKs do not slow a new connection's window.
#include "lwip/priv/tcp_priv.h"
#include "stack/net/lwip/lwip_hooks.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace {

constexpr uint32_t kStretchBytes = 64 * 1024;

}  // namespace

extern "C" void softrdma_lwip_data_ack(struct tcp_pcb* pcb, u16_t len) {
  using softrdma::net::lwip_impl::Conn;
  auto* c = static_cast<Conn*>(pcb->callback_arg);
  if (!(pcb->flags & TF_ACK_DELAY)) {  // an ACK went out since the last data
    tcp_set_flags(pcb, TF_ACK_DELAY);
    if (c != nullptr) c->unacked_ = len;
    return;
  }
  // Without a connection of ours (not yet attached): lwIP's second segment.
  if (c == nullptr || (c->unacked_ += len) >= kStretchBytes) {
    tcp_clear_flags(pcb, TF_ACK_DELAY);
    tcp_ack_now(pcb);
    return;
  }
  c->ack_burst_ = true;
  softrdma::net::lwip_impl::Stack::get().want_burst_ack();
}
