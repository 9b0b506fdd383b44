// QP lifecycle: state transitions, start, posting, the move to error and
// flushing.
#include "stack/iwarp/qp.h"

#include <cerrno>

#include "stack/iwarp/qp_state.h"

namespace softrdma::iwarp {

namespace {

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithInv: return WcOpcode::kSend;
    case WrOpcode::kWrite:
    case WrOpcode::kWriteWithImm: return WcOpcode::kWrite;
    case WrOpcode::kImmData: return WcOpcode::kImmData;
    case WrOpcode::kRead: return WcOpcode::kRead;
    case WrOpcode::kAtomicFetchAdd: return WcOpcode::kFetchAdd;
    case WrOpcode::kAtomicCmpSwap: return WcOpcode::kCmpSwap;
    case WrOpcode::kAtomicSwap: return WcOpcode::kSwap;
  }
  return WcOpcode::kSend;
}

bool is_atomic(WrOpcode op) {
  return op == WrOpcode::kAtomicFetchAdd || op == WrOpcode::kAtomicCmpSwap ||
         op == WrOpcode::kAtomicSwap;
}

}  // namespace

Qp::Qp(uint32_t num, const QpInit& init, MrTable* mrs, Stats* stats, QpOwner* owner)
    : num_(num), init_(init), mrs_(mrs), stats_(stats), owner_(owner) {
  unexp_.set_bounds(init.unexpected_bytes, init.unexpected_msgs);
}

int Qp::set_state(QpState to) {
  if (!qp_transition_legal(state_, to)) {
    ++stats_->qp_transitions_refused;
    return -EINVAL;
  }
  state_ = to;
  return 0;
}

int Qp::start(net::StreamConn* conn, const MpaResult& mpa, bool initiator) {
  if (int rc = set_state(QpState::kRts); rc < 0) return rc;
  conn_ = conn;
  mpa_ = mpa;
  initiator_ = initiator;
  rtr_pending_tx_ = initiator && mpa.rtr != Rtr::kNone;
  rtr_awaited_ = !initiator && mpa.rtr != Rtr::kNone;
  tx_progress();
  rx_progress();  // bytes may have arrived together with the MPA frame
  return 0;
}

// Local checks of a work request's memory: a non-zero lkey must name a live
// region of our PD covering the SGE with the needed right.
static bool sges_ok(const MrTable& mrs, const Pd* pd, const Sge* sg, int n, uint32_t need) {
  for (int i = 0; i < n; ++i) {
    if (sg[i].lkey == 0) continue;
    uint8_t* p;
    if (mrs.check(sg[i].lkey, pd, sg[i].addr, sg[i].length, need, &p) != AccessResult::kOk &&
        !(sg[i].length == 0))
      return false;
  }
  return true;
}

int Qp::post_send(const SendWr& wr) {
  if (wr.num_sge < 0 || wr.num_sge > kMaxSge) return -EINVAL;
  const bool atomic = is_atomic(wr.opcode);
  if (atomic && (wr.num_sge != 1 || wr.sg_list[0].length != 8 || (wr.remote_addr & 7)))
    return -EINVAL;
  const bool writes_local = wr.opcode == WrOpcode::kRead || atomic;
  if (!sges_ok(*mrs_, init_.pd, wr.sg_list, wr.num_sge, writes_local ? uint32_t{kAccessLocalWrite} : 0u))
    return -EACCES;
  if (state_ == QpState::kError || state_ == QpState::kTerminate || state_ == QpState::kClosing) {
    Wc wc{.wr_id = wr.wr_id, .status = WcStatus::kWrFlushErr, .opcode = wc_opcode(wr.opcode),
          .qp_num = num_};
    init_.send_cq->push(wc);
    return 0;
  }
  if (sq_.size() + orq_wrs_ >= init_.sq_depth) return -EAGAIN;
  SqEntry e{.wr = wr};
  for (int i = 0; i < wr.num_sge; ++i) e.total += wr.sg_list[i].length;
  if (e.total > UINT32_MAX && wr.opcode != WrOpcode::kWrite) return -EMSGSIZE;
  sq_.push_back(e);
  if (state_ == QpState::kRts && !defer_tx_) tx_progress();
  return 0;
}

int Qp::post_recv(const RecvWr& wr) {
  if (init_.srq) return -EINVAL;
  if (wr.num_sge < 0 || wr.num_sge > kMaxSge) return -EINVAL;
  if (!sges_ok(*mrs_, init_.pd, wr.sg_list, wr.num_sge, kAccessLocalWrite)) return -EACCES;
  if (state_ == QpState::kError || state_ == QpState::kTerminate || state_ == QpState::kClosing) {
    Wc wc{.wr_id = wr.wr_id, .status = WcStatus::kWrFlushErr, .opcode = WcOpcode::kRecv,
          .qp_num = num_};
    init_.recv_cq->push(wc);
    return 0;
  }
  if (rq_.size() >= init_.rq_depth) return -EAGAIN;
  rq_.push_back(wr);
  rx_deliver_unexpected();  // the oldest held Send, if any, takes it now
  return 0;
}

void Qp::sq_complete(const SqEntry& e, WcStatus st) {
  Wc wc{.wr_id = e.wr.wr_id, .status = st, .opcode = wc_opcode(e.wr.opcode),
        .byte_len = static_cast<uint32_t>(e.total), .qp_num = num_};
  scq_.push_back({wc, st != WcStatus::kSuccess || (e.wr.flags & kWrSignaled) != 0, true});
  sq_drain();
}

void Qp::sq_await_response(const SqEntry& e) {
  ++orq_wrs_;
  Wc wc{.wr_id = e.wr.wr_id, .status = WcStatus::kSuccess, .opcode = wc_opcode(e.wr.opcode),
        .byte_len = static_cast<uint32_t>(e.total), .qp_num = num_};
  scq_.push_back({wc, (e.wr.flags & kWrSignaled) != 0, false});
}

// Responses come in request order (RFC 5040 §5.3 / RFC 7306 §4), so the
// oldest WR still awaiting one is the one answered.
void Qp::sq_response_done() {
  --orq_wrs_;
  for (ScqEntry& s : scq_) {
    if (!s.done) {
      s.done = true;
      break;
    }
  }
  sq_drain();
}

void Qp::sq_drain() {
  while (!scq_.empty() && scq_.front().done) {
    if (scq_.front().report) init_.send_cq->push(scq_.front().wc);
    scq_.pop_front();
  }
}

// Every outstanding work request completes: the first (the one the error is
// most likely about) with first_status, the rest as flushed.
void Qp::flush_all(WcStatus first_status, uint32_t vendor_err) {
  bool first = true;
  auto status = [&]() {
    WcStatus s = first ? first_status : WcStatus::kWrFlushErr;
    first = false;
    return s;
  };
  if (rx_msg_active_ && !rx_to_store_) {
    Wc wc{.wr_id = rx_wr_.wr_id, .status = status(), .opcode = WcOpcode::kRecv,
          .qp_num = num_, .vendor_err = vendor_err};
    init_.recv_cq->push(wc);
  }
  rx_msg_active_ = false;
  rx_to_store_ = false;
  unexp_.clear();  // held Sends had no receive: nothing to complete
  // In order: what was done completes as it was, what awaits a response fails.
  for (ScqEntry& s : scq_) {
    if (!s.done) {
      s.wc.status = status();
      s.wc.vendor_err = vendor_err;
      s.wc.byte_len = 0;
      s.report = true;
      s.done = true;
    }
  }
  sq_drain();
  orq_.clear();
  orq_wrs_ = 0;
  for (const SqEntry& e : sq_) {
    Wc wc{.wr_id = e.wr.wr_id, .status = status(), .opcode = wc_opcode(e.wr.opcode),
          .qp_num = num_, .vendor_err = vendor_err};
    init_.send_cq->push(wc);
  }
  sq_.clear();
  tx_.active = false;
  for (const RecvWr& r : rq_) {
    Wc wc{.wr_id = r.wr_id, .status = status(), .opcode = WcOpcode::kRecv, .qp_num = num_,
          .vendor_err = vendor_err};
    init_.recv_cq->push(wc);
  }
  rq_.clear();
  irq_.clear();
}

void Qp::to_error(WcStatus first_status, uint32_t vendor_err) {
  if (state_ == QpState::kError) return;
  // After our own Terminate the stream closes gracefully so the Terminate
  // reaches the peer, and after the peer's FIN our FIN answers it (a reset
  // could be lost with nothing to repeat it, leaving the peer waiting); any
  // other error resets it.
  const bool graceful = term_sent_ || peer_closed_;
  if (set_state(QpState::kError) < 0) return;
  rx_stage_ = RxStage::kDead;
  flush_all(first_status, vendor_err);
  if (conn_) graceful ? conn_->close() : conn_->abort();
  if (owner_) owner_->on_qp_error(this);
}

void Qp::close() {
  if (state_ == QpState::kError) return;
  // Only a connected QP closes in order (RTS → Closing → Error); an Idle one
  // has no stream, and a Terminate in progress may only end in Error.
  if (state_ == QpState::kRts) set_state(QpState::kClosing);
  rx_stage_ = RxStage::kDead;
  flush_all(WcStatus::kWrFlushErr, 0);
  if (conn_) conn_->close();
  set_state(QpState::kError);
}

int Qp::error_status() const {
  if (term_rx_valid_) return -EREMOTEIO;
  if (term_sent_) return -EPROTO;
  return stream_err_;
}

uint32_t Qp::error_term() const {
  if (term_rx_valid_) return term_rx_.packed();
  return term_sent_ ? term_cause_.packed() : 0;
}

void Qp::on_stream_closed(int err) {
  stream_err_ = err;
  peer_closed_ = err == 0;
  if (state_ == QpState::kRts || state_ == QpState::kTerminate) {
    // A Terminate already explains the error; otherwise the stream was lost.
    WcStatus st = term_rx_valid_ ? status_for(term_rx_)
                  : err == 0     ? WcStatus::kWrFlushErr  // orderly close by the peer
                                 : WcStatus::kFatalErr;
    to_error(st, term_rx_valid_ ? term_rx_.packed() : static_cast<uint32_t>(-err));
  }
}

}  // namespace softrdma::iwarp
