// Messages between native FI_EP_RDM endpoints (the protocol is in
// rdm_wire.h): an endpoint sends to a peer on the connection it made there
// (rdm_ep.cc) and receives on the ones its peers made to it; control
// messages go back on the connection they answer.
//
// Receive: every connection has kRdmBuffers eager buffers posted; an RDMAP
// Send (or the Immediate Data of fi_writedata, RFC 7306) lands in one (the
// engine places it), the endpoint's CQ hands the completion to rdm_internal, the header is checked, the message is matched
// against the posted receives (rdm_match.h) and copied into the receive's
// buffers, or kept until one is posted; the buffer is posted again. A long
// message is a rendezvous: the target reads the payload with an RDMA Read
// straight into the matched receive, then says kRendezvousDone.
// FI_DELIVERY_COMPLETE: a send completes once its message is in the receive
// it matched (fi_cq(3)): kRendezvousDone says so for a long one, and the
// target answers an eager one sent with kRdmAckDelivery with kDeliveryAck.
//
// A multi-receive buffer (FI_MULTI_RECV, fi_msg(3)) takes message after
// message, each as a receive of its own (a slice) at the next free place in
// it; once less than FI_OPT_MIN_MULTI_RECV is left it takes no more, and the
// last of its slices to complete says FI_MULTI_RECV: the buffer is free.
//
// Credits: a sender sends only into buffers the receiver has posted for it.
// Each message takes one of the peer's; every header gives back those this
// end posted again since its last header, and a kCredit message does so
// when half of them are owed with nothing else going that way. Messages
// leave the last credit for kCredit, so credits can always come back. A
// fast sender gets -FI_EAGAIN; it never ends a connection.
//
// A peer that breaks the protocol (rdm_wire.h's checks, more credits than
// it could have given, a finish for a message it was not sent) loses its
// connection: it is disconnected, and what it carried fails (rdm_ep.cc).
#include <arpa/inet.h>

#include <cstring>

#include "prov/prov.h"
#include "prov/sge.h"
#include "stack/common/settings.h"

namespace softrdma::prov {

namespace {

constexpr size_t kSlot = sizeof(RdmHeader) + kRdmEager;
constexpr size_t kHeader = sizeof(RdmHeader);

// A message no receive took yet, or one being delivered.
struct Arrived {
  Qp* qp = nullptr;
  uint64_t link = 0;  // RdmLink::serial
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  sockaddr_in name{};  // where the sender listens: src once the AV has it
  uint16_t flags = 0;
  uint64_t tag = 0, cq_data = 0, msg_id = 0, size = 0;
  bool rendezvous = false;
  uint32_t stag = 0;
  uint64_t addr = 0;
  std::vector<uint8_t> data;       // a kept eager payload
  const uint8_t* payload = nullptr;  // where the eager payload is now
  Op* held = nullptr;                // the buffer it was left in, not posted again
  size_t cost = 0;                   // what it adds to RdmLink::kept_bytes when kept
};

Engine& engine(Ep* ep) { return *ep->dom->core().engine; }

RdmLink* link_of(Ep* ep, Qp* qp) {
  auto it = ep->rdm->links.find(qp);
  return it == ep->rdm->links.end() ? nullptr : it->second.get();
}

// The peer broke the protocol: nothing more of it is read, and the
// connection ends (its kDisconnected drops the link).
void end_link(Ep* ep, RdmLink& l, const char* why) {
  char name[INET_ADDRSTRLEN];
  FI_WARN(&g_prov, FI_LOG_EP_DATA, "RDM endpoint: the peer at %s:%u broke the protocol (%s): "
          "disconnecting\n", inet_ntop(AF_INET, &l.name.sin_addr, name, sizeof(name)),
          ntohs(l.name.sin_port), why);
  l.ending = true;
  engine(ep).disconnect(l.qp);
}

uint64_t g_serial = 0;  // under the core's lock

int post_buffer(Ep* ep, RdmLink& l, Op* b) {
  RecvWr wr{.wr_id = reinterpret_cast<uint64_t>(b), .num_sge = 1};
  wr.sg_list[0] = Sge{reinterpret_cast<uint64_t>(b->buf), static_cast<uint32_t>(kSlot), 0};
  return engine(ep).post_recv(l.qp, wr);
}

// Hands out a finished operation: counted, and reported unless it is a
// success nobody asked to see.
void complete(Op* op, Cq* cq, fi_cq_err_entry e, int err, fi_addr_t src) {
  cntr_add(op->cntr, err != 0);
  if (cq && (err != 0 || op->report)) {
    e.op_context = op->context;
    e.err = err;
    cq->push(CqItem{e, err != 0, src});
  }
  free_op(op);
}

void fail(Op* op, Cq* cq, int err) {
  fi_cq_err_entry e{};
  e.flags = op->flags;
  e.buf = op->buf;
  complete(op, cq, e, err, FI_ADDR_NOTAVAIL);
}

// Posts one message: the header, then extra (a kRendezvous's target) or the
// payload: the carrier's iovecs, or an inject's copy already in
// carrier->inject behind room for the header. carrier is the record the
// Send completes to.
int send_message(Ep* ep, RdmLink& l, Op* carrier, RdmOp op, uint16_t flags, uint64_t tag,
                 uint64_t cq_data, uint64_t msg_id, uint64_t size, const void* extra,
                 size_t extra_len) {
  if (carrier->inject.empty()) carrier->inject.resize(kHeader + extra_len);
  rdm_put_header(carrier->inject.data(), op, flags, l.owed, tag, cq_data, msg_id, size);
  if (extra_len) std::memcpy(carrier->inject.data() + kHeader, extra, extra_len);
  SendWr wr{.opcode = WrOpcode::kSend};
  wr.sg_list[0] = Sge{reinterpret_cast<uint64_t>(carrier->inject.data()),
                      static_cast<uint32_t>(carrier->inject.size()), 0};
  wr.num_sge = 1;
  if (carrier->iov_count) {  // zero copy from the caller
    if (!fill_sges(wr.sg_list + 1, &wr.num_sge, carrier->iov, nullptr, carrier->iov_count))
      return -FI_EINVAL;
    wr.num_sge += 1;
  }
  const uint32_t told = l.owed;
  if (carrier->work == RdmWork::kNone) {
    if (ssize_t rc = post_send(ep, l.qp, wr, carrier); rc != 0) return static_cast<int>(rc);
  } else {
    wr.wr_id = reinterpret_cast<uint64_t>(carrier);
    if (int rc = engine(ep).post_send(l.qp, wr); rc != 0) return fi_error(rc);
  }
  l.owed -= told;
  --l.credits;
  return 0;
}

Op* control_op(Ep* ep, RdmLink& l) {
  Op* c = ep->dom->core().ops.get();
  c->ep = ep;
  c->work = RdmWork::kControl;
  c->qp = l.qp;
  return c;
}

// Sends the control messages waiting, as credits allow.
void flush(Ep* ep, RdmLink& l) {
  while (!l.backlog.empty()) {
    auto [op, id] = l.backlog.front();
    if (op == RdmOp::kCredit && l.owed == 0) {  // a header carried them already
      l.backlog.pop_front();
      l.credit_queued = false;
      continue;
    }
    if (l.credits < (op == RdmOp::kCredit ? 1u : 2u)) return;
    Op* c = control_op(ep, l);
    if (send_message(ep, l, c, op, 0, 0, 0, id, 0, nullptr, 0) != 0) {
      free_op(c);
      return;  // the send queue is full: again at the next message
    }
    if (op == RdmOp::kCredit) l.credit_queued = false;
    l.backlog.pop_front();
  }
}

// Whether a message may go on l now: not on a link that is ending (dropped
// at its kDisconnected; the next send makes a new one), and never the last
// credit, which is kept for kCredit. If not, owed credits go out.
bool may_send(Ep* ep, RdmLink& l) {
  if (l.ending) return false;
  if (l.credits >= 2) return true;
  flush(ep, l);
  return false;
}

void send_control(Ep* ep, RdmLink& l, RdmOp op, uint64_t msg_id) {
  l.backlog.emplace_back(op, msg_id);
  flush(ep, l);
}

// The buffer goes back to the engine and, once half of them are owed, the
// peer hears of them.
void repost(Ep* ep, RdmLink& l, Op* b) {
  if (post_buffer(ep, l, b) != 0) {
    free_op(b);  // the connection is going
    return;
  }
  ++l.owed;
  if (l.owed >= kRdmBuffers / 2 && !l.credit_queued) {
    l.credit_queued = true;
    send_control(ep, l, RdmOp::kCredit, 0);
  }
}

// Copies a message's bytes into the receive's buffers; returns how many.
size_t copy_out(const Op* recv, const uint8_t* src, size_t n) {
  size_t done = 0;
  for (size_t i = 0; i < recv->iov_count && done < n; ++i) {
    const size_t k = std::min(recv->iov[i].iov_len, n - done);
    std::memcpy(recv->iov[i].iov_base, src + done, k);
    done += k;
  }
  return done;
}

// The receive took a message of recv->size bytes: its completion.
void finish_recv(Ep* ep, Op* recv, int err) {
  fi_cq_err_entry e{};
  e.flags = recv->flags;
  if (Op* m = recv->owner; m && --m->multi_slices == 0 && m->multi_retired) {
    e.flags |= FI_MULTI_RECV;  // the buffer's last slice
    free_op(m);
  }
  e.buf = recv->buf;
  e.len = std::min<uint64_t>(recv->size, recv->len);
  if (recv->msg_flags & kRdmCqData) {
    e.flags |= FI_REMOTE_CQ_DATA;
    e.data = recv->cq_data;
  }
  if (recv->msg_flags & kRdmTagged) e.tag = recv->tag;
  if (err == 0 && recv->size > recv->len) {
    err = FI_ETRUNC;
    e.olen = recv->size - recv->len;
  }
  complete(recv, ep->rx_cq, e, err, recv->addr);
}

// The part of multi-receive buffer m a message of size bytes takes: a
// receive of its own. *retired: m takes no more messages (it is off the
// matcher's queue, and freed with its last slice).
Op* slice(Ep* ep, Op* m, uint64_t size, bool* retired) {
  Op* s = new_op(ep, m->context, m->flags & ~FI_MULTI_RECV, 0, false, m->cntr);
  s->report = m->report;
  const size_t take = std::min<uint64_t>(size, m->len - m->multi_used);
  s->buf = static_cast<uint8_t*>(m->buf) + m->multi_used;
  s->len = take;
  s->iov[0] = iovec{s->buf, take};
  s->iov_count = 1;
  s->owner = m;
  m->multi_used += take;
  ++m->multi_slices;
  const size_t left = m->len - m->multi_used;
  *retired = left == 0 || left < ep->rdm->min_multi_recv;  // full even with a minimum of 0
  if (*retired) {
    m->multi_retired = true;
    ep->rdm->matcher.remove_recv(m);
  }
  return s;
}

// The sender of a with kRdmAckDelivery hears that a was taken.
void ack_delivery(Ep* ep, const Arrived& a) {
  if (!(a.flags & kRdmAckDelivery)) return;
  RdmLink* l = link_of(ep, a.qp);
  if (l && l->serial == a.link) send_control(ep, *l, RdmOp::kDeliveryAck, a.msg_id);
}

// A receive and a message met: eager bytes are copied, a rendezvous reads.
void deliver(Ep* ep, Op* recv, const Arrived& a) {
  recv->tag = a.tag;
  recv->cq_data = a.cq_data;
  recv->msg_flags = a.flags;
  recv->size = a.size;
  recv->addr = a.src;
  if (!a.rendezvous) {
    copy_out(recv, a.payload, std::min<uint64_t>(a.size, recv->len));
    finish_recv(ep, recv, 0);
    ack_delivery(ep, a);
    return;
  }
  RdmLink* l = link_of(ep, a.qp);
  if (!l || l->serial != a.link) {
    finish_recv(ep, recv, FI_EIO);  // the sender's connection is gone
    return;
  }
  Op* rd = ep->dom->core().ops.get();
  rd->ep = ep;
  rd->work = RdmWork::kRead;
  rd->qp = a.qp;
  rd->owner = recv;
  rd->msg_id = a.msg_id;
  SendWr wr{.wr_id = reinterpret_cast<uint64_t>(rd), .opcode = WrOpcode::kRead};
  wr.remote_addr = a.addr;
  wr.rkey = a.stag;
  uint64_t want = std::min<uint64_t>(a.size, recv->len);
  for (size_t i = 0; i < recv->iov_count && want > 0; ++i) {
    const auto k = static_cast<uint32_t>(std::min<uint64_t>(recv->iov[i].iov_len, want));
    if (k == 0) continue;
    wr.sg_list[wr.num_sge++] = Sge{reinterpret_cast<uint64_t>(recv->iov[i].iov_base), k, 0};
    want -= k;
  }
  if (engine(ep).post_send(a.qp, wr) != 0) {
    free_op(rd);
    finish_recv(ep, recv, FI_EIO);
    send_control(ep, *l, RdmOp::kRendezvousDone, a.msg_id);
  }
}

// The peer's AV entry (FI_SOURCE), looked up again once the AV changed.
fi_addr_t sender(Ep* ep, RdmLink& l) {
  const Av* av = ep->rdm->av;
  if (l.av_seen != av->changes) {
    l.peer = av_lookup(av, l.name);
    l.av_seen = av->changes;
  }
  return l.peer;
}

// A message arrived on l in buffer b: to the first receive that takes it,
// or kept. True if it stays in b (b is not posted again until taken).
bool arrive(Ep* ep, RdmLink& l, const RdmMsg& m, Op* b) {
  RdmConns& r = *ep->rdm;
  sender(ep, l);
  Arrived a{.qp = l.qp, .link = l.serial, .src = l.peer, .name = l.name, .flags = m.flags,
            .tag = m.tag, .cq_data = m.cq_data, .msg_id = m.msg_id, .size = m.size,
            .rendezvous = m.op == RdmOp::kRendezvous,
            .stag = m.stag, .addr = m.addr, .data = {}, .payload = m.payload, .held = nullptr,
            .cost = sizeof(Arrived) + (m.op == RdmOp::kEager ? m.size : 0)};
  const MsgKey key{l.peer, (m.flags & kRdmTagged) != 0, m.tag};
  if (auto* recv = static_cast<Op*>(r.matcher.take_recv(key))) {
    bool retired;
    if (recv->flags & FI_MULTI_RECV) recv = slice(ep, recv, a.size, &retired);
    deliver(ep, recv, a);
    return false;
  }
  // Kept: copied while the connection's copies stay within the bound (their
  // records count too, so empty messages and rendezvous requests are
  // bounded as well); past it, left in b, which holds the sender back.
  auto* kept = new Arrived(a);
  static const auto bound =
      static_cast<size_t>(settings::get_int(settings::Id::kUnexpectedBytes));
  r.matcher.queue_message(key, kept);
  if (l.kept_bytes + a.cost > bound) {
    kept->held = b;
    l.held.insert(kept);
    return true;
  }
  if (!a.rendezvous) {
    kept->data.assign(m.payload, m.payload + m.size);
    kept->payload = kept->data.data();
  }
  l.kept_bytes += a.cost;
  return false;
}

// A kept message was taken (delivered or discarded): its bytes or its
// buffer are free again.
void taken(Ep* ep, Arrived* a) {
  RdmLink* l = link_of(ep, a->qp);
  if (l && l->serial == a->link) {
    if (a->held) {
      l->held.erase(a);
      repost(ep, *l, a->held);
      flush(ep, *l);
    } else {
      l->kept_bytes -= a->cost;
    }
  }
  delete a;
}

// The target has a send's message in a receive (it read a long one's
// data, or took an eager one sent for FI_DELIVERY_COMPLETE): it completes.
void delivered(Ep* ep, RdmLink& l, uint64_t msg_id) {
  RdmConns& r = *ep->rdm;
  auto it = r.rendezvous.find(msg_id);
  if (it == r.rendezvous.end() || it->second->qp != l.qp) {
    end_link(ep, l, "finished a message it was not sent");
    return;
  }
  Op* op = it->second;
  r.rendezvous.erase(it);
  if (!(op->msg_flags & kRdmAckDelivery)) engine(ep).dereg_mr(op->rndv_stag);
  fi_cq_err_entry e{};
  e.flags = op->flags;
  e.len = op->len;
  complete(op, ep->tx_cq, e, 0, FI_ADDR_NOTAVAIL);
}

void on_buffer(Op* b, const Wc& wc) {
  Ep* ep = b->ep;
  RdmLink* l = link_of(ep, b->qp);
  if (!l || l->ending) {
    free_op(b);
    return;
  }
  if (wc.opcode == WcOpcode::kRecvRdmaImm) {  // fi_writedata's data is placed
    fi_cq_err_entry e{};
    e.flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
    e.data = wc.imm_data;
    if (ep->rx_cq) ep->rx_cq->push(CqItem{e, false, sender(ep, *l)});
    repost(ep, *l, b);
    flush(ep, *l);
    return;
  }
  RdmMsg m;
  const RdmParse p = rdm_parse(static_cast<const uint8_t*>(b->buf), wc.byte_len, kRdmEager, &m);
  if (p != RdmParse::kOk || l->credits + m.credits > kRdmBuffers) {
    end_link(ep, *l, p != RdmParse::kOk ? rdm_parse_name(p) : "more credits than buffers");
    free_op(b);
    return;
  }
  l->credits += m.credits;
  switch (m.op) {
    case RdmOp::kEager:
    case RdmOp::kRendezvous:
      if (arrive(ep, *l, m, b)) {
        flush(ep, *l);
        return;
      }
      break;
    case RdmOp::kRendezvousDone:
    case RdmOp::kDeliveryAck:
      delivered(ep, *l, m.msg_id);
      break;
    default:  // kCredit: the credits were all
      break;
  }
  if (l->ending) {
    free_op(b);
    return;
  }
  repost(ep, *l, b);
  flush(ep, *l);
}

void on_read(Op* rd, const Wc& wc) {
  Ep* ep = rd->ep;
  finish_recv(ep, rd->owner, wc.status == WcStatus::kSuccess ? 0 : cq_error(wc.status));
  if (RdmLink* l = link_of(ep, rd->qp)) send_control(ep, *l, RdmOp::kRendezvousDone, rd->msg_id);
  free_op(rd);
}

}  // namespace

uint32_t rdm_link_buffers(const Ep* ep) {
  return (ep->info->caps & (FI_MSG | FI_TAGGED)) ? kRdmBuffers : 0;
}

int rdm_link_open(Ep* ep, Qp* qp, fi_addr_t peer, const sockaddr_in& name, uint32_t credits) {
  auto l = std::make_unique<RdmLink>();
  l->qp = qp;
  l->serial = ++g_serial;
  l->peer = peer != FI_ADDR_NOTAVAIL ? peer : av_lookup(ep->rdm->av, name);
  l->av_seen = ep->rdm->av->changes;
  l->name = name;
  l->credits = credits;
  const uint32_t buffers = rdm_link_buffers(ep);
  l->slab.resize(buffers * kSlot);
  for (uint32_t i = 0; i < buffers; ++i) {
    Op* b = ep->dom->core().ops.get();
    b->ep = ep;
    b->work = RdmWork::kBuffer;
    b->qp = qp;
    b->buf = l->slab.data() + i * kSlot;
    if (int rc = post_buffer(ep, *l, b); rc != 0) {
      free_op(b);
      return fi_error(rc);  // the QP's flush returns those posted
    }
  }
  ep->rdm->links[qp] = std::move(l);
  return 0;
}

void rdm_link_credits(Ep* ep, Qp* qp, uint32_t credits) {
  if (RdmLink* l = link_of(ep, qp)) {
    l->credits = credits;
    flush(ep, *l);
  }
}

bool rdm_credit(Ep* ep, Qp* qp, bool spend) {
  RdmLink* l = link_of(ep, qp);
  if (!l) return false;
  if (!spend) return may_send(ep, *l);
  --l->credits;
  return true;
}

void rdm_link_end(Ep* ep, Qp* qp, const char* why) {
  if (RdmLink* l = link_of(ep, qp)) end_link(ep, *l, why);
}

void rdm_link_close(Ep* ep, Qp* qp) {
  RdmConns& r = *ep->rdm;
  if (RdmLink* l = link_of(ep, qp)) {
    // Messages left in buffers outlive them: copied out now (a rendezvous
    // request needs nothing of its buffer).
    for (void* m : l->held) {
      auto* a = static_cast<Arrived*>(m);
      if (!a->rendezvous) a->data.assign(a->payload, a->payload + a->size);
      a->payload = a->data.data();
      free_op(a->held);
      a->held = nullptr;
    }
  }
  r.links.erase(qp);
  for (auto it = r.rendezvous.begin(); it != r.rendezvous.end();) {
    Op* op = it->second;
    if (op->qp != qp) {
      ++it;
      continue;
    }
    it = r.rendezvous.erase(it);
    if (!(op->msg_flags & kRdmAckDelivery)) engine(ep).dereg_mr(op->rndv_stag);
    fail(op, ep->tx_cq, FI_ECONNABORTED);
  }
}

RdmConns::~RdmConns() {
  // Kept messages; receives still posted are the engine's records (the
  // pool's) and go with the core.
  matcher.drain_messages([](void* m) { delete static_cast<Arrived*>(m); });
}

void rdm_internal(Op* op, const Wc& wc) {
  if (wc.status != WcStatus::kSuccess) {
    // The connection failed or went: rdm_ep.cc drops it, failing what it
    // carried; a Read's receive fails here.
    if (op->work == RdmWork::kRead) {
      finish_recv(op->ep, op->owner, cq_error(wc.status));
    }
    free_op(op);
    return;
  }
  switch (op->work) {
    case RdmWork::kBuffer: on_buffer(op, wc); break;
    case RdmWork::kRead: on_read(op, wc); break;
    default: free_op(op); break;  // a control message went
  }
}

ssize_t rdm_send(Ep* ep, const iovec* iov, void** desc, size_t count, fi_addr_t dest, void* ctx,
                 uint64_t flags, bool tagged, uint64_t tag, const uint64_t* data, bool report) {
  std::lock_guard g(ep->dom->core().mu);
  if (!(ep->info->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
  if (count > kMaxIov) return -FI_EINVAL;  // the header takes the last SGE
  const size_t size = iov_bytes(iov, count);
  const bool inject = flags & FI_INJECT;
  if (size > ep->info->ep_attr->max_msg_size ||
      (inject && size > ep->info->tx_attr->inject_size))
    return -FI_EINVAL;
  int err = 0;
  RdmLink* l = target_link(ep, dest, &err);
  if (!l) return err;
  Qp* qp = l->qp;
  if (!may_send(ep, *l)) return -FI_EAGAIN;
  Op* op = new_op(ep, ctx, FI_SEND | (tagged ? FI_TAGGED : FI_MSG), flags | ep->tx_flags, true,
                  ep->send_cntr);
  op->len = size;
  op->qp = qp;
  if (!report) op->report = false;  // fi_inject: never a completion
  // Transmit-complete: the peer has the message. A Send completes when
  // its stream took it, which an exiting peer's user-space stack may never
  // send: a zero-length Read behind it completes once it arrived.
  if ((flags | ep->tx_flags) & FI_TRANSMIT_COMPLETE) op->delivery = true;
  const uint16_t mflags = (tagged ? kRdmTagged : 0) | (data ? kRdmCqData : 0);
  const uint64_t cq_data = data ? *data : 0;
  (void)desc;  // the engine needs no MR for a Send's or a Read's local buffers
  if (size <= kRdmEager && ((flags | ep->tx_flags) & FI_DELIVERY_COMPLETE) && !inject) {
    // Delivery-complete: the Send's record is a carrier of the caller's
    // buffers, which stay theirs until the target's kDeliveryAck completes
    // the send.
    op->delivery = false;
    op->msg_flags = kRdmAckDelivery;
    op->msg_id = ep->rdm->next_msg_id++;
    Op* c = control_op(ep, *l);
    std::copy(iov, iov + count, c->iov);
    c->iov_count = count;
    if (int rc = send_message(ep, *l, c, RdmOp::kEager, mflags | kRdmAckDelivery, tag, cq_data,
                              op->msg_id, size, nullptr, 0);
        rc != 0) {
      free_op(c);
      free_op(op);
      return rc;
    }
    ep->rdm->rendezvous[op->msg_id] = op;
    return 0;
  }
  if (size <= kRdmEager) {
    if (inject) {
      gather(&op->inject, kHeader, iov, count);
    } else {
      std::copy(iov, iov + count, op->iov);
      op->iov_count = count;
    }
    // post_send frees op on failure.
    return send_message(ep, *l, op, RdmOp::kEager, mflags, tag, cq_data, 0, size, nullptr, 0);
  }
  // Rendezvous: the target reads the data where it is (one iovec), or
  // from a copy.
  void* at = count ? iov[0].iov_base : nullptr;
  if (count > 1) {
    gather(&op->inject, 0, iov, count);
    at = op->inject.data();
  }
  Mr* mr = engine(ep).reg_mr(ep->dom->pd, at, size, kAccessRemoteRead);
  if (!mr) {
    free_op(op);
    return -FI_ENOMEM;
  }
  op->rndv_stag = mr->stag;
  op->msg_id = ep->rdm->next_msg_id++;
  RdmRendezvous target{};
  target.stag.set(mr->stag);
  target.addr.set(reinterpret_cast<uint64_t>(at));
  Op* c = control_op(ep, *l);
  if (int rc = send_message(ep, *l, c, RdmOp::kRendezvous, mflags, tag, cq_data, op->msg_id,
                            size, &target, sizeof(target));
      rc != 0) {
    free_op(c);
    engine(ep).dereg_mr(mr->stag);
    free_op(op);
    return rc;
  }
  ep->rdm->rendezvous[op->msg_id] = op;
  return 0;
}

namespace {

// A message can arrive before the application put its sender in the AV
// (Open MPI adds peers as it first talks to them): once the AV changed,
// such waiting messages are matched by the sender's entry.
void resolve_unknown(RdmConns& r) {
  if (r.av_resolved == r.av->changes) return;
  r.av_resolved = r.av->changes;
  r.matcher.resolve_unknown([&r](void* m) {
    auto* a = static_cast<Arrived*>(m);
    a->src = av_lookup(r.av, a->name);
    return a->src;
  });
}

// FI_PEEK, FI_CLAIM, FI_DISCARD (fi_tagged(3)): a look at the kept
// messages without a receive buffer, or the taking of a claimed one.
ssize_t peek(Ep* ep, Op* op, const RecvSpec& spec, uint64_t flags) {
  RdmConns& r = *ep->rdm;
  MsgKey key;
  void* m = (flags & FI_PEEK) ? r.matcher.peek(spec, &key) : r.matcher.take_claimed(op->context);
  if (!m) {
    fail(op, ep->rx_cq, FI_ENOMSG);
    return 0;
  }
  auto* a = static_cast<Arrived*>(m);
  if (!(flags & (FI_PEEK | FI_DISCARD))) {  // FI_CLAIM: taken into this receive
    deliver(ep, op, *a);
    taken(ep, a);
    return 0;
  }
  // What the message is, nothing copied; always reported.
  fi_cq_err_entry e{};
  e.flags = op->flags | ((a->flags & kRdmCqData) ? FI_REMOTE_CQ_DATA : 0);
  e.len = (flags & FI_DISCARD) ? 0 : a->size;
  e.tag = a->tag;
  e.data = a->cq_data;
  const fi_addr_t src = a->src;
  if (flags & FI_DISCARD) {
    if (flags & FI_PEEK) r.matcher.remove_message(a);
    ack_delivery(ep, *a);
    taken(ep, a);
  } else if (flags & FI_CLAIM) {
    r.matcher.claim(a, op->context);
  }
  op->report = true;
  complete(op, ep->rx_cq, e, 0, src);
  return 0;
}

}  // namespace

ssize_t rdm_cancel(Ep* ep, void* ctx) {
  std::lock_guard g(ep->dom->core().mu);
  auto* recv = static_cast<Op*>(ep->rdm->matcher.remove_recv_if(
      [ctx](const void* r) { return static_cast<const Op*>(r)->context == ctx; }));
  if (!recv) return -FI_ENOENT;  // not posted, or taken by a message already
  if (recv->multi_slices > 0) {  // its last slice frees it, saying FI_MULTI_RECV
    recv->multi_retired = true;
    return 0;
  }
  fail(recv, ep->rx_cq, FI_ECANCELED);
  return 0;
}

ssize_t rdm_recv(Ep* ep, const iovec* iov, void** desc, size_t count, fi_addr_t src, void* ctx,
                 uint64_t flags, bool tagged, uint64_t tag, uint64_t ignore) {
  (void)desc;  // received into directly or copied into: no MR needed
  std::lock_guard g(ep->dom->core().mu);
  if (!(ep->info->caps & (tagged ? FI_TAGGED : FI_MSG))) return -FI_EOPNOTSUPP;
  if (!ep->enabled) return -FI_EOPBADSTATE;
  if (count > kMaxIov) return -FI_EINVAL;
  // A multi-receive buffer is one untagged buffer (rx_attr's op_flags may
  // make every fi_recv one).
  const bool multi = (flags | (tagged ? 0 : ep->rx_flags)) & FI_MULTI_RECV;
  if (multi && (tagged || count != 1 || !(ep->info->caps & FI_MULTI_RECV))) return -FI_EINVAL;
  RdmConns& r = *ep->rdm;
  Op* op = new_op(ep, ctx, FI_RECV | (tagged ? FI_TAGGED : FI_MSG), flags | ep->rx_flags, false,
                  ep->recv_cntr);
  op->buf = count ? iov[0].iov_base : nullptr;
  op->len = iov_bytes(iov, count);
  std::copy(iov, iov + count, op->iov);
  op->iov_count = count;
  const bool directed = ep->info->caps & FI_DIRECTED_RECV;
  const RecvSpec spec{directed ? src : FI_ADDR_UNSPEC, tagged, tag, ignore};
  resolve_unknown(r);
  if (tagged && (flags & (FI_PEEK | FI_CLAIM))) return peek(ep, op, spec, flags);
  if (multi) {
    op->flags |= FI_MULTI_RECV;
    bool retired = false;  // then op may be freed already
    while (!retired) {     // messages already here first
      auto* a = static_cast<Arrived*>(r.matcher.take_message(spec));
      if (!a) break;
      deliver(ep, slice(ep, op, a->size, &retired), *a);
      taken(ep, a);
    }
    if (!retired) r.matcher.queue_recv(spec, op, true);
    return 0;
  }
  if (auto* a = static_cast<Arrived*>(r.matcher.take_message(spec))) {
    deliver(ep, op, *a);
    taken(ep, a);
    return 0;
  }
  r.matcher.queue_recv(spec, op, false);
  return 0;
}

}  // namespace softrdma::prov
