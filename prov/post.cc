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
  Op* op = ep->dom->core().ops.get();
  op->ep = ep;
  op->context = context;
  op->flags = flags;
  op->report = !selective || (op_flags & FI_COMPLETION);
  op->delivery = tx && (op_flags & FI_DELIVERY_COMPLETE);
  op->cntr = cntr;
  return op;
}

void free_op(Op* op) { op->pool->put(op); }

namespace {
constexpr size_t kChunk = 256;
}

Op* OpPool::get() {
  if (free_.empty()) {
    Op* chunk = new Op[kChunk];
    chunks_.push_back(chunk);
    for (size_t i = kChunk; i-- > 0;) {
      chunk[i].pool = this;
      free_.push_back(&chunk[i]);
    }
  }
  Op* op = free_.back();
  free_.pop_back();
  return op;
}

void OpPool::put(Op* op) {
  std::vector<uint8_t> keep = std::move(op->inject);
  keep.clear();
  *op = Op{};
  op->pool = this;
  op->inject = std::move(keep);
  free_.push_back(op);
}

OpPool::~OpPool() {
  for (Op* c : chunks_) delete[] c;
}

// FI_DELIVERY_COMPLETE for Sends and Writes: iWARP completes them when sent,
// not when placed, and a peer that refuses a Write says so with a
// Terminate that fails whatever is outstanding next. So a zero-length RDMA
// Read follows them (FI_ORDER_RAW/RAS: its response comes after the data is
// placed) and the operation completes with the Read, carrying the first
// error of the two. The data request's wr_id is the Op's address + 1.
namespace {

bool needs_fence(const Op* op, WrOpcode opcode) {
  return op->delivery && (opcode == WrOpcode::kSend || opcode == WrOpcode::kWrite ||
                          opcode == WrOpcode::kWriteWithImm);
}

}  // namespace

ssize_t post_send(Ep* ep, Qp* qp, SendWr& wr, Op* op, bool priority) {
  Engine& eng = *ep->dom->core().engine;
  const bool fence = needs_fence(op, wr.opcode);
  const bool credit = consumes_recv(wr.opcode);
  if (credit && !take_credit(ep, priority)) {
    free_op(op);
    // Both ends may be waiting for credits: ours go out now if they are due.
    grant_credits(ep);
    return -FI_EAGAIN;
  }
  wr.wr_id = reinterpret_cast<uint64_t>(op) | (fence ? 1 : 0);
  wr.flags |= kWrSignaled;  // the provider decides what to report
  if (int rc = eng.post_send(qp, wr); rc != 0) {
    if (credit) return_credit(ep);
    free_op(op);
    return fi_error(rc);
  }
  if (!fence) return 0;
  SendWr rd{.wr_id = reinterpret_cast<uint64_t>(op), .opcode = WrOpcode::kRead};
  if (eng.post_send(qp, rd) == 0) {
    op->pending = 2;
  } else {
    // No room for the Read (the data request is out already): the
    // operation completes when sent, as without the flag.
    FI_INFO(&g_prov, FI_LOG_EP_DATA, "no room for a delivery fence; completing on send\n");
  }
  return 0;
}

Op* op_done(Wc* wc) {
  Op* op = reinterpret_cast<Op*>(wc->wr_id & ~uint64_t{1});
  if (wc->status != WcStatus::kSuccess && op->first_error.status == WcStatus::kSuccess)
    op->first_error = *wc;
  if (--op->pending > 0) return nullptr;
  if (op->first_error.status != WcStatus::kSuccess) *wc = op->first_error;
  wc->wr_id = reinterpret_cast<uint64_t>(op);
  return op;
}

}  // namespace softrdma::prov
