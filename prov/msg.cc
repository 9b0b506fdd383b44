// fi_ops_msg: Sends and receives over RDMAP Send messages (RFC 5040 §5.3).
#include <cstring>

#include "prov/prov.h"
#include "prov/sge.h"

namespace softrdma::prov {

namespace {

ssize_t do_recv(Ep* ep, const iovec* iov, void** desc, size_t count, void* ctx, uint64_t flags) {
  std::lock_guard g(ep->dom->fab->mu);
  if (!ep->qp) return -FI_EOPBADSTATE;
  RecvWr wr{};
  if (!fill_sges(wr.sg_list, &wr.num_sge, iov, desc, count)) return -FI_EINVAL;
  Op* op = new_op(ep, ctx, FI_RECV | FI_MSG, flags | ep->rx_flags, false, ep->recv_cntr);
  op->buf = count ? iov[0].iov_base : nullptr;
  op->len = iov_bytes(iov, count);
  wr.wr_id = reinterpret_cast<uint64_t>(op);
  int rc = ep->dom->fab->engine->post_recv(ep->qp, wr);
  if (rc != 0) {
    free_op(op);
    return fi_error(rc);
  }
  return 0;
}

// report: false for fi_inject, which never completes to the CQ.
ssize_t do_send(Ep* ep, const iovec* iov, void** desc, size_t count, void* ctx, uint64_t flags,
                bool report) {
  std::lock_guard g(ep->dom->fab->mu);
  if (!ep->qp) return -FI_EOPBADSTATE;
  SendWr wr{.opcode = WrOpcode::kSend};
  Op* op = new_op(ep, ctx, FI_SEND | FI_MSG, flags | ep->tx_flags, true, ep->send_cntr);
  op->len = iov_bytes(iov, count);
  if (!report) op->report = false;
  if (!(flags & FI_INJECT) ? !fill_sges(wr.sg_list, &wr.num_sge, iov, desc, count)
                           : !inject_copy(ep, op, iov, count, &wr)) {
    free_op(op);
    return -FI_EINVAL;
  }
  return post_send(ep, wr, op);
}

ssize_t msg_recv(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t, void* ctx) {
  iovec v{buf, len};
  return do_recv(from_fid<Ep>(f), &v, &desc, 1, ctx, 0);
}
ssize_t msg_recvv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t, void* ctx) {
  return do_recv(from_fid<Ep>(f), iov, desc, count, ctx, 0);
}
ssize_t msg_recvmsg(fid_ep* f, const fi_msg* m, uint64_t flags) {
  return do_recv(from_fid<Ep>(f), m->msg_iov, m->desc, m->iov_count, m->context, flags);
}
ssize_t msg_send(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t, void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return do_send(from_fid<Ep>(f), &v, &desc, 1, ctx, 0, true);
}
ssize_t msg_sendv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t, void* ctx) {
  return do_send(from_fid<Ep>(f), iov, desc, count, ctx, 0, true);
}
ssize_t msg_sendmsg(fid_ep* f, const fi_msg* m, uint64_t flags) {
  if (flags & FI_REMOTE_CQ_DATA) return -FI_EOPNOTSUPP;
  return do_send(from_fid<Ep>(f), m->msg_iov, m->desc, m->iov_count, m->context, flags, true);
}
ssize_t msg_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t) {
  iovec v{const_cast<void*>(buf), len};
  return do_send(from_fid<Ep>(f), &v, nullptr, 1, nullptr, FI_INJECT, false);
}
// Send with remote CQ data has no standard iWARP message (RFC 7306 gives
// Immediate Data as a message of its own, consuming its own receive), so
// FI_REMOTE_CQ_DATA is offered for RMA writes only (fi_writedata).
ssize_t msg_senddata(fid_ep*, const void*, size_t, void*, uint64_t, fi_addr_t, void*) {
  return -FI_EOPNOTSUPP;
}
ssize_t msg_injectdata(fid_ep*, const void*, size_t, uint64_t, fi_addr_t) {
  return -FI_EOPNOTSUPP;
}

ssize_t no_tsend(fid_ep*, const void*, size_t, void*, fi_addr_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t no_tsendv(fid_ep*, const iovec*, void**, size_t, fi_addr_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t no_tmsg(fid_ep*, const fi_msg_tagged*, uint64_t) { return -FI_ENOSYS; }
ssize_t no_trecv(fid_ep*, void*, size_t, void*, fi_addr_t, uint64_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t no_trecvv(fid_ep*, const iovec*, void**, size_t, fi_addr_t, uint64_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t no_tinject(fid_ep*, const void*, size_t, fi_addr_t, uint64_t) { return -FI_ENOSYS; }
ssize_t no_tsenddata(fid_ep*, const void*, size_t, void*, uint64_t, fi_addr_t, uint64_t, void*) {
  return -FI_ENOSYS;
}
ssize_t no_tinjectdata(fid_ep*, const void*, size_t, uint64_t, fi_addr_t, uint64_t) {
  return -FI_ENOSYS;
}

}  // namespace

fi_ops_msg g_msg_ops = {sizeof(fi_ops_msg), msg_recv, msg_recvv, msg_recvmsg, msg_send,
                        msg_sendv, msg_sendmsg, msg_inject, msg_senddata, msg_injectdata};
// FI_TAGGED is not offered (ofi_rxm layers it on top); every entry answers.
fi_ops_tagged g_tagged_ops = {sizeof(fi_ops_tagged), no_trecv, no_trecvv, no_tmsg, no_tsend,
                              no_tsendv, no_tmsg, no_tinject, no_tsenddata, no_tinjectdata};

}  // namespace softrdma::prov
