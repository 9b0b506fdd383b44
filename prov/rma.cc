// fi_ops_rma: RDMA Read and Write (RFC 5040 §5.1-5.2); fi_writedata is an
// RDMA Write followed by RFC 7306 Immediate Data, whose completion at the
// target consumes a posted receive (FI_RX_CQ_DATA mode).
#include "prov/prov.h"
#include "prov/sge.h"

namespace softrdma::prov {

namespace {

struct Rma {
  fi_addr_t dest;
  const iovec* iov;
  void** desc;
  size_t count;
  uint64_t addr;
  uint64_t key;
  void* ctx;
  uint64_t flags;
};

ssize_t do_rma(Ep* ep, const Rma& r, WrOpcode opcode, uint64_t data, bool report) {
  // Immediate Data consumes a receive: an RDM endpoint's peer has them
  // posted (its eager buffers) only if it has messages (cq_data_size 8),
  // and each takes a credit like a message.
  const bool rdm_imm = ep->rdm && opcode == WrOpcode::kWriteWithImm;
  if (rdm_imm && ep->info->domain_attr->cq_data_size == 0) return -FI_EOPNOTSUPP;
  std::lock_guard g(ep->dom->core().mu);
  int err = 0;
  Qp* qp = target_qp(ep, r.dest, &err);
  if (!qp) return err;
  if (rdm_imm && !rdm_credit(ep, qp, false)) return -FI_EAGAIN;
  const bool read = opcode == WrOpcode::kRead;
  Op* op = new_op(ep, r.ctx, (read ? FI_READ : FI_WRITE) | FI_RMA, r.flags | ep->tx_flags, true,
                  read ? ep->read_cntr : ep->write_cntr);
  op->len = iov_bytes(r.iov, r.count);
  if (!report) op->report = false;
  SendWr wr{.opcode = opcode, .remote_addr = r.addr, .rkey = static_cast<uint32_t>(r.key),
            .imm_data = data};
  bool ok = (r.flags & FI_INJECT) && !read ? inject_copy(ep, op, r.iov, r.count, &wr)
                                           : fill_sges(wr.sg_list, &wr.num_sge, r.iov, r.desc, r.count);
  if (!ok || r.key > UINT32_MAX) {
    free_op(op);
    return -FI_EINVAL;
  }
  const ssize_t rc = post_send(ep, qp, wr, op);
  if (rc == 0 && rdm_imm) rdm_credit(ep, qp, true);
  return rc;
}

WrOpcode write_op(uint64_t flags) {
  return (flags & FI_REMOTE_CQ_DATA) ? WrOpcode::kWriteWithImm : WrOpcode::kWrite;
}

ssize_t rma_read(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t dest, uint64_t addr,
                 uint64_t key, void* ctx) {
  iovec v{buf, len};
  return do_rma(from_fid<Ep>(f), {dest, &v, &desc, 1, addr, key, ctx, 0}, WrOpcode::kRead, 0, true);
}
ssize_t rma_readv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
                  uint64_t addr, uint64_t key, void* ctx) {
  return do_rma(from_fid<Ep>(f), {dest, iov, desc, count, addr, key, ctx, 0}, WrOpcode::kRead, 0, true);
}
ssize_t rma_readmsg(fid_ep* f, const fi_msg_rma* m, uint64_t flags) {
  if (m->rma_iov_count != 1) return -FI_EINVAL;
  return do_rma(from_fid<Ep>(f),
                {m->addr, m->msg_iov, m->desc, m->iov_count, m->rma_iov[0].addr, m->rma_iov[0].key,
                 m->context, flags},
                WrOpcode::kRead, 0, true);
}
ssize_t rma_write(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest, uint64_t addr,
                  uint64_t key, void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return do_rma(from_fid<Ep>(f), {dest, &v, &desc, 1, addr, key, ctx, 0}, WrOpcode::kWrite, 0, true);
}
ssize_t rma_writev(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
                   uint64_t addr, uint64_t key, void* ctx) {
  return do_rma(from_fid<Ep>(f), {dest, iov, desc, count, addr, key, ctx, 0}, WrOpcode::kWrite, 0, true);
}
ssize_t rma_writemsg(fid_ep* f, const fi_msg_rma* m, uint64_t flags) {
  if (m->rma_iov_count != 1) return -FI_EINVAL;
  return do_rma(from_fid<Ep>(f),
                {m->addr, m->msg_iov, m->desc, m->iov_count, m->rma_iov[0].addr, m->rma_iov[0].key,
                 m->context, flags},
                write_op(flags), m->data, true);
}
ssize_t rma_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key) {
  iovec v{const_cast<void*>(buf), len};
  return do_rma(from_fid<Ep>(f), {dest, &v, nullptr, 1, addr, key, nullptr, FI_INJECT},
                WrOpcode::kWrite, 0, false);
}
ssize_t rma_writedata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                      fi_addr_t dest, uint64_t addr, uint64_t key, void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return do_rma(from_fid<Ep>(f), {dest, &v, &desc, 1, addr, key, ctx, FI_REMOTE_CQ_DATA},
                WrOpcode::kWriteWithImm, data, true);
}
ssize_t rma_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                       uint64_t addr, uint64_t key) {
  iovec v{const_cast<void*>(buf), len};
  return do_rma(from_fid<Ep>(f), {dest, &v, nullptr, 1, addr, key, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA},
                WrOpcode::kWriteWithImm, data, false);
}

}  // namespace

fi_ops_rma g_rma_ops = {sizeof(fi_ops_rma), rma_read,   rma_readv,     rma_readmsg,
                        rma_write,          rma_writev, rma_writemsg,  rma_inject,
                        rma_writedata,      rma_injectdata};

}  // namespace softrdma::prov
