// Credit-based flow control for ofi_rxm ("ofix_flow_ctrl_v1").
//
// An iWARP Send that finds no posted receive is held by the engine, but
// only within a per-connection bound (FI_SOFTRDMA_UNEXPECTED_BYTES / _MSGS,
// stack/iwarp/unexpected.h); beyond it the receiver sends a DDP Terminate
// (untagged buffer, "no buffer available", RFC 5041 7.2) and the connection
// is gone. InfiniBand has RNR retry and libfabric's tcp provider has the
// socket's backpressure; iWARP has neither, so the ULP must not send more
// than the peer posted plus that bound. ofi_rxm posts rx_size receives per
// connection and sends without counting, which under load (many messages
// in flight to a rank that is busy elsewhere) runs the peer dry.
//
// libfabric's answer is this private interface, which rxm asks every core
// provider for (fi_open_ops on the domain) and which the verbs provider
// offers for the same reason. The core counts, rxm carries the messages:
//  * the sender holds peer_credits, one per receive the peer has posted for
//    it; a Send (or Write with Immediate Data) takes one, and the last one
//    is kept back for rxm's credit message (FI_PRIORITY), so that credits
//    can always be returned;
//  * the receiver counts the receives it posts and, past rxm's threshold
//    (half the receive queue), asks rxm to send them to the peer as
//    credits (the send handler), whose rxm hands them to add_credits.
// Until rxm enables it for a connection (both ends said they can, in the
// connection's private data), nothing is counted. The structure's layout is
// libfabric's (flow_ctrl_layout.h): under a libfabric whose layout is not
// known to match, the ops are not offered and rxm sends without counting.
//
// Without these ops (another libfabric, or an FI_EP_MSG application other
// than rxm) a Send that finds no receive waits in the engine's bounded store
// until one is posted; only a peer that overruns the bound ends the
// connection with a Terminate, as RFC 5041 has it.
#include "prov/flow_ctrl_layout.h"
#include "prov/prov.h"

namespace softrdma::prov {

namespace {

bool fc_available(fid_ep*) { return true; }

// Called when rxm sees the connection up. The receives posted before (rxm
// posts them before connecting) are owed to the peer from here on, minus
// the one credit each side starts with (credits_unsent began at -1). Both
// ends may already be short: the peer's first credit message can arrive
// before this (rxm reads data before CM events), and the peer may be
// waiting for ours, so they go out now if due.
int fc_enable(fid_ep* f, uint64_t threshold) {
  auto* ep = from_fid<Ep>(f);
  std::lock_guard g(ep->dom->core().mu);
  ep->flow_ctrl = true;
  ep->peer_credits += 1;
  ep->threshold = static_cast<int64_t>(threshold);
  FI_INFO(&g_prov, FI_LOG_EP_CTRL, "flow control on (threshold %llu, %lld receives to tell)\n",
          static_cast<unsigned long long>(threshold), static_cast<long long>(ep->credits_unsent));
  grant_credits(ep);
  return 0;
}

// Credits may come before fc_enable (see there): they count all the same.
void fc_add_credits(fid_ep* f, uint64_t credits) {
  auto* ep = from_fid<Ep>(f);
  std::lock_guard g(ep->dom->core().mu);
  ep->peer_credits += credits;
  FI_DBG(&g_prov, FI_LOG_EP_DATA, "ep %p: %llu credits from the peer, now %llu\n",
         static_cast<void*>(ep), static_cast<unsigned long long>(credits),
         static_cast<unsigned long long>(ep->peer_credits));
}

void fc_set_send_handler(fid_domain* d, ssize_t (*handler)(fid_ep*, uint64_t)) {
  from_fid<Domain>(d)->send_credits = handler;
}

FlowCtrlOps g_flow_ctrl_ops = {sizeof(FlowCtrlOps), fc_available, fc_enable, fc_add_credits,
                               fc_set_send_handler};

}  // namespace

const char* const kFlowCtrlOpsName = "ofix_flow_ctrl_v1";

namespace {

// By the libfabric that loaded us (not the headers we were built with).
bool rxm_layout_matches() {
  const uint32_t v = fi_version();
  if (flow_ctrl_layout_known(v)) return true;
  FI_WARN(&g_prov, FI_LOG_DOMAIN,
          "ofi_rxm flow control not offered: libfabric %u.%u's %s layout is not known to match "
          "ours (checked: 1.17); rxm sends without credits, a peer out of receives ends the "
          "connection\n",
          FI_MAJOR(v), FI_MINOR(v), kFlowCtrlOpsName);
  return false;
}

}  // namespace

// Null when not offered (decided, and warned about, once).
void* flow_ctrl_ops() {
  static const bool offered = rxm_layout_matches();
  return offered ? &g_flow_ctrl_ops : nullptr;
}

bool consumes_recv(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithInv || op == WrOpcode::kWriteWithImm ||
         op == WrOpcode::kImmData;
}

bool take_credit(Ep* ep, bool priority) {
  if (!ep->flow_ctrl) return true;
  if (ep->peer_credits == 0) return false;
  if (ep->peer_credits == 1 && !priority) return false;  // kept for the credit message
  --ep->peer_credits;
  return true;
}

void return_credit(Ep* ep) {
  if (ep->flow_ctrl) ++ep->peer_credits;
}

// Caller holds the core's lock (recursive: rxm's handler posts the credit
// message on this endpoint right away, or queues it and retries later).
void grant_credits(Ep* ep) {
  if (ep->credits_unsent < ep->threshold || !ep->dom->send_credits) return;
  const auto n = static_cast<uint64_t>(ep->credits_unsent);
  ep->credits_unsent = 0;
  ssize_t rc = ep->dom->send_credits(&ep->fid, n);
  FI_DBG(&g_prov, FI_LOG_EP_DATA, "ep %p: %llu credits to the peer: %zd\n",
         static_cast<void*>(ep), static_cast<unsigned long long>(n), rc);
  if (rc != 0) ep->credits_unsent += static_cast<int64_t>(n);
}

void recv_posted(Ep* ep) {
  ++ep->credits_unsent;
  grant_credits(ep);
}

}  // namespace softrdma::prov
