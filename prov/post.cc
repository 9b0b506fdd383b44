// Posting plumbing shared by messages, RMA and atomics: operation records,
// SGEs from iovecs and MR descriptors, inject copies, completion rules.
#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

// Success completions are reported unless the CQ was bound with
// FI_SELECTIVE_COMPLETION and the operation did not ask for one; errors
// always are. fi_inject never reports (fi_msg(3)).
Op* new_op(Ep* ep, void* context, uint64_t flags, uint64_t op_flags, bool tx, Cntr* cntr) {
  const bool selective = tx ? ep->tx_selective : ep->rx_selective;
  auto* op = new Op{};
  op->ep = ep;
  op->context = context;
  op->flags = flags;
  op->report = !selective || (op_flags & FI_COMPLETION);
  op->cntr = cntr;
  return op;
}

void free_op(Op* op) { delete op; }

ssize_t post_send(Ep* ep, SendWr& wr, Op* op) {
  wr.wr_id = reinterpret_cast<uint64_t>(op);
  wr.flags |= kWrSignaled;  // the provider decides what to report
  int rc = ep->dom->fab->engine->post_send(ep->qp, wr);
  if (rc != 0) {
    free_op(op);
    return fi_error(rc);
  }
  return 0;
}

}  // namespace softrdma::prov
