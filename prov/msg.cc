// fi_ops_msg: Sends and receives over RDMAP Send messages (RFC 5040 §5.3).
//
// Remote CQ data with a Send (fi_senddata): RDMAP has no Send with
// Immediate, and RFC 7306 Immediate Data is a message of its own that would
// consume a second receive. So the 8 bytes travel as a trailer after the
// payload, in the same Send, marked by the Solicited Event bit (which
// libfabric has no other use for). Every receive is posted with an 8-byte
// slot after the caller's buffers: a trailer lands right after the payload
// (in the caller's buffer if it has room, else in the slot), and the
// completion takes it out. Sends without data are unchanged on the wire.
#include <cstring>

#include "prov/prov.h"
#include "prov/sge.h"

namespace softrdma::prov {

namespace {

constexpr size_t kTrailer = sizeof(uint64_t);

ssize_t do_recv(Ep* ep, const iovec* iov, void** desc, size_t count, void* ctx, uint64_t flags) {
  std::lock_guard g(ep->dom->core().mu);
  if (!ep->qp) return -FI_EOPBADSTATE;
  RecvWr wr{};
  if (!fill_sges(wr.sg_list, &wr.num_sge, iov, desc, count)) return -FI_EINVAL;
  Op* op = new_op(ep, ctx, FI_RECV | FI_MSG, flags | ep->rx_flags, false, ep->recv_cntr);
  op->buf = count ? iov[0].iov_base : nullptr;
  op->len = iov_bytes(iov, count);
  std::copy(iov, iov + count, op->iov);
  op->iov_count = count;
  wr.sg_list[wr.num_sge++] = Sge{reinterpret_cast<uint64_t>(&op->trailer), kTrailer, 0};
  wr.wr_id = reinterpret_cast<uint64_t>(op);
  int rc = ep->dom->core().engine->post_recv(ep->qp, wr);
  if (rc != 0) {
    free_op(op);
    return fi_error(rc);
  }
  recv_posted(ep);
  return 0;
}

// report: false for fi_inject, which never completes to the CQ. data: the
// remote CQ data to append, or null.
ssize_t do_send(Ep* ep, const iovec* iov, void** desc, size_t count, void* ctx, uint64_t flags,
                bool report, const uint64_t* data) {
  std::lock_guard g(ep->dom->core().mu);
  if (!ep->qp) return -FI_EOPBADSTATE;
  if (data && !ep->info->domain_attr->cq_data_size) return -FI_EINVAL;  // not offered
  SendWr wr{.opcode = WrOpcode::kSend};
  Op* op = new_op(ep, ctx, FI_SEND | FI_MSG, flags | ep->tx_flags, true, ep->send_cntr);
  op->len = iov_bytes(iov, count);
  if (!report) op->report = false;
  if (!(flags & FI_INJECT) ? !fill_sges(wr.sg_list, &wr.num_sge, iov, desc, count)
                           : !inject_copy(ep, op, iov, count, &wr)) {
    free_op(op);
    return -FI_EINVAL;
  }
  if (data) {
    op->trailer = *data;
    wr.sg_list[wr.num_sge++] = Sge{reinterpret_cast<uint64_t>(&op->trailer), kTrailer, 0};
    wr.flags |= kWrSolicited;
  }
  return post_send(ep, ep->qp, wr, op, flags & FI_PRIORITY);
}

// The trailer's 8 bytes at offset off of the receive's buffers + slot.
uint64_t read_trailer(const Op* op, size_t off) {
  uint8_t out[kTrailer];
  size_t got = 0;
  for (size_t i = 0; i < op->iov_count && got < kTrailer; ++i) {
    const size_t len = op->iov[i].iov_len;
    if (off >= len) {
      off -= len;
      continue;
    }
    const size_t n = std::min(len - off, kTrailer - got);
    std::memcpy(out + got, static_cast<const uint8_t*>(op->iov[i].iov_base) + off, n);
    got += n;
    off = 0;
  }
  std::memcpy(out + got, reinterpret_cast<const uint8_t*>(&op->trailer) + off, kTrailer - got);
  uint64_t v;
  std::memcpy(&v, out, sizeof(v));
  return v;
}

}  // namespace

// FI_ETRUNC: a Send longer than buffers + slot is refused whole by iWARP
// (a DDP Terminate, engine status kLocLenErr), nothing placed, excess
// unknown. One that only reached into the slot is truncated here.
int recv_done(const Op* op, const Wc& wc, fi_cq_err_entry* e) {
  e->buf = op->buf;
  if (wc.flags & kWcSolicited) {  // carries remote CQ data
    if (wc.byte_len < kTrailer) return FI_EIO;
    e->len = wc.byte_len - kTrailer;
    e->data = read_trailer(op, e->len);
    e->flags |= FI_REMOTE_CQ_DATA;
    return 0;
  }
  if (wc.byte_len > op->len) {
    e->len = op->len;
    e->olen = wc.byte_len - op->len;
    return FI_ETRUNC;
  }
  e->len = wc.byte_len;
  return 0;
}

namespace {

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
  return do_send(from_fid<Ep>(f), &v, &desc, 1, ctx, 0, true, nullptr);
}
ssize_t msg_sendv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t, void* ctx) {
  return do_send(from_fid<Ep>(f), iov, desc, count, ctx, 0, true, nullptr);
}
ssize_t msg_sendmsg(fid_ep* f, const fi_msg* m, uint64_t flags) {
  return do_send(from_fid<Ep>(f), m->msg_iov, m->desc, m->iov_count, m->context, flags, true,
                 (flags & FI_REMOTE_CQ_DATA) ? &m->data : nullptr);
}
ssize_t msg_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t) {
  iovec v{const_cast<void*>(buf), len};
  return do_send(from_fid<Ep>(f), &v, nullptr, 1, nullptr, FI_INJECT, false, nullptr);
}
ssize_t msg_senddata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data, fi_addr_t,
                     void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return do_send(from_fid<Ep>(f), &v, &desc, 1, ctx, FI_REMOTE_CQ_DATA, true, &data);
}
ssize_t msg_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t) {
  iovec v{const_cast<void*>(buf), len};
  return do_send(from_fid<Ep>(f), &v, nullptr, 1, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA, false,
                 &data);
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
