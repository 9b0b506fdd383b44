// Active endpoints (FI_EP_MSG): binding, enabling (an engine QP), connect,
// accept and shutdown. The data calls are in msg.cc, rma.cc and atomic.cc.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "prov/prov.h"
#include "stack/common/settings.h"
#include "stack/net/host_addr.h"

namespace softrdma::prov {

namespace {

int ep_close(fid* f) {
  auto* ep = from_fid<Ep>(f);
  Core& core = ep->dom->core();
  std::lock_guard g(core.mu);
  if (ep->req) core.engine->reject(ep->req, nullptr, 0);  // taken, never accepted
  ep->req = nullptr;
  if (ep->rdm) rdm_close(ep);
  if (ep->qp) {
    core.eps.erase(ep->qp);
    core.engine->destroy_qp(ep->qp);  // flushes: pending ops complete as canceled
  }
  if (ep->eq) ep->eq->purge(f);  // no event may name this endpoint again
  fi_freeinfo(ep->info);
  ep->dom->children.drop();
  delete ep;
  return 0;
}

int ep_bind(fid* f, fid* bf, uint64_t flags) {
  auto* ep = from_fid<Ep>(f);
  if (ep->enabled) return -FI_EOPBADSTATE;
  switch (bf->fclass) {
    case FI_CLASS_EQ:
      ep->eq = from_fid<Eq>(bf);
      return 0;
    case FI_CLASS_AV: {
      if (!ep->rdm || ep->rdm->av) return -FI_EINVAL;  // connectionless endpoints, one AV
      auto* av = from_fid<Av>(bf);
      if (av->dom != ep->dom) return -FI_EINVAL;
      ep->rdm->av = av;
      av->users.add();
      return 0;
    }
    case FI_CLASS_CQ:
      if (flags & FI_TRANSMIT) {
        ep->tx_cq = from_fid<Cq>(bf);
        ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
      }
      if (flags & FI_RECV) {
        ep->rx_cq = from_fid<Cq>(bf);
        ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
      }
      return (flags & (FI_TRANSMIT | FI_RECV)) ? 0 : -FI_EINVAL;
    case FI_CLASS_CNTR: {
      // No FI_RMA_EVENT (attr.cc): the engine reports no remote access.
      if (flags & (FI_REMOTE_READ | FI_REMOTE_WRITE)) return -FI_EINVAL;
      auto* c = from_fid<Cntr>(bf);
      if (flags & FI_SEND) ep->send_cntr = c;
      if (flags & FI_RECV) ep->recv_cntr = c;
      if (flags & FI_READ) ep->read_cntr = c;
      if (flags & FI_WRITE) ep->write_cntr = c;
      return 0;
    }
    default:
      return -FI_EINVAL;
  }
}

// The engine QP is created at enable, when the CQs are known (an RDM
// endpoint's QPs as it connects, rdm_ep.cc).
int ep_enable(Ep* ep) {
  Core& core = ep->dom->core();
  if (ep->enabled) return 0;
  if (!ep->tx_cq || !ep->rx_cq) {
    if (!ep->dom->sink) {
      fid_cq* sink;
      fi_cq_attr attr{};
      attr.format = FI_CQ_FORMAT_CONTEXT;
      if (int rc = cq_open(&ep->dom->fid, &attr, &sink, nullptr); rc != 0) return rc;
      ep->dom->sink = from_fid<Cq>(sink);
      ep->dom->sink->sink = true;
    }
  }
  if (ep->rdm) {
    if (int rc = rdm_enable(ep); rc != 0) return rc;
    ep->enabled = true;
    return 0;
  }
  ep->qp = core.engine->create_qp(qp_init(ep));
  if (!ep->qp) return -FI_ENOMEM;
  core.eps[ep->qp] = ep;
  ep->enabled = true;
  return 0;
}

int ep_control(fid* f, int command, void* arg) {
  auto* ep = from_fid<Ep>(f);
  std::lock_guard g(ep->dom->core().mu);
  switch (command) {
    case FI_ENABLE:
      return ep_enable(ep);
    case FI_GETOPSFLAG: {
      uint64_t* flags = static_cast<uint64_t*>(arg);
      *flags = (*flags & FI_TRANSMIT) ? ep->tx_flags : ep->rx_flags;
      return 0;
    }
    case FI_SETOPSFLAG: {
      uint64_t* flags = static_cast<uint64_t*>(arg);
      if (*flags & FI_TRANSMIT) ep->tx_flags = *flags & ~FI_TRANSMIT;
      if (*flags & FI_RECV) ep->rx_flags = *flags & ~FI_RECV;
      return 0;
    }
    default:
      return -FI_ENOSYS;
  }
}

// An RDM endpoint's receives wait in the provider and can be taken back;
// other posted work only ends by completion.
ssize_t ep_cancel(fid_t f, void* ctx) {
  auto* ep = from_fid<Ep>(f);
  return ep->rdm ? rdm_cancel(ep, ctx) : -FI_ENOENT;
}

// The local address the kernel would send from to reach ip (on this host,
// an own address is its own source).
in_addr route_source(in_addr ip) {
  in_addr src = ip;
  net::kernel_source_for(ip, &src);
  return src;
}

// What the user named (the info's source), until there is a connection.
// Then the connection's own address, unless the transport reached the peer
// at another address than the user sees it at (the DPDK mesh's per-process
// addresses): then the address on the user's route, with the connection's
// port. For an accepted endpoint that is the listener's named address.
sockaddr_in ep_name(const Ep* ep) {
  sockaddr_in a = local_addr();
  if (ep->info->src_addr && ep->info->src_addrlen >= sizeof(sockaddr_in))
    std::memcpy(&a, ep->info->src_addr, sizeof(a));
  sockaddr_in local{}, peer{};
  if (!ep->qp || !ep->dom->core().engine->qp_addresses(ep->qp, &local, &peer)) return a;
  if (peer.sin_addr.s_addr == ep->peer.sin_addr.s_addr) return local;
  if (!ep->accepted || a.sin_addr.s_addr == htonl(INADDR_ANY))
    a.sin_addr = route_source(ep->peer.sin_addr);
  a.sin_port = local.sin_port;
  return a;
}

int ep_getname(fid_t f, void* addr, size_t* len) {
  auto* ep = from_fid<Ep>(f);
  std::lock_guard g(ep->dom->core().mu);
  if (ep->rdm) return ep->enabled ? copy_name(ep->rdm->name, addr, len) : -FI_EOPBADSTATE;
  return copy_name(ep_name(ep), addr, len);
}

int ep_getpeer(fid_ep* f, void* addr, size_t* len) {
  return copy_name(from_fid<Ep>(f)->peer, addr, len);
}

int ep_setname(fid_t, void*, size_t) { return -FI_ENOSYS; }


// What a connection attempt can come to (the kernel's connect(2) says these
// after the SYN): reported on the EQ, as when the stream fails later.
bool is_connect_outcome(int rc) {
  return rc == -ECONNREFUSED || rc == -ENETUNREACH || rc == -EHOSTUNREACH || rc == -ETIMEDOUT;
}

int ep_connect(fid_ep* f, const void* addr, const void* param, size_t len) {
  auto* ep = from_fid<Ep>(f);
  if (len > max_cm_data()) return -FI_EINVAL;
  std::lock_guard g(ep->dom->core().mu);
  if (!ep->enabled || !ep->eq) return -FI_EOPBADSTATE;
  const void* dst = addr ? addr : ep->info->dest_addr;
  if (!dst) return -FI_EINVAL;
  std::memcpy(&ep->peer, dst, sizeof(sockaddr_in));
  const int rc = connect_with_retry(ep, ep->qp, ep->peer, param, len);
  if (!is_connect_outcome(rc)) return fi_error(rc);
  // Found out before a stream existed (the DPDK mesh knows who listens on
  // this host), but an outcome all the same: an EQ error entry, as over
  // kernel TCP, with the reason for fi_eq_strerror.
  ep->eq->push(err_item(&ep->fid.fid, -fi_error(rc), rc, {}));
  return 0;
}

int ep_accept(fid_ep* f, const void* param, size_t len) {
  auto* ep = from_fid<Ep>(f);
  if (len > max_cm_data()) return -FI_EINVAL;
  std::lock_guard g(ep->dom->core().mu);
  if (!ep->enabled || !ep->req || !ep->eq) return -FI_EOPBADSTATE;
  int rc = ep->dom->core().engine->accept(ep->req, ep->qp, param, len);
  ep->req = nullptr;
  return fi_error(rc);
}

int ep_shutdown(fid_ep* f, uint64_t) {
  auto* ep = from_fid<Ep>(f);
  std::lock_guard g(ep->dom->core().mu);
  if (!ep->qp) return -FI_ENOTCONN;
  int rc = ep->dom->core().engine->disconnect(ep->qp);
  return rc == -ENOTCONN ? 0 : fi_error(rc);
}

int no_listen(fid_pep*) { return -FI_ENOSYS; }
int no_reject(fid_pep*, fid_t, const void*, size_t) { return -FI_ENOSYS; }

// FI_OPT_MIN_MULTI_RECV: an RDM endpoint's multi-receive buffers take no
// more messages once less than this is left.
int ep_setopt(fid_t f, int level, int name, const void* val, size_t len) {
  auto* ep = from_fid<Ep>(f);
  if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV || !ep->rdm)
    return -FI_ENOPROTOOPT;
  if (val == nullptr || len != sizeof(size_t)) return -FI_EINVAL;
  std::lock_guard g(ep->dom->core().mu);
  std::memcpy(&ep->rdm->min_multi_recv, val, sizeof(size_t));
  return 0;
}

int ep_getopt(fid_t f, int level, int name, void* val, size_t* len) {
  auto* ep = from_fid<Ep>(f);
  if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV || !ep->rdm)
    return cm_getopt(f, level, name, val, len);
  if (val == nullptr || len == nullptr || *len < sizeof(size_t)) return -FI_ETOOSMALL;
  std::lock_guard g(ep->dom->core().mu);
  std::memcpy(val, &ep->rdm->min_multi_recv, sizeof(size_t));
  *len = sizeof(size_t);
  return 0;
}

fi_ops g_ep_fi_ops = {sizeof(fi_ops), ep_close, ep_bind, ep_control, no_ops_open, nullptr, nullptr};
fi_ops_ep g_ep_ops = {sizeof(fi_ops_ep), ep_cancel, ep_getopt, ep_setopt, no_ctx, no_rctx,
                      no_left, no_left};
fi_ops_cm g_ep_cm_ops = {sizeof(fi_ops_cm), ep_setname, ep_getname, ep_getpeer, ep_connect,
                         no_listen, ep_accept, no_reject, ep_shutdown, no_join};

}  // namespace

QpInit qp_init(Ep* ep) {
  Cq* tx = ep->tx_cq ? ep->tx_cq : ep->dom->sink;
  Cq* rx = ep->rx_cq ? ep->rx_cq : ep->dom->sink;
  if (ep->rdm) tx = rx = ep->rdm->work;
  return QpInit{.pd = ep->dom->pd, .send_cq = tx->ecq, .recv_cq = rx->ecq,
                .sq_depth = static_cast<uint32_t>(ep->info->tx_attr->size),
                .rq_depth = static_cast<uint32_t>(ep->info->rx_attr->size)};
}

// On the DPDK mesh the first connect to a process sets up a memif link and
// the engine gives each attempt a few seconds. MPI ranks start together and
// connect to each other at once, on a host other jobs may load: both ends'
// set-up (memif probe, socket handshake on EAL's interrupt thread) can take
// longer, and rxm would turn the -FI_ETIMEDOUT into a failed MPI call.
// The half-made link stays and the peer's answer is still queued, so a
// second attempt picks up where the first stopped. A dead or unknown peer
// fails at once (refused, or unreachable), so this never waits on a
// process that left.
// Open: each attempt blocks in the mesh's link set-up (up to 10 s, holding
// the engine's API lock), so one slow link stalls the process's other
// connections; an asynchronous first connect would not.
int connect_with_retry(Ep* ep, Qp* qp, const sockaddr_in& peer, const void* param, size_t len) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(settings::get_int(settings::Id::kConnectTimeoutMs));
  for (;;) {
    int rc = ep->dom->core().engine->connect(qp, peer, param, len);
    if (rc != -ETIMEDOUT || std::chrono::steady_clock::now() >= end) return rc;
    FI_INFO(&g_prov, FI_LOG_EP_CTRL, "link to the peer not up yet; connecting again\n");
  }
}

int ep_open(fid_domain* domain, fi_info* info, fid_ep** out, void* context) {
  if (!info || !info->ep_attr || !info->tx_attr || !info->rx_attr ||
      (info->ep_attr->type != FI_EP_MSG && info->ep_attr->type != FI_EP_RDM))
    return -FI_EINVAL;
  auto* ep = new Ep{};
  ep->dom = from_fid<Domain>(domain);
  ep->dom->children.add();
  ep->info = fi_dupinfo(info);
  ep->info->handle = nullptr;
  ep->tx_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
  ep->rx_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
  if (info->handle && info->handle->fclass == FI_CLASS_CONNREQ) {
    auto* h = reinterpret_cast<ConnHandle*>(info->handle);
    ep->req = h->req;
    ep->accepted = true;
    fi_close(&h->fid);  // the request now belongs to this endpoint
    info->handle = nullptr;
  }
  if (info->dest_addr && info->dest_addrlen >= sizeof(sockaddr_in))
    std::memcpy(&ep->peer, info->dest_addr, sizeof(sockaddr_in));
  if (info->ep_attr->type == FI_EP_RDM) ep->rdm = std::make_unique<RdmConns>();
  ep->fid.fid.fclass = FI_CLASS_EP;
  ep->fid.fid.context = context;
  ep->fid.fid.ops = &g_ep_fi_ops;
  ep->fid.ops = &g_ep_ops;
  ep->fid.cm = &g_ep_cm_ops;
  ep->fid.msg = ep->rdm ? &g_rdm_msg_ops : &g_msg_ops;
  ep->fid.rma = &g_rma_ops;
  ep->fid.tagged = ep->rdm ? &g_rdm_tagged_ops : &g_tagged_ops;
  ep->fid.atomic = &g_atomic_ops;
  *out = &ep->fid;
  return 0;
}

}  // namespace softrdma::prov
