// Memory registration: a libfabric MR is an engine MR; its key is the STag
// the peer names in RDMA Read/Write/Atomic requests, its address the VA.
#include "prov/prov.h"

namespace softrdma::prov {

namespace {

uint32_t access_bits(uint64_t acs) {
  uint32_t a = kAccessLocalWrite;  // local writes (receives, read sinks) always allowed
  if (acs & FI_REMOTE_READ) a |= kAccessRemoteRead;
  if (acs & FI_REMOTE_WRITE) a |= kAccessRemoteWrite | kAccessRemoteAtomic;
  return a;
}

int mr_close(fid* f) {
  auto* m = from_fid<MemRegion>(f);
  {
    std::lock_guard g(m->dom->core().mu);
    m->dom->core().engine->dereg_mr(m->mr->stag);
    m->dom->children.drop();
  }
  delete m;
  return 0;
}

fi_ops g_mr_fi_ops = {sizeof(fi_ops), mr_close, no_bind, no_control, no_ops_open, nullptr, nullptr};

int mr_reg_impl(fid* f, const void* buf, size_t len, uint64_t access, void* context,
                fid_mr** out) {
  auto* dom = from_fid<Domain>(f);
  std::lock_guard g(dom->core().mu);
  softrdma::Mr* mr = dom->core().engine->reg_mr(dom->pd, const_cast<void*>(buf), len,
                                               access_bits(access));
  if (!mr) return -FI_ENOMEM;
  auto* m = new MemRegion{};
  m->dom = dom;
  m->mr = mr;
  m->fid.fid.fclass = FI_CLASS_MR;
  m->fid.fid.context = context;
  m->fid.fid.ops = &g_mr_fi_ops;
  m->fid.mem_desc = m;
  m->fid.key = mr->stag;
  dom->children.add();
  *out = &m->fid;
  return 0;
}

// requested_key and unknown flag bits (rxm passes some) are ignored:
// FI_MR_PROV_KEY means the provider picks keys.
int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t, uint64_t, uint64_t,
           fid_mr** out, void* context) {
  return mr_reg_impl(f, buf, len, access, context, out);
}

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t, uint64_t,
            uint64_t, fid_mr** out, void* context) {
  if (count > 1) return -FI_EINVAL;  // mr_iov_limit is 1
  return mr_reg_impl(f, count ? iov[0].iov_base : nullptr, count ? iov[0].iov_len : 0, access,
                     context, out);
}

int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t, fid_mr** out) {
  if (attr->iov_count > 1) return -FI_EINVAL;
  const iovec* v = attr->mr_iov;
  return mr_reg_impl(f, attr->iov_count ? v[0].iov_base : nullptr,
                     attr->iov_count ? v[0].iov_len : 0, attr->access, attr->context, out);
}

}  // namespace

fi_ops_mr g_mr_ops = {sizeof(fi_ops_mr), mr_reg, mr_regv, mr_regattr};

}  // namespace softrdma::prov
