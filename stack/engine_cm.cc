// Connection manager: TCP setup, the MPA Request/Reply exchange (RFC 5044
// §7.1, RFC 6581), hand-over to the QP, and the CM events the application
// sees. Runs under the engine lock (API calls and transport callbacks).
#include <cerrno>
#include <cstring>

#include "stack/common/pass_clock.h"
#include "stack/engine.h"
#include "stack/engine_conn.h"

namespace softrdma {

namespace {

std::chrono::steady_clock::time_point deadline_after(int ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}

int send_frame(net::StreamConn* sc, const std::vector<uint8_t>& f) {
  iovec iov{const_cast<uint8_t*>(f.data()), f.size()};
  const int rc = sc->tx_send(&iov, 1, f.size());
  if (rc == 0) sc->tx_flush();  // the peer waits on this frame: out now, not at a timer
  return rc;
}

}  // namespace

const char* to_string(CmEventType t) {
  switch (t) {
    case CmEventType::kConnectRequest: return "connect_request";
    case CmEventType::kEstablished: return "established";
    case CmEventType::kRejected: return "rejected";
    case CmEventType::kUnreachable: return "unreachable";
    case CmEventType::kDisconnected: return "disconnected";
  }
  return "?";
}

iwarp::MpaParams Engine::our_params(const Qp* qp, const void* pdata, size_t len) const {
  iwarp::MpaParams p;
  p.markers = cfg_.markers;
  p.crc = cfg_.crc;
  p.rev = cfg_.mpa_rev;
  p.p2p = cfg_.rtr != iwarp::Rtr::kNone;
  p.rtr_write = cfg_.rtr == iwarp::Rtr::kWrite;
  p.rtr_read = cfg_.rtr == iwarp::Rtr::kRead;
  p.rtr_send = cfg_.rtr == iwarp::Rtr::kSend;
  if (qp) {
    p.ird = qp->init().ird;
    p.ord = qp->init().ord;
  }
  const auto* b = static_cast<const uint8_t*>(pdata);
  if (b && len) p.private_data.assign(b, b + len);
  return p;
}

void Engine::emit(CmEvent ev) {
  events_.push_back(std::move(ev));
  events_held_.store(events_.size());
}

bool Engine::poll_cm(CmEvent* ev) {
  if (events_held_.load() == 0) return false;  // polled every pass: no lock when empty
  ApiLock g(this);
  if (events_.empty()) return false;
  *ev = std::move(events_.front());
  events_.pop_front();
  events_held_.store(events_.size());
  return true;
}

int Engine::listen(const sockaddr_in& addr, int backlog, Listener** out) {
  ApiLock g(this);
  if (!transport_) return -ENODEV;
  return transport_->listen(addr, backlog, out);
}

sockaddr_in Engine::listen_addr(Listener* l) {
  ApiLock g(this);
  return transport_->listen_addr(l);
}

void Engine::close_listener(Listener* l) {
  ApiLock g(this);
  // Requests not yet accepted die with their listener.
  for (auto it = conns_.begin(); it != conns_.end();) {
    ConnReq* c = it->first;
    if (c->listener == l && c->stage != ConnReq::Stage::kRdma) {
      c->sc->abort();
      transport_->release(c->sc);
      std::erase_if(events_, [c](const CmEvent& e) { return e.req == c; });
      setting_up_.erase(c);
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
  transport_->close_listener(l);
}

int Engine::connect(Qp* qp, const sockaddr_in& peer, const void* pdata, size_t len) {
  ApiLock g(this);
  if (len > kMaxPrivateData) return -EINVAL;
  if (qp->state() != QpState::kIdle || qp->conn()) return -EISCONN;
  if (!transport_) return -ENODEV;
  net::StreamConn* sc = nullptr;
  int rc = transport_->connect(peer, &sc);
  if (rc < 0) return rc;
  auto c = std::make_unique<ConnReq>();
  c->stage = ConnReq::Stage::kConnecting;
  c->sc = sc;
  c->qp = qp;
  c->initiator = true;
  c->sent = our_params(qp, pdata, len);
  c->deadline = deadline_after(cfg_.connect_timeout_ms);
  sc->owner = c.get();
  setting_up_.insert(c.get());
  conns_.emplace(c.get(), std::move(c));
  return 0;
}

int Engine::accept(ConnReq* req, Qp* qp, const void* pdata, size_t len) {
  ApiLock g(this);
  if (len > kMaxPrivateData) return -EINVAL;
  if (!conns_.count(req)) return -ENOENT;
  if (req->stage != ConnReq::Stage::kReqReceived) return -ECONNRESET;
  if (qp->state() != QpState::kIdle || qp->conn()) return -EISCONN;
  iwarp::MpaResult res;
  iwarp::MpaParams rep = iwarp::mpa_answer(req->received, our_params(qp, pdata, len), &res);
  if (int rc = send_frame(req->sc, iwarp::mpa_build(true, rep)); rc < 0) return rc;
  req->qp = qp;
  req->stage = ConnReq::Stage::kRdma;
  qp->start(req->sc, res, false);
  if (res.rtr == iwarp::Rtr::kNone) emit({.type = CmEventType::kEstablished, .qp = qp,
                                         .peer = req->sc->peer_addr()});
  return 0;
}

int Engine::reject(ConnReq* req, const void* pdata, size_t len) {
  ApiLock g(this);
  if (len > kMaxPrivateData) return -EINVAL;
  if (!conns_.count(req)) return -ENOENT;
  if (req->stage != ConnReq::Stage::kReqReceived) return -ECONNRESET;
  iwarp::MpaParams rep = our_params(nullptr, pdata, len);
  rep.rev = req->received.rev;
  rep.reject = true;
  send_frame(req->sc, iwarp::mpa_build(true, rep));
  req->sc->close();
  req->stage = ConnReq::Stage::kClosing;
  return 0;
}

int Engine::disconnect(Qp* qp) {
  ApiLock g(this);
  if (!qp->conn()) return -ENOTCONN;
  qp->close();
  return 0;
}

// --- transport callbacks (engine lock held by progress) ---

void Engine::on_accept(Listener* l, net::StreamConn* sc) {
  auto c = std::make_unique<ConnReq>();
  c->stage = ConnReq::Stage::kAwaitReq;
  c->sc = sc;
  c->listener = l;
  c->reader = std::make_unique<iwarp::MpaReader>(false);
  c->deadline = deadline_after(cfg_.mpa_timeout_ms);
  sc->owner = c.get();
  setting_up_.insert(c.get());
  conns_.emplace(c.get(), std::move(c));
}

void Engine::on_connected(net::StreamConn* sc, int err) {
  auto* c = static_cast<ConnReq*>(sc->owner);
  if (err == 0) {
    c->stage = ConnReq::Stage::kAwaitRep;
    c->deadline = deadline_after(cfg_.mpa_timeout_ms);
    c->reader = std::make_unique<iwarp::MpaReader>(true);
    err = send_frame(sc, iwarp::mpa_build(false, c->sent));
    if (err == 0) return;
  }
  emit({.type = CmEventType::kUnreachable, .qp = c->qp, .status = err});
  drop_conn(c);
}

void Engine::on_readable(net::StreamConn* sc) {
  auto* c = static_cast<ConnReq*>(sc->owner);
  if (c->stage == ConnReq::Stage::kRdma) {
    c->qp->rx_progress();
  } else if (c->stage == ConnReq::Stage::kAwaitReq || c->stage == ConnReq::Stage::kAwaitRep) {
    mpa_input(c);
  } else if (c->stage == ConnReq::Stage::kClosing) {
    net::RxView v[4];
    size_t n = sc->rx_peek(v, 4), used = 0;
    for (size_t i = 0; i < n; ++i) used += v[i].len;
    sc->rx_consume(used);  // a rejected peer's leftovers: discard
  }
}

// The receive entry: in RDMA mode the QP's FPDU machine runs over the
// transport's views in place. The MPA exchange, once per connection, pulls
// (it hands the bytes after its frame to the QP it starts).
size_t Engine::on_data(net::StreamConn* sc, const net::RxView* views, size_t n) {
  auto* c = static_cast<ConnReq*>(sc->owner);
  if (c->stage == ConnReq::Stage::kRdma) return c->qp->rx_input(views, n);
  on_readable(sc);
  return 0;
}

void Engine::on_writable(net::StreamConn* sc) {
  auto* c = static_cast<ConnReq*>(sc->owner);
  if (c->stage == ConnReq::Stage::kRdma) c->qp->tx_progress();
}

void Engine::on_closed(net::StreamConn* sc, int err) {
  auto* c = static_cast<ConnReq*>(sc->owner);
  switch (c->stage) {
    case ConnReq::Stage::kRdma:
      c->qp->rx_progress();  // a Terminate may sit in the last bytes
      c->qp->on_stream_closed(err);
      c->qp->detach_conn();
      break;
    case ConnReq::Stage::kConnecting:
    case ConnReq::Stage::kAwaitRep:
      emit({.type = CmEventType::kUnreachable, .qp = c->qp, .status = err ? err : -ECONNRESET});
      break;
    default:
      break;
  }
  drop_conn(c);
}

// Reads the MPA Request (passive) or Reply (active) off the stream.
void Engine::mpa_input(ConnReq* c) {
  net::RxView v[4];
  size_t n = c->sc->rx_peek(v, 4);
  iwarp::MpaStatus st = iwarp::MpaStatus::kNeedMore;
  size_t used_total = 0;
  for (size_t i = 0; i < n && st == iwarp::MpaStatus::kNeedMore; ++i) {
    size_t used = 0;
    st = c->reader->feed(v[i].data, v[i].len, &used);
    used_total += used;
  }
  c->sc->rx_consume(used_total);  // FPDUs after the frame stay for the QP
  if (st == iwarp::MpaStatus::kNeedMore) return;
  const iwarp::MpaParams& p = c->reader->params();
  if (st != iwarp::MpaStatus::kDone) {
    // Not MPA, or a revision we cannot speak: no connection (RFC 5044 §7.1.3).
    if (c->initiator) emit({.type = CmEventType::kUnreachable, .qp = c->qp, .status = -EPROTO});
    c->sc->abort();
    drop_conn(c);
    return;
  }
  if (!c->initiator) {
    c->received = p;
    c->stage = ConnReq::Stage::kReqReceived;
    emit({.type = CmEventType::kConnectRequest, .listener = c->listener, .req = c,
          .peer = c->sc->peer_addr(), .peer_ird = p.ird, .peer_ord = p.ord,
          .private_data = p.private_data});
    return;
  }
  if (p.reject) {
    emit({.type = CmEventType::kRejected, .qp = c->qp, .status = -ECONNREFUSED,
          .private_data = p.private_data});
    c->sc->close();
    c->stage = ConnReq::Stage::kClosing;
    return;
  }
  iwarp::MpaResult res;
  if (!iwarp::mpa_settle(c->sent, p, &res)) {
    emit({.type = CmEventType::kUnreachable, .qp = c->qp, .status = -EPROTO});
    c->sc->abort();
    drop_conn(c);
    return;
  }
  c->stage = ConnReq::Stage::kRdma;
  emit({.type = CmEventType::kEstablished, .qp = c->qp, .peer = c->sc->peer_addr(),
        .peer_ird = p.ird, .peer_ord = p.ord, .private_data = p.private_data});
  c->qp->start(c->sc, res, true);
}

void Engine::drop_conn(ConnReq* c) {
  if (c->qp && c->qp->conn() == c->sc) c->qp->detach_conn();
  if (c->sc) transport_->release(c->sc);
  std::erase_if(events_, [c](const CmEvent& e) { return e.req == c; });
  setting_up_.erase(c);
  conns_.erase(c);
}

void Engine::check_timeouts() {
  const std::chrono::steady_clock::time_point now{std::chrono::nanoseconds(pass_clock::now_ns())};
  for (auto it = setting_up_.begin(); it != setting_up_.end();) {
    ConnReq* c = *it;
    const bool waiting = c->stage == ConnReq::Stage::kConnecting ||
                         c->stage == ConnReq::Stage::kAwaitRep ||
                         c->stage == ConnReq::Stage::kAwaitReq;
    if (!waiting) {  // stages only move forward: this one is done waiting
      it = setting_up_.erase(it);
      continue;
    }
    ++it;
    if (now < c->deadline) continue;
    if (c->initiator) emit({.type = CmEventType::kUnreachable, .qp = c->qp, .status = -ETIMEDOUT});
    c->sc->abort();
    drop_conn(c);  // erases c from setting_up_: it already points past it
  }
}

// --- QP owner callbacks ---

void Engine::on_qp_error(Qp* qp) {
  emit({.type = CmEventType::kDisconnected, .qp = qp, .status = qp->error_status(),
        .term = qp->error_term()});
}

void Engine::on_qp_ready(Qp* qp) {
  // Responder: the initiator's RTR arrived, so the connection is usable.
  for (auto& [c, owned] : conns_) {
    if (c->qp == qp && !c->initiator)
      emit({.type = CmEventType::kEstablished, .qp = qp, .peer = c->sc->peer_addr()});
  }
}

}  // namespace softrdma
