// fi_fabric: a handle on the process's provider core (core.cc); any number
// may be open, all sharing one engine.
#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

int fabric_close(fid* f) {
  auto* fab = from_fid<Fabric>(f);
  if (fab->children.open.load() != 0) return -FI_EBUSY;
  Core::release(&fab->core);
  delete fab;
  return 0;
}

// 0 only when sleeping on the wait fds is safe: nothing is ready yet and
// something other than the application's own calls will wake the sleeper
// (Core::can_block). Otherwise the caller must keep reading, and that is
// what -FI_EAGAIN tells it.
int fabric_trywait(fid_fabric* f, fid** fids, int count) {
  Core& core = *from_fid<Fabric>(f)->core;
  std::lock_guard g(core.mu);
  bool cm = false;
  for (int i = 0; i < count; ++i) {  // arm first: see WaitFd (wait.cc)
    switch (fids[i]->fclass) {
      case FI_CLASS_CQ:
        from_fid<Cq>(fids[i])->arm();
        break;
      case FI_CLASS_EQ:
        from_fid<Eq>(fids[i])->wait.arm();
        cm = true;
        break;
      default:
        return -FI_EINVAL;  // counters have no wait fd
    }
  }
  core.progress();
  for (int i = 0; i < count; ++i) {
    const Cq* cq = fids[i]->fclass == FI_CLASS_CQ ? from_fid<Cq>(fids[i]) : nullptr;
    const bool ready = cq ? cq->ready() : !from_fid<Eq>(fids[i])->items.empty();
    if (ready) return -FI_EAGAIN;
  }
  if (!core.can_block(cm)) return -FI_EAGAIN;
  core.engine->expect_idle();  // c2's watchdog makes the progress from now on
  return 0;
}

int no_wait_open(fid_fabric*, fi_wait_attr*, fid_wait**) { return -FI_ENOSYS; }

int fabric_ops_open(fid*, const char* name, uint64_t, void** ops, void*) {
  return open_counters_ops(name, ops) ? 0 : -FI_ENOSYS;
}

fi_ops g_fabric_fi_ops = {sizeof(fi_ops), fabric_close, no_bind, no_control, fabric_ops_open,
                          nullptr, nullptr};
fi_ops_fabric g_fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = domain_open,
    .passive_ep = pep_open,
    .eq_open = eq_open,
    .wait_open = no_wait_open,
    .trywait = fabric_trywait,
    .domain2 = nullptr,
};

}  // namespace

int fabric_open(fi_fabric_attr* attr, fid_fabric** out, void* context) {
  if (attr && attr->name && std::strcmp(attr->name, "softrdma") != 0) return -FI_EINVAL;
  if (!check_settings()) return -FI_EINVAL;
  int err = 0;
  std::shared_ptr<Core> core = Core::acquire(&err);
  if (!core) return err;
  auto* fab = new Fabric{};
  fab->fid.fid.fclass = FI_CLASS_FABRIC;
  fab->fid.fid.context = context;
  fab->fid.fid.ops = &g_fabric_fi_ops;
  fab->fid.ops = &g_fabric_ops;
  fab->core = std::move(core);
  *out = &fab->fid;
  return 0;
}

}  // namespace softrdma::prov
