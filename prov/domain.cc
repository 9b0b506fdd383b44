// fi_domain: a protection domain of the process's engine. Opens CQs,
// counters, address vectors, endpoints and MRs; everything libfabric defines
// that an iWARP MSG provider does not have answers -FI_ENOSYS.
#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

int domain_close(fid* f) {
  auto* dom = from_fid<Domain>(f);
  if (dom->children.open.load() > (dom->sink ? 1u : 0u)) return -FI_EBUSY;
  if (dom->sink) fi_close(&dom->sink->fid.fid);
  dom->fab->children.drop();
  delete dom;
  return 0;
}

int no_sep(fid_domain*, fi_info*, fid_ep**, void*) { return -FI_ENOSYS; }
int no_poll(fid_domain*, fi_poll_attr*, fid_poll**) { return -FI_ENOSYS; }
int no_stx(fid_domain*, fi_tx_attr*, fid_stx**, void*) { return -FI_ENOSYS; }
int no_srx(fid_domain*, fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
int no_coll(fid_domain*, fi_collective_op, fi_collective_attr*, uint64_t) { return -FI_ENOSYS; }

int query_atomic(fid_domain*, fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) {
  const AtomicKind kind = (flags & FI_COMPARE_ATOMIC) ? AtomicKind::kCompare
                          : (flags & FI_FETCH_ATOMIC) ? AtomicKind::kFetch
                                                      : AtomicKind::kWrite;
  const size_t size = atomic_size(dt, op, kind);
  if (size == 0) return -FI_EOPNOTSUPP;
  attr->count = 1;
  attr->size = size;
  return 0;
}

// Extensions: ofi_rxm's flow control (flow_ctrl.cc), our counters
// (counters_ops.cc).
int domain_ops_open(fid*, const char* name, uint64_t, void** ops, void*) {
  if (open_counters_ops(name, ops)) return 0;
  if (!name || std::strcmp(name, kFlowCtrlOpsName) != 0) return -FI_ENOSYS;
  *ops = flow_ctrl_ops();
  return *ops ? 0 : -FI_ENOSYS;  // null: rxm's layout not known under this libfabric
}

fi_ops g_domain_fi_ops = {sizeof(fi_ops), domain_close, no_bind, no_control, domain_ops_open,
                          nullptr, nullptr};
fi_ops_domain g_domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = av_open,
    .cq_open = cq_open,
    .endpoint = ep_open,
    .scalable_ep = no_sep,
    .cntr_open = cntr_open,
    .poll_open = no_poll,
    .stx_ctx = no_stx,
    .srx_ctx = no_srx,
    .query_atomic = query_atomic,
    .query_collective = no_coll,
    .endpoint2 = nullptr,
};

}  // namespace

int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** out, void* context) {
  auto* fab = from_fid<Fabric>(fabric);
  Core& core = *fab->core;
  if (info && info->domain_attr && info->domain_attr->name &&
      std::string(info->domain_attr->name) != "softrdma0")
    return -FI_EINVAL;
  auto* dom = new Domain{};
  dom->fab = fab;
  fab->children.add();
  const fi_domain_attr* da = info ? info->domain_attr : nullptr;
  {
    std::lock_guard g(core.mu);
    dom->pd = core.engine->alloc_pd();
    if (da && (da->data_progress == FI_PROGRESS_AUTO || da->control_progress == FI_PROGRESS_AUTO))
      core.start_auto_progress();  // for the whole process, until the core goes
  }
  dom->fid.fid.fclass = FI_CLASS_DOMAIN;
  dom->fid.fid.context = context;
  dom->fid.fid.ops = &g_domain_fi_ops;
  dom->fid.ops = &g_domain_ops;
  dom->fid.mr = &g_mr_ops;
  *out = &dom->fid;
  return 0;
}

}  // namespace softrdma::prov
