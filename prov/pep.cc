// Passive endpoints: listen on the process's engine, hand out FI_CONNREQ
// events (see Core::dispatch_cm), reject with private data.
#include <cstdlib>
#include <cstring>

#include "prov/prov.h"
#include "stack/net/rendezvous.h"

namespace softrdma::prov {

namespace {

int pep_close(fid* f) {
  auto* pep = from_fid<Pep>(f);
  std::lock_guard g(pep->core().mu);
  if (pep->listener) {
    pep->core().peps.erase(pep->listener);
    pep->core().engine->close_listener(pep->listener);
  }
  if (pep->eq) pep->eq->purge(f);
  fi_freeinfo(pep->info);
  pep->fab->children.drop();
  delete pep;
  return 0;
}

int pep_bind(fid* f, fid* bf, uint64_t) {
  if (bf->fclass != FI_CLASS_EQ) return -FI_EINVAL;
  from_fid<Pep>(f)->eq = from_fid<Eq>(bf);
  return 0;
}

bool unnamed(in_addr a) {
  return a.s_addr == htonl(INADDR_ANY) || (ntohl(a.s_addr) >> 24) == 127;
}

int pep_listen(fid_pep* f) {
  auto* pep = from_fid<Pep>(f);
  std::lock_guard g(pep->core().mu);
  if (pep->listener) return 0;
  if (!pep->eq) return -FI_ENOEQ;
  if (int rc = listen_named(pep->core(), &pep->addr, &pep->listener, &pep->elsewhere); rc != 0)
    return rc;
  // Connection requests carry this info: its source is where we listen.
  std::free(pep->info->src_addr);
  pep->info->src_addr = std::malloc(sizeof(sockaddr_in));
  std::memcpy(pep->info->src_addr, &pep->addr, sizeof(sockaddr_in));
  pep->info->src_addrlen = sizeof(sockaddr_in);
  pep->core().peps[pep->listener] = pep;
  return 0;
}

int pep_getname(fid_t f, void* addr, size_t* len) {
  return copy_name(from_fid<Pep>(f)->addr, addr, len);
}

int pep_setname(fid_t f, void* addr, size_t len) {
  auto* pep = from_fid<Pep>(f);
  if (pep->listener) return -FI_EBUSY;
  if (len < sizeof(sockaddr_in) || static_cast<sockaddr*>(addr)->sa_family != AF_INET)
    return -FI_EINVAL;
  std::memcpy(&pep->addr, addr, sizeof(sockaddr_in));
  return 0;
}

int pep_reject(fid_pep* f, fid_t handle, const void* param, size_t len) {
  auto* pep = from_fid<Pep>(f);
  if (len > max_cm_data()) return -FI_EINVAL;
  // No request to reject: ofi_rxm rejects with the fi_info whose handle
  // fi_endpoint already took (the endpoint's close ends that request).
  if (handle == nullptr || handle->fclass != FI_CLASS_CONNREQ) return -FI_EINVAL;
  std::lock_guard g(pep->core().mu);
  auto* h = reinterpret_cast<ConnHandle*>(handle);
  int rc = pep->core().engine->reject(h->req, param, len);
  fi_close(&h->fid);
  return fi_error(rc);
}

ssize_t no_cancel(fid_t, void*) { return -FI_ENOSYS; }
int no_getpeer(fid_ep*, void*, size_t*) { return -FI_ENOSYS; }
int no_connect(fid_ep*, const void*, const void*, size_t) { return -FI_ENOSYS; }
int no_accept(fid_ep*, const void*, size_t) { return -FI_ENOSYS; }
int no_shutdown(fid_ep*, uint64_t) { return -FI_ENOSYS; }

fi_ops g_pep_fi_ops = {sizeof(fi_ops), pep_close, pep_bind, no_control, no_ops_open, nullptr, nullptr};
fi_ops_ep g_pep_ep_ops = {sizeof(fi_ops_ep), no_cancel, cm_getopt, no_setopt, no_ctx, no_rctx,
                          no_left, no_left};
fi_ops_cm g_pep_cm_ops = {sizeof(fi_ops_cm), pep_setname, pep_getname, no_getpeer, no_connect,
                          pep_listen, no_accept, pep_reject, no_shutdown, no_join};

}  // namespace

int listen_named(Core& core, sockaddr_in* addr, Listener** out, bool* elsewhere) {
  int rc = core.engine->listen(*addr, 1024, out);
  if (rc < 0) return fi_error(rc);
  const sockaddr_in bound = core.engine->listen_addr(*out);
  *elsewhere = bound.sin_addr.s_addr != addr->sin_addr.s_addr;
  addr->sin_port = bound.sin_port;
  // Named nothing (wildcard, loopback) but answering on the host's own
  // address too (the host path): peers elsewhere must be told that one, as
  // the tcp provider names its interface's address.
  if (unnamed(addr->sin_addr) && !unnamed(bound.sin_addr) &&
      !net::Rendezvous::is_virtual(bound.sin_addr))
    addr->sin_addr = bound.sin_addr;
  return 0;
}

sockaddr_in user_peer(const Pep* pep, const sockaddr_in& conn_peer) {
  if (!pep->elsewhere || !net::Rendezvous::is_virtual(conn_peer.sin_addr)) return conn_peer;
  // The mesh reaches only processes on this host, which connect to the
  // listener's address (a wildcard one: at loopback) from that address.
  sockaddr_in a = pep->addr;
  if (a.sin_addr.s_addr == htonl(INADDR_ANY)) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = conn_peer.sin_port;
  return a;
}

int pep_open(fid_fabric* fabric, fi_info* info, fid_pep** out, void* context) {
  auto* pep = new Pep{};
  pep->fab = from_fid<Fabric>(fabric);
  pep->fab->children.add();
  pep->info = fi_dupinfo(info);
  pep->addr = local_addr();
  if (info && info->src_addr && info->src_addrlen >= sizeof(sockaddr_in))
    std::memcpy(&pep->addr, info->src_addr, sizeof(sockaddr_in));
  pep->fid.fid.fclass = FI_CLASS_PEP;
  pep->fid.fid.context = context;
  pep->fid.fid.ops = &g_pep_fi_ops;
  pep->fid.ops = &g_pep_ep_ops;
  pep->fid.cm = &g_pep_cm_ops;
  *out = &pep->fid;
  return 0;
}

}  // namespace softrdma::prov
