// fi_ops_atomic: one element per call, carried by RFC 7306's atomics on the
// 64-bit word that holds it. FI_SUM is Fetch-Add, FI_ATOMIC_WRITE Swap,
// FI_CSWAP Compare-Swap, each with its fetching form, on 64- and 32-bit
// integers. A 32-bit element is its half of the aligned word (this host's
// byte order), which the masks confine the operation to: Fetch-Add's carry
// stops at the half's top bit, Swap and Compare-Swap touch and compare only
// its bits. The target checks the whole word against the registration.
// The vector and message forms take exactly one element; everything else
// is -FI_EOPNOTSUPP, as fi_query_atomic says.
#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

size_t atomic_size(fi_datatype dt, fi_op op, AtomicKind kind) {
  const bool op_ok = kind == AtomicKind::kCompare ? op == FI_CSWAP
                                                   : op == FI_SUM || op == FI_ATOMIC_WRITE;
  if (!op_ok) return 0;
  switch (dt) {
    case FI_UINT64:
    case FI_INT64: return sizeof(uint64_t);
    case FI_UINT32:
    case FI_INT32: return sizeof(uint32_t);
    default: return 0;
  }
}

// A 32-bit fetch: its half of the word the response brought.
void atomic_fetched(Op* op) {
  if (op->fetch_to == nullptr) return;
  const auto half = static_cast<uint32_t>(op->result >> op->fetch_shift);
  std::memcpy(op->fetch_to, &half, sizeof(half));
}

namespace {

bool valid(fi_datatype dt, fi_op op, AtomicKind kind, size_t count) {
  return count == 1 && atomic_size(dt, op, kind) != 0;
}

uint64_t element(const void* p, size_t size) {
  if (size == sizeof(uint64_t)) return *static_cast<const uint64_t*>(p);
  return *static_cast<const uint32_t*>(p);
}

struct AtomicArgs {
  fi_addr_t dest;
  const void* operand;
  const void* compare;  // FI_CSWAP
  void* result;         // null: no fetch; the old value lands in the op
  void* result_desc;
  uint64_t addr, key;
  fi_datatype dt;
  fi_op op;
  void* ctx;
  uint64_t flags;
  bool report;
};

ssize_t do_atomic(Ep* ep, const AtomicArgs& a) {
  const AtomicKind kind = a.compare ? AtomicKind::kCompare
                          : a.result ? AtomicKind::kFetch
                                     : AtomicKind::kWrite;
  const size_t size = atomic_size(a.dt, a.op, kind);
  if (a.addr % size != 0) return -FI_EINVAL;  // RFC 7306 acts on aligned words
  std::lock_guard g(ep->dom->core().mu);
  int err = 0;
  Qp* qp = target_qp(ep, a.dest, &err);
  if (!qp) return err;
  uint64_t f = FI_ATOMIC | (a.result ? FI_READ : FI_WRITE);
  Op* op = new_op(ep, a.ctx, f, a.flags | ep->tx_flags, true,
                  a.result ? ep->read_cntr : ep->write_cntr);
  op->len = size;
  if (!a.report) op->report = false;
  // The element's bits within the 64-bit word.
  const unsigned shift = size == sizeof(uint64_t) ? 0 : (a.addr & 4) * 8;
  const uint64_t field = size == sizeof(uint64_t) ? ~uint64_t{0} : uint64_t{0xFFFFFFFF} << shift;
  const uint64_t value = element(a.operand, size) << shift;
  SendWr wr{.num_sge = 1, .remote_addr = a.addr & ~uint64_t{7},
            .rkey = static_cast<uint32_t>(a.key)};
  if (a.compare) {
    wr.opcode = WrOpcode::kAtomicCmpSwap;
    wr.compare_add = element(a.compare, size) << shift;
    wr.swap = value;
    wr.swap_mask = wr.compare_mask = field;
  } else if (a.op == FI_ATOMIC_WRITE) {
    wr.opcode = WrOpcode::kAtomicSwap;
    wr.swap = value;
    wr.swap_mask = field;
  } else {
    wr.opcode = WrOpcode::kAtomicFetchAdd;
    wr.compare_add = value;
    wr.add_mask = size == sizeof(uint64_t) ? 0 : uint64_t{1} << 31 | uint64_t{1} << 63;
  }
  // A 64-bit result lands where the caller wants it; a 32-bit one in the
  // op, whose completion copies its half out (atomic_fetched).
  auto* mr = static_cast<MemRegion*>(a.result_desc);
  const bool direct = a.result && size == sizeof(uint64_t);
  if (a.result && !direct) {
    op->fetch_to = a.result;
    op->fetch_shift = static_cast<uint8_t>(shift);
  }
  void* sink = direct ? a.result : &op->result;
  wr.sg_list[0] = Sge{reinterpret_cast<uint64_t>(sink), sizeof(uint64_t),
                      direct && mr ? mr->mr->stag : 0};
  return post_send(ep, qp, wr, op);
}

ssize_t at_write(fid_ep* f, const void* buf, size_t count, void*, fi_addr_t dest, uint64_t addr,
                 uint64_t key, fi_datatype dt, fi_op op, void* ctx) {
  if (!valid(dt, op, AtomicKind::kWrite, count)) return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f),
                   {dest, buf, nullptr, nullptr, nullptr, addr, key, dt, op, ctx, 0, true});
}
ssize_t at_writev(fid_ep* f, const fi_ioc* iov, void** desc, size_t count, fi_addr_t a,
                  uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* ctx) {
  if (count != 1) return -FI_EOPNOTSUPP;
  return at_write(f, iov[0].addr, iov[0].count, desc ? desc[0] : nullptr, a, addr, key, dt, op, ctx);
}
ssize_t at_writemsg(fid_ep* f, const fi_msg_atomic* m, uint64_t flags) {
  if (m->iov_count != 1 || m->rma_iov_count != 1 ||
      !valid(m->datatype, m->op, AtomicKind::kWrite, m->msg_iov[0].count))
    return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f), {m->addr, m->msg_iov[0].addr, nullptr, nullptr, nullptr,
                                     m->rma_iov[0].addr, m->rma_iov[0].key, m->datatype, m->op,
                                     m->context, flags, true});
}
ssize_t at_inject(fid_ep* f, const void* buf, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                  fi_datatype dt, fi_op op) {
  if (!valid(dt, op, AtomicKind::kWrite, count)) return -FI_EOPNOTSUPP;
  return do_atomic(from_fid<Ep>(f),
                   {dest, buf, nullptr, nullptr, nullptr, addr, key, dt, op, nullptr, 0, false});
}
ssize_t at_readwrite(fid_ep* f, const void* buf, size_t count, void*, void* result,
                     void* result_desc, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
                     fi_op op, void* ctx) {
  if (!valid(dt, op, AtomicKind::kFetch, count)) return -FI_EOPNOTSUPP;
  if (!result) return -FI_EINVAL;
  return do_atomic(from_fid<Ep>(f),
                   {dest, buf, nullptr, result, result_desc, addr, key, dt, op, ctx, 0, true});
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
      !valid(m->datatype, m->op, AtomicKind::kFetch, m->msg_iov[0].count))
    return -FI_EOPNOTSUPP;
  if (!res[0].addr) return -FI_EINVAL;
  return do_atomic(from_fid<Ep>(f), {m->addr, m->msg_iov[0].addr, nullptr, res[0].addr,
                                     res_desc ? res_desc[0] : nullptr, m->rma_iov[0].addr,
                                     m->rma_iov[0].key, m->datatype, m->op, m->context, flags,
                                     true});
}
ssize_t at_compwrite(fid_ep* f, const void* buf, size_t count, void*, const void* compare, void*,
                     void* result, void* result_desc, fi_addr_t dest, uint64_t addr, uint64_t key,
                     fi_datatype dt, fi_op op, void* ctx) {
  if (!valid(dt, op, AtomicKind::kCompare, count)) return -FI_EOPNOTSUPP;
  if (!compare || !result) return -FI_EINVAL;
  return do_atomic(from_fid<Ep>(f),
                   {dest, buf, compare, result, result_desc, addr, key, dt, op, ctx, 0, true});
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
      !valid(m->datatype, m->op, AtomicKind::kCompare, m->msg_iov[0].count))
    return -FI_EOPNOTSUPP;
  if (!cmp[0].addr || !res[0].addr) return -FI_EINVAL;
  return do_atomic(from_fid<Ep>(f), {m->addr, m->msg_iov[0].addr, cmp[0].addr, res[0].addr,
                                     res_desc ? res_desc[0] : nullptr, m->rma_iov[0].addr,
                                     m->rma_iov[0].key, m->datatype, m->op, m->context, flags,
                                     true});
}

int count_valid(fi_datatype dt, fi_op op, AtomicKind kind, size_t* count) {
  if (!valid(dt, op, kind, 1)) return -FI_EOPNOTSUPP;
  *count = 1;
  return 0;
}
int at_writevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) {
  return count_valid(dt, op, AtomicKind::kWrite, count);
}
int at_readwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) {
  return count_valid(dt, op, AtomicKind::kFetch, count);
}
int at_compwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) {
  return count_valid(dt, op, AtomicKind::kCompare, count);
}

}  // namespace

fi_ops_atomic g_atomic_ops = {sizeof(fi_ops_atomic), at_write,        at_writev,
                              at_writemsg,           at_inject,       at_readwrite,
                              at_readwritev,         at_readwritemsg, at_compwrite,
                              at_compwritev,         at_compwritemsg, at_writevalid,
                              at_readwritevalid,     at_compwritevalid};

}  // namespace softrdma::prov
