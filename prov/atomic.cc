// fi_ops_atomic: one 64-bit element per call, FI_SUM (RFC 7306 Fetch-Add)
// and FI_CSWAP (Compare-Swap). The vector and message forms take exactly one
// element; everything else is -FI_EOPNOTSUPP, as fi_query_atomic says.
#include "prov/prov.h"

namespace softrdma::prov {

namespace {

bool valid(fi_datatype dt, fi_op op, bool compare, size_t count) {
  return (dt == FI_UINT64 || dt == FI_INT64) && count == 1 &&
         (compare ? op == FI_CSWAP : op == FI_SUM);
}

// result == nullptr: fi_atomic without fetch; the old value lands in the op.
ssize_t do_atomic(Ep* ep, const void* operand, const void* compare, void* result, void* result_desc,
                  uint64_t addr, uint64_t key, void* ctx, uint64_t flags, bool report) {
  std::lock_guard g(ep->dom->core().mu);
  if (!ep->qp) return -FI_EOPBADSTATE;
  uint64_t f = FI_ATOMIC | (result ? FI_READ : FI_WRITE);
  Op* op = new_op(ep, ctx, f, flags | ep->tx_flags, true, result ? ep->read_cntr : ep->write_cntr);
  op->len = sizeof(uint64_t);
  if (!report) op->report = false;
  uint64_t value = *static_cast<const uint64_t*>(operand);
  SendWr wr{.opcode = compare ? WrOpcode::kAtomicCmpSwap : WrOpcode::kAtomicFetchAdd, .num_sge = 1,
            .remote_addr = addr, .rkey = static_cast<uint32_t>(key)};
  if (compare) {
    wr.compare_add = *static_cast<const uint64_t*>(compare);
    wr.swap = value;
  } else {
    wr.compare_add = value;
  }
  auto* mr = static_cast<MemRegion*>(result_desc);
  void* sink = result ? result : &op->result;
  wr.sg_list[0] = Sge{reinterpret_cast<uint64_t>(sink), sizeof(uint64_t), mr ? mr->mr->stag : 0};
  return post_send(ep, wr, op);
}

ssize_t at_write(fid_ep* f, const void* buf, size_t count, void*, fi_addr_t, uint64_t addr,
                 uint64_t key, fi_datatype dt, fi_op op, void* ctx) {
  if (!valid(dt, op, false, count)) return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), buf, nullptr, nullptr, nullptr, addr, key, ctx, 0, true);
}
ssize_t at_writev(fid_ep* f, const fi_ioc* iov, void** desc, size_t count, fi_addr_t a,
                  uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) {
  if (count != 1) return -FI_EOPNOTSUPP;
  return at_write(f, iov[0].addr, iov[0].count, desc ? desc[0] : nullptr, a, addr, key, dt, op, ctx);
}
ssize_t at_writemsg(fid_ep* f, const fi_msg_atomic* m, uint64_t flags) {
  if (m->iov_count != 1 || m->rma_iov_count != 1 ||
      !valid(m->datatype, m->op, false, m->msg_iov[0].count))
    return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), m->msg_iov[0].addr, nullptr, nullptr, nullptr,
                   m->rma_iov[0].addr, m->rma_iov[0].key, m->context, flags, true);
}
ssize_t at_inject(fid_ep* f, const void* buf, size_t count, fi_addr_t, uint64_t addr, uint64_t key,
                  fi_datatype dt, fi_op op) {
  if (!valid(dt, op, false, count)) return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), buf, nullptr, nullptr, nullptr, addr, key, nullptr, 0, false);
}
ssize_t at_readwrite(fid_ep* f, const void* buf, size_t count, void*, void* result,
                     void* result_desc, fi_addr_t, uint64_t addr, uint64_t key, fi_datatype dt,
                     fi_op op, void* ctx) {
  if (!valid(dt, op, false, count)) return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), buf, nullptr, result, result_desc, addr, key, ctx, 0, true);
}
ssize_t at_readwritev(fid_ep* f, const fi_ioc* iov, void** desc, size_t count, fi_ioc* res,
                      void** res_desc, size_t res_count, fi_addr_t a, uint64_t addr, uint64_t key,
                      fi_datatype dt, fi_op op, void* ctx) {
  if (count != 1 || res_count != 1) return -FI_EOPNOTSUPP;
  return at_readwrite(f, iov[0].addr, iov[0].count, desc ? desc[0] : nullptr, res[0].addr,
                      res_desc ? res_desc[0] : nullptr, a, addr, key, dt, op, ctx);
}
ssize_t at_readwritemsg(fid_ep* f, const fi_msg_atomic* m, fi_ioc* res, void** res_desc,
                        size_t res_count, uint64_t flags) {
  if (m->iov_count != 1 || m->rma_iov_count != 1 || res_count != 1 ||
      !valid(m->datatype, m->op, false, m->msg_iov[0].count))
    return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), m->msg_iov[0].addr, nullptr, res[0].addr,
                   res_desc ? res_desc[0] : nullptr, m->rma_iov[0].addr, m->rma_iov[0].key,
                   m->context, flags, true);
}
ssize_t at_compwrite(fid_ep* f, const void* buf, size_t count, void*, const void* compare, void*,
                     void* result, void* result_desc, fi_addr_t, uint64_t addr, uint64_t key,
                     fi_datatype dt, fi_op op, void* ctx) {
  if (!valid(dt, op, true, count)) return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), buf, compare, result, result_desc, addr, key, ctx, 0, true);
}
ssize_t at_compwritev(fid_ep* f, const fi_ioc* iov, void** desc, size_t count,
                      const fi_ioc* cmp, void** cmp_desc, size_t cmp_count, fi_ioc* res,
                      void** res_desc, size_t res_count, fi_addr_t a, uint64_t addr, uint64_t key,
                      fi_datatype dt, fi_op op, void* ctx) {
  if (count != 1 || cmp_count != 1 || res_count != 1) return -FI_EOPNOTSUPP;
  return at_compwrite(f, iov[0].addr, iov[0].count, desc ? desc[0] : nullptr, cmp[0].addr,
                      cmp_desc ? cmp_desc[0] : nullptr, res[0].addr,
                      res_desc ? res_desc[0] : nullptr, a, addr, key, dt, op, ctx);
}
ssize_t at_compwritemsg(fid_ep* f, const fi_msg_atomic* m, const fi_ioc* cmp, void**,
                        size_t cmp_count, fi_ioc* res, void** res_desc, size_t res_count,
                        uint64_t flags) {
  if (m->iov_count != 1 || m->rma_iov_count != 1 || cmp_count != 1 || res_count != 1 ||
      !valid(m->datatype, m->op, true, m->msg_iov[0].count))
    return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), m->msg_iov[0].addr, cmp[0].addr, res[0].addr,
                   res_desc ? res_desc[0] : nullptr, m->rma_iov[0].addr, m->rma_iov[0].key,
                   m->context, flags, true);
}

int count_valid(fi_datatype dt, fi_op op, bool compare, size_t* count) {
  if (!valid(dt, op, compare, 1)) return -FI_EOPNOTSUPP;
  *count = 1;
  return 0;
}
int at_writevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) {
  return count_valid(dt, op, false, count);
}
int at_readwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) {
  return count_valid(dt, op, false, count);
}
int at_compwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) {
  return count_valid(dt, op, true, count);
}

}  // namespace

fi_ops_atomic g_atomic_ops = {sizeof(fi_ops_atomic), at_write,        at_writev,
                              at_writemsg,           at_inject,       at_readwrite,
                              at_readwritev,         at_readwritemsg, at_compwrite,
                              at_compwritev,         at_compwritemsg, at_writevalid,
                              at_readwritevalid,     at_compwritevalid};

}  // namespace softrdma::prov
