// Native FI_EP_RDM endpoints: the connections under them (their messages
// are in rdm_datapath.cc). An endpoint listens at enable, and fi_getname
// hands out where. Its first operation to a peer (an AV entry) makes a QP
// and connects to the peer's name with an RdmHello (rdm_wire.h) as the MPA
// private data; the operation is posted at once and goes out when the
// connection is up, as are those after it. A peer's connection request is
// accepted if it carries a hello. A connection that fails or ends is
// dropped, its outstanding operations completing in error, and the next
// operation to that peer connects again. RMA and atomics need nothing of
// the target's endpoint but its progress. An endpoint sends to a peer that
// connected to it on that connection; two that start at once each use the
// one they made.
#include <arpa/inet.h>

#include <cstring>

#include "prov/prov.h"
#include "prov/rdm_wire.h"

namespace softrdma::prov {

namespace {

// Completions of the endpoint's connections settled at once; more than this
// between two progress passes wait in the engine's overflow, none is lost.
constexpr size_t kWorkCqSize = 1024;

void drop(Ep* ep, Qp* qp) {
  RdmConns& r = *ep->rdm;
  std::erase_if(r.out, [qp](const auto& e) { return e.second->qp == qp; });
  r.in.erase(qp);
  r.serving.erase(qp);
  Core& core = ep->dom->core();
  core.eps.erase(qp);
  core.engine->destroy_qp(qp);  // outstanding operations complete as canceled
  rdm_link_close(ep, qp);
}

}  // namespace

int rdm_enable(Ep* ep) {
  RdmConns& r = *ep->rdm;
  if (!r.av) return -FI_ENOAV;
  Core& core = ep->dom->core();
  r.name = local_addr();
  if (ep->info->src_addr && ep->info->src_addrlen >= sizeof(sockaddr_in))
    std::memcpy(&r.name, ep->info->src_addr, sizeof(r.name));
  bool elsewhere = false;
  fid_cq* work;
  fi_cq_attr attr{};
  attr.size = kWorkCqSize;
  if (int rc = cq_open(&ep->dom->fid, &attr, &work, nullptr); rc != 0) return rc;
  r.work = from_fid<Cq>(work);
  r.work->forward = true;
  if (int rc = listen_named(core, &r.name, &r.listener, &elsewhere); rc != 0) {
    fi_close(&work->fid);
    r.work = nullptr;
    return rc;
  }
  core.rdm_listeners[r.listener] = ep;
  return 0;
}

void rdm_close(Ep* ep) {
  RdmConns& r = *ep->rdm;
  Core& core = ep->dom->core();
  if (r.listener) {
    core.rdm_listeners.erase(r.listener);
    core.engine->close_listener(r.listener);
  }
  // What completed before, and what the connections' end cancels, is
  // handled while the endpoint still exists (Cq::settle).
  for (Cq* cq : core.cqs) cq->settle();
  while (!r.out.empty()) drop(ep, r.out.begin()->second->qp);
  while (!r.in.empty()) drop(ep, *r.in.begin());
  for (Cq* cq : core.cqs) cq->settle();
  if (r.work) fi_close(&r.work->fid.fid);
  if (r.av) r.av->users.drop();
}

Qp* target_qp(Ep* ep, fi_addr_t dest, int* err) {
  if (!ep->rdm) {
    if (!ep->qp) *err = -FI_EOPBADSTATE;
    return ep->qp;
  }
  RdmLink* l = target_link(ep, dest, err);
  return l ? l->qp : nullptr;
}

RdmLink* target_link(Ep* ep, fi_addr_t dest, int* err) {
  RdmConns& r = *ep->rdm;
  if (!ep->enabled) {
    *err = -FI_EOPBADSTATE;
    return nullptr;
  }
  if (auto it = r.out.find(dest); it != r.out.end()) return it->second;
  const sockaddr_in* peer = av_name(r.av, dest);
  if (!peer) {
    *err = -FI_EINVAL;  // not an address of the endpoint's AV
    return nullptr;
  }
  // A connection the peer made to us serves both ways: one TCP stream
  // carries the data and the acknowledgements of both directions.
  for (Qp* in : r.in) {
    RdmLink* l = r.links.at(in).get();
    if (l->name.sin_addr.s_addr == peer->sin_addr.s_addr && l->name.sin_port == peer->sin_port &&
        !r.serving.count(in)) {
      r.out[dest] = l;
      r.serving.insert(in);
      return l;
    }
  }
  Core& core = ep->dom->core();
  Qp* qp = core.engine->create_qp(qp_init(ep));
  if (!qp) {
    *err = -FI_ENOMEM;
    return nullptr;
  }
  // Its buffers are posted before the peer can send; credits come with
  // the peer's hello when the connection is up.
  if (int rc = rdm_link_open(ep, qp, dest, *peer, 0); rc != 0) {
    core.engine->destroy_qp(qp);
    rdm_link_close(ep, qp);
    *err = rc;
    return nullptr;
  }
  const RdmHello hello = rdm_hello(ntohl(r.name.sin_addr.s_addr), ntohs(r.name.sin_port),
                                   rdm_link_buffers(ep));
  if (int rc = connect_with_retry(ep, qp, *peer, &hello, sizeof(hello)); rc != 0) {
    core.engine->destroy_qp(qp);
    rdm_link_close(ep, qp);
    char name[INET_ADDRSTRLEN];
    FI_WARN(&g_prov, FI_LOG_EP_CTRL, "RDM endpoint: no connection to %s:%u: %s\n",
            inet_ntop(AF_INET, &peer->sin_addr, name, sizeof(name)), ntohs(peer->sin_port),
            fi_strerror(-fi_error(rc)));
    *err = fi_error(rc);
    return nullptr;
  }
  core.eps[qp] = ep;
  RdmLink* l = r.links.at(qp).get();
  r.out[dest] = l;
  return l;
}

void rdm_conn_request(Ep* ep, const CmEvent& ev) {
  Core& core = ep->dom->core();
  RdmHello hello;
  if (!rdm_hello_ok(ev.private_data.data(), ev.private_data.size(), &hello)) {
    FI_INFO(&g_prov, FI_LOG_EP_CTRL, "RDM endpoint: refused a connection without a hello\n");
    core.engine->reject(ev.req, nullptr, 0);
    return;
  }
  Qp* qp = core.engine->create_qp(qp_init(ep));
  if (!qp) {
    core.engine->reject(ev.req, nullptr, 0);
    return;
  }
  sockaddr_in name{};
  name.sin_family = AF_INET;
  name.sin_addr.s_addr = htonl(hello.addr.get());
  name.sin_port = htons(hello.port.get());
  RdmConns& r = *ep->rdm;
  const RdmHello ours = rdm_hello(ntohl(r.name.sin_addr.s_addr), ntohs(r.name.sin_port),
                                  rdm_link_buffers(ep));
  if (rdm_link_open(ep, qp, FI_ADDR_NOTAVAIL, name, hello.credits.get()) != 0) {
    core.engine->reject(ev.req, nullptr, 0);
    core.engine->destroy_qp(qp);
    rdm_link_close(ep, qp);
    return;
  }
  if (core.engine->accept(ev.req, qp, &ours, sizeof(ours)) != 0) {
    core.engine->destroy_qp(qp);
    rdm_link_close(ep, qp);
    return;
  }
  core.eps[qp] = ep;
  ep->rdm->in.insert(qp);
}

void rdm_conn_event(Ep* ep, const CmEvent& ev) {
  switch (ev.type) {
    case CmEventType::kEstablished: {
      // A connection we made: the acceptor's hello says how many messages
      // it can take.
      RdmHello hello;
      if (ep->rdm->in.count(ev.qp) != 0) break;
      if (rdm_hello_ok(ev.private_data.data(), ev.private_data.size(), &hello))
        rdm_link_credits(ep, ev.qp, hello.credits.get());
      else
        rdm_link_end(ep, ev.qp, "its reply is not a hello");
      break;
    }
    case CmEventType::kRejected:
    case CmEventType::kUnreachable:
    case CmEventType::kDisconnected:
      FI_INFO(&g_prov, FI_LOG_EP_CTRL, "RDM endpoint: a connection ended (status %d)\n",
              ev.status);
      drop(ep, ev.qp);
      break;
    default:
      break;
  }
}

}  // namespace softrdma::prov
