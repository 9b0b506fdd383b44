// Counters: bumped on every completion of the operations bound to them,
// reported or not (fi_cntr(3)); read/wait drive progress like a CQ read.
#include <chrono>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

uint64_t cntr_read(fid_cntr* f) {
  auto* c = from_fid<Cntr>(f);
  c->dom->core().progress();
  return c->value.load();
}

uint64_t cntr_readerr(fid_cntr* f) { return from_fid<Cntr>(f)->errs.load(); }

int cntr_add_op(fid_cntr* f, uint64_t v) {
  from_fid<Cntr>(f)->value += v;
  return 0;
}
int cntr_set(fid_cntr* f, uint64_t v) {
  from_fid<Cntr>(f)->value = v;
  return 0;
}
int cntr_adderr(fid_cntr* f, uint64_t v) {
  from_fid<Cntr>(f)->errs += v;
  return 0;
}
int cntr_seterr(fid_cntr* f, uint64_t v) {
  from_fid<Cntr>(f)->errs = v;
  return 0;
}

int cntr_wait(fid_cntr* f, uint64_t threshold, int timeout) {
  auto* c = from_fid<Cntr>(f);
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  uint64_t errs0 = c->errs.load();
  for (;;) {
    if (cntr_read(f) >= threshold) return 0;
    if (c->errs.load() != errs0) return -FI_EAVAIL;
    if (timeout >= 0 && std::chrono::steady_clock::now() >= end) return -FI_ETIMEDOUT;
    c->dom->core().progress(1000);
  }
}

int cntr_close(fid* f) {
  auto* c = from_fid<Cntr>(f);
  c->dom->children.drop();
  delete c;
  return 0;
}

fi_ops g_cntr_fi_ops = {sizeof(fi_ops), cntr_close, no_bind, no_control, no_ops_open, nullptr, nullptr};
fi_ops_cntr g_cntr_ops = {sizeof(fi_ops_cntr), cntr_read, cntr_readerr, cntr_add_op, cntr_set,
                          cntr_wait, cntr_adderr, cntr_seterr};

}  // namespace

void cntr_add(Cntr* c, bool error) {
  if (!c) return;
  if (error) {
    ++c->errs;
  } else {
    ++c->value;
  }
}

int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** out, void* context) {
  if (attr && attr->events != FI_CNTR_EVENTS_COMP) return -FI_ENOSYS;
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
  auto* c = new Cntr{};
  c->dom = from_fid<Domain>(domain);
  c->dom->children.add();
  c->fid.fid.fclass = FI_CLASS_CNTR;
  c->fid.fid.context = context;
  c->fid.fid.ops = &g_cntr_fi_ops;
  c->fid.ops = &g_cntr_ops;
  *out = &c->fid;
  return 0;
}

}  // namespace softrdma::prov
