// fi_fabric: one engine per fabric; CM events routed to the EQs of the
// passive and active endpoints they concern.
#include <cstdlib>
#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

int handle_close(fid* f) {
  delete reinterpret_cast<ConnHandle*>(f);
  return 0;
}
fi_ops g_handle_ops = {sizeof(fi_ops), handle_close, no_bind, no_control, no_ops_open,
                       nullptr, nullptr};

EqItem cm_item(uint32_t event, fid_t f, fi_info* info, const std::vector<uint8_t>& data) {
  EqItem it{.event = event, .error = false, .fid = f};
  it.buf.resize(sizeof(fi_eq_cm_entry) + data.size());
  auto* e = reinterpret_cast<fi_eq_cm_entry*>(it.buf.data());
  e->fid = f;
  e->info = info;
  if (!data.empty()) std::memcpy(e->data, data.data(), data.size());
  return it;
}

int fabric_close(fid* f) {
  auto* fab = from_fid<Fabric>(f);
  fab->stop_auto_progress();
  delete fab;
  return 0;
}

// 0 only when sleeping on the wait fds is safe: nothing is ready yet and
// something other than the application's own calls will wake the sleeper
// (Fabric::can_block). Otherwise the caller must keep reading, and that is
// what -FI_EAGAIN tells it.
int fabric_trywait(fid_fabric* f, fid** fids, int count) {
  auto* fab = from_fid<Fabric>(f);
  std::lock_guard g(fab->mu);
  bool cm = false;
  for (int i = 0; i < count; ++i) {  // arm first: see WaitFd (wait.cc)
    switch (fids[i]->fclass) {
      case FI_CLASS_CQ:
        from_fid<Cq>(fids[i])->wait.arm();
        break;
      case FI_CLASS_EQ:
        from_fid<Eq>(fids[i])->wait.arm();
        cm = true;
        break;
      default:
        return -FI_EINVAL;  // counters have no wait fd
    }
  }
  fab->progress();
  for (int i = 0; i < count; ++i) {
    const Cq* cq = fids[i]->fclass == FI_CLASS_CQ ? from_fid<Cq>(fids[i]) : nullptr;
    const bool ready = cq ? !cq->ready.empty() || cq->overrun
                          : !from_fid<Eq>(fids[i])->items.empty();
    if (ready) return -FI_EAGAIN;
  }
  if (!fab->can_block(cm)) return -FI_EAGAIN;
  fab->engine->expect_idle();  // c2's watchdog makes the progress from now on
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
  auto* fab = new Fabric{};
  fab->fid.fid.fclass = FI_CLASS_FABRIC;
  fab->fid.fid.context = context;
  fab->fid.fid.ops = &g_fabric_fi_ops;
  fab->fid.ops = &g_fabric_ops;
  fab->engine = std::make_unique<Engine>(EngineConfig::from_env());
  if (!fab->engine->ok()) {  // the reason went to stderr
    delete fab;
    return -FI_ENODEV;
  }
  *out = &fab->fid;
  return 0;
}

// ep.cc reports a connect that failed before it began this way too.
EqItem err_item(fid_t f, int err, int prov_errno, const std::vector<uint8_t>& data) {
  EqItem it{.event = 0, .error = true, .fid = f};
  it.err.fid = f;
  it.err.context = f ? f->context : nullptr;
  it.err.err = err;
  it.err.prov_errno = prov_errno;
  it.err_data = data;
  return it;
}

void Fabric::dispatch_cm() {
  if (!engine->cm_pending()) return;  // every progress pass comes here
  CmEvent ev;
  while (engine->poll_cm(&ev)) {
    if (ev.type == CmEventType::kConnectRequest) {
      auto pit = peps.find(ev.listener);
      if (pit == peps.end() || !pit->second->eq) {
        engine->reject(ev.req, nullptr, 0);
        continue;
      }
      Pep* pep = pit->second;
      fi_info* info = fi_dupinfo(pep->info);
      std::free(info->dest_addr);
      info->dest_addr = std::malloc(sizeof(sockaddr_in));
      const sockaddr_in peer = user_peer(pep, ev.peer);
      std::memcpy(info->dest_addr, &peer, sizeof(sockaddr_in));
      info->dest_addrlen = sizeof(sockaddr_in);
      auto* h = new ConnHandle{{FI_CLASS_CONNREQ, nullptr, &g_handle_ops}, ev.req, pep};
      info->handle = &h->fid;
      pep->eq->push(cm_item(FI_CONNREQ, &pep->fid.fid, info, ev.private_data));
      continue;
    }
    auto eit = eps.find(ev.qp);
    if (eit == eps.end() || !eit->second->eq) continue;
    Ep* ep = eit->second;
    fid_t f = &ep->fid.fid;
    switch (ev.type) {
      case CmEventType::kEstablished:  // ep->peer stays the user's
        ep->eq->push(cm_item(FI_CONNECTED, f, nullptr, ev.private_data));
        break;
      case CmEventType::kRejected:
        ep->eq->push(err_item(f, FI_ECONNREFUSED, 0, ev.private_data));
        break;
      case CmEventType::kUnreachable:
        ep->eq->push(err_item(f, -fi_error(ev.status), ev.status, {}));
        break;
      case CmEventType::kDisconnected:
        if (ev.status == 0) {
          ep->eq->push(cm_item(FI_SHUTDOWN, f, nullptr, {}));
        } else {
          // A Terminate's cause, else the stream's -errno (see errors.cc).
          int prov_errno = ev.term ? static_cast<int>(ev.term) : ev.status;
          ep->eq->push(err_item(f, -fi_error(ev.status), prov_errno, {}));
        }
        break;
      default:
        break;
    }
  }
}

}  // namespace softrdma::prov
