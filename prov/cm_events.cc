// The engine's CM events -> EQ entries, routed by the listener or QP they
// name to the passive or active endpoint that owns it, whichever fabric
// opened that endpoint.
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

}  // namespace

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

void Core::dispatch_cm() {
  if (!engine->cm_pending()) return;  // every progress pass comes here
  CmEvent ev;
  while (engine->poll_cm(&ev)) {
    if (ev.type == CmEventType::kConnectRequest) {
      if (auto rit = rdm_listeners.find(ev.listener); rit != rdm_listeners.end()) {
        rdm_conn_request(rit->second, ev);
        continue;
      }
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
    if (eit != eps.end() && eit->second->rdm) {
      rdm_conn_event(eit->second, ev);
      continue;
    }
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
