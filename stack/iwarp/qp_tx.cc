// Transmit: pick the next message (Terminate, RTR, IRQ responses, then the
// SQ), cut it into FPDUs that fit one transport segment, and hand each FPDU
// to the transport as one gather list. Messages are never interleaved: a
// message's FPDUs go out back to back (RFC 5041 keeps untagged messages on
// one queue in order; doing the same for tagged ones keeps this simple).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "stack/iwarp/fpdu_size.h"
#include "stack/iwarp/opcodes.h"
#include "stack/iwarp/qp.h"
#include "stack/iwarp/tx_frame.h"

namespace softrdma::iwarp {

namespace {

bool needs_response(WrOpcode op) {
  return op == WrOpcode::kRead || op == WrOpcode::kAtomicFetchAdd ||
         op == WrOpcode::kAtomicCmpSwap || op == WrOpcode::kAtomicSwap;
}

// Messages per work request: Write with Immediate is a Write then an
// Immediate Data message (RFC 7306 §4.1); a Read is one Read Request per SGE.
uint32_t phases(const SendWr& wr) {
  if (wr.opcode == WrOpcode::kWriteWithImm) return 2;
  if (wr.opcode == WrOpcode::kRead) return wr.num_sge > 0 ? static_cast<uint32_t>(wr.num_sge) : 1;
  return 1;
}

}  // namespace

bool Qp::tx_pending() const {
  return tx_.active || (!term_frame_.empty() && !term_sent_) || rtr_pending_tx_ || !irq_.empty() ||
         !sq_.empty();
}

void Qp::tx_progress() {
  if (!conn_ || (state_ != QpState::kRts && state_ != QpState::kTerminate)) return;
  bool sent = false;
  while (conn_ && (tx_.active || tx_next_message())) {
    if (!tx_fpdu()) break;
    sent = true;
    if (tx_.sent == tx_.total) tx_message_done();
  }
  // Earlier FPDUs were flushed by the call that handed them over.
  if (conn_ && sent) conn_->tx_flush();
}

// A control message (Read Request, Terminate, atomics, Immediate Data): a
// small payload in tx_.ctrl, of its opcode's size, one untagged message on
// its opcode's queue.
void Qp::tx_ctrl(RdmapOpcode op) {
  static_assert(sizeof(tx_.ctrl) >= max_ctrl_len());
  const OpcodeInfo& info = opcode_info(op);
  tx_.op = op;
  tx_.msn = next_msn(info.qn);
  tx_.total = info.ctrl_len;
}

// Chooses what goes next and fills tx_. Returns false when nothing may go.
bool Qp::tx_next_message() {
  tx_ = TxMsg{};
  if (!term_frame_.empty() && !term_sent_) {
    static_assert(sizeof(tx_.ctrl) >= sizeof(TerminatePayload) + kTermDdpSegLenSize +
                                          sizeof(UntaggedHdr) - kMpaLenSize + kTermRdmapHdrSize);
    tx_ctrl(RdmapOpcode::kTerminate);
    tx_.total = term_frame_.size();  // its optional fields make it longer
    std::memcpy(tx_.ctrl, term_frame_.data(), term_frame_.size());
    tx_.origin = TxMsg::Origin::kTerminate;
    return tx_.active = true;
  }
  if (state_ != QpState::kRts) return false;
  if (rtr_pending_tx_) {
    // RFC 6581 §5: a zero-length message of the negotiated kind.
    tx_.origin = TxMsg::Origin::kRtr;
    if (mpa_.rtr == Rtr::kWrite) {
      tx_.op = RdmapOpcode::kRdmaWrite;
    } else if (mpa_.rtr == Rtr::kSend) {
      tx_.op = RdmapOpcode::kSend;
      tx_.msn = next_msn(opcode_info(tx_.op).qn);
    } else {
      tx_ctrl(RdmapOpcode::kRdmaReadReq);
      std::memset(tx_.ctrl, 0, sizeof(ReadReqPayload));
      orq_.push_back(OrqEntry{.wr_id = 0, .opcode = WrOpcode::kRead, .signaled = false,
                              .last_piece = false, .sink_stag = 0, .sink_to = 0,
                              .remaining = 0, .wr_bytes = 0, .atomic_id = 0, .result_addr = 0});
    }
    rtr_pending_tx_ = false;
    return tx_.active = true;
  }
  if (rtr_awaited_) return false;  // responder: silent until the RTR arrives
  if (!irq_.empty()) {
    tx_from_irq();
    return tx_.active = true;
  }
  return !sq_.empty() && tx_from_sq() && (tx_.active = true);
}

void Qp::tx_from_irq() {
  IrqEntry& r = irq_.front();
  tx_.origin = TxMsg::Origin::kIrq;
  if (r.atomic) {
    tx_ctrl(RdmapOpcode::kAtomicResp);
    auto* a = reinterpret_cast<AtomicRespPayload*>(tx_.ctrl);
    a->req_id.set(r.atomic_id);
    a->orig_value.set(r.orig);
    return;
  }
  tx_.op = RdmapOpcode::kRdmaReadResp;
  tx_.stag = r.sink_stag;
  tx_.to = r.sink_to;
  tx_.one_sge = Sge{.addr = r.src_to, .length = static_cast<uint32_t>(r.len), .lkey = r.src_stag};
  tx_.nsge = 1;
  tx_.total = r.len;
}

// Builds the next message of the SQ head, if ordering rules let it go.
void Qp::count_message(RdmapOpcode op) {
  switch (op) {
    case RdmapOpcode::kSend:
    case RdmapOpcode::kSendInv:
    case RdmapOpcode::kSendSe:
    case RdmapOpcode::kSendSeInv: ++stats_->sends_tx; break;
    case RdmapOpcode::kRdmaWrite: ++stats_->writes_tx; break;
    case RdmapOpcode::kRdmaReadReq: ++stats_->read_requests_tx; break;
    case RdmapOpcode::kAtomicReq: ++stats_->atomic_requests_tx; break;
    default: break;
  }
}

bool Qp::tx_from_sq() {
  SqEntry& e = sq_.front();
  const SendWr& wr = e.wr;
  if ((wr.flags & kWrFence) && e.phase == 0 && !orq_.empty()) return false;
  if (needs_response(wr.opcode)) {
    if (mpa_.ord == 0) {  // the peer takes no reads at all: fail it, go on
      sq_complete(e, WcStatus::kLocQpOpErr);
      sq_.pop_front();
      return !sq_.empty() && tx_from_sq();
    }
    if (orq_.size() >= mpa_.ord) return false;
  }
  tx_.origin = TxMsg::Origin::kSq;
  const bool se = wr.flags & kWrSolicited;
  switch (wr.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithInv: {
      bool inv = wr.opcode == WrOpcode::kSendWithInv;
      tx_.op = inv ? (se ? RdmapOpcode::kSendSeInv : RdmapOpcode::kSendInv)
                   : (se ? RdmapOpcode::kSendSe : RdmapOpcode::kSend);
      tx_.rsvd_ulp = inv ? wr.invalidate_stag : 0;
      tx_.msn = next_msn(opcode_info(tx_.op).qn);
      tx_.nsge = wr.num_sge;
      tx_.total = e.total;
      return true;
    }
    case WrOpcode::kWrite:
    case WrOpcode::kWriteWithImm:
    case WrOpcode::kImmData:
      if (wr.opcode != WrOpcode::kImmData && e.phase == 0) {
        tx_.op = RdmapOpcode::kRdmaWrite;
        tx_.stag = wr.rkey;
        tx_.to = wr.remote_addr;
        tx_.nsge = wr.num_sge;
        tx_.total = e.total;
        return true;
      }
      tx_ctrl(se ? RdmapOpcode::kImmDataSe : RdmapOpcode::kImmData);
      reinterpret_cast<ImmDataPayload*>(tx_.ctrl)->data.set(wr.imm_data);
      return true;
    case WrOpcode::kRead: {
      // One Read Request per SGE; the WR completes with the last response.
      uint64_t offset = 0;
      for (uint32_t i = 0; i < e.phase; ++i) offset += wr.sg_list[i].length;
      Sge sink = wr.num_sge ? wr.sg_list[e.phase] : Sge{};
      auto* rr = reinterpret_cast<ReadReqPayload*>(tx_.ctrl);
      rr->sink_stag.set(sink.lkey);
      rr->sink_to.set(sink.addr);
      rr->read_size.set(sink.length);
      rr->src_stag.set(wr.rkey);
      rr->src_to.set(wr.remote_addr + offset);
      tx_ctrl(RdmapOpcode::kRdmaReadReq);
      orq_.push_back(OrqEntry{.wr_id = wr.wr_id, .opcode = wr.opcode,
                              .signaled = (wr.flags & kWrSignaled) != 0,
                              .last_piece = e.phase + 1 == phases(wr), .sink_stag = sink.lkey,
                              .sink_to = sink.addr, .remaining = sink.length,
                              .wr_bytes = e.total, .atomic_id = 0, .result_addr = 0});
      return true;
    }
    case WrOpcode::kAtomicFetchAdd:
    case WrOpcode::kAtomicCmpSwap:
    case WrOpcode::kAtomicSwap: {
      const bool add = wr.opcode == WrOpcode::kAtomicFetchAdd;
      const bool cas = wr.opcode == WrOpcode::kAtomicCmpSwap;
      auto* a = reinterpret_cast<AtomicReqPayload*>(tx_.ctrl);
      uint32_t id = next_atomic_id_++;
      a->opcode.set(static_cast<uint32_t>(add   ? AtomicOpcode::kFetchAdd
                                          : cas ? AtomicOpcode::kCompareSwap
                                                : AtomicOpcode::kSwap));
      a->req_id.set(id);
      a->remote_stag.set(wr.rkey);
      a->remote_to.set(wr.remote_addr);
      a->add_swap.set(add ? wr.compare_add : wr.swap);
      a->add_swap_mask.set(add ? wr.add_mask : wr.swap_mask);
      a->compare.set(cas ? wr.compare_add : 0);
      a->compare_mask.set(cas ? wr.compare_mask : 0);
      tx_ctrl(RdmapOpcode::kAtomicReq);
      orq_.push_back(OrqEntry{.wr_id = wr.wr_id, .opcode = wr.opcode,
                              .signaled = (wr.flags & kWrSignaled) != 0, .last_piece = true,
                              .sink_stag = 0, .sink_to = 0, .remaining = 8, .wr_bytes = 8,
                              .atomic_id = id, .result_addr = wr.sg_list[0].addr});
      return true;
    }
  }
  return false;
}

// Sends one FPDU of tx_. False when the transport has no room (or failed).
bool Qp::tx_fpdu() {
  const OpcodeInfo& info = opcode_info(tx_.op);
  const bool data = info.payload == PayloadKind::kData;  // else tx_.ctrl holds it
  const size_t hdr = info.hdr_len;
  size_t max = fpdu_size(conn_->max_segment());
  if (mpa_.tx_markers) max -= (max / kMpaMarkerInterval + 2) * kMpaMarkerSize;
  const size_t room = max - hdr - 3 - kMpaCrcSize;
  const uint64_t chunk = std::min<uint64_t>(tx_.total - tx_.sent, room);
  const size_t ulpdu = hdr - kMpaLenSize + chunk;
  const size_t pad = mpa_pad(ulpdu);
  size_t wire = kMpaLenSize + ulpdu + pad + kMpaCrcSize;
  if (mpa_.tx_markers) wire = TxFrame::with_markers(tx_pos_, wire);
  if (conn_->tx_space() < wire) return false;

  // A Read Response re-checks its source each FPDU: the MR may have been
  // closed since the request was accepted.
  if (tx_.origin == TxMsg::Origin::kIrq && data && chunk > 0) {
    uint8_t* p;
    AccessResult r = mrs_->check(tx_.one_sge.lkey, init_.pd, tx_.one_sge.addr + tx_.sent, chunk,
                                 kAccessRemoteRead, &p);
    if (r != AccessResult::kOk) {
      irq_.clear();
      tx_.active = false;
      terminate(TermCause{TermLayer::kRdmap, static_cast<uint8_t>(RdmapEtype::kRemoteProtection),
                          static_cast<uint8_t>(RdmapEcode::kInvalidStag)},
                false, false, WcStatus::kWrFlushErr);
      return true;
    }
  }

  uint8_t h[sizeof(UntaggedHdr)];
  build_hdr(info,
            HdrFields{.ulpdu_len = static_cast<uint16_t>(ulpdu),
                      .last = tx_.sent + chunk == tx_.total, .stag = tx_.stag,
                      .to = tx_.to + tx_.sent, .rsvd_ulp = tx_.rsvd_ulp, .msn = tx_.msn,
                      .mo = static_cast<uint32_t>(tx_.sent)},
            h);

  const int idx0 = tx_.sge_idx;
  const uint64_t off0 = tx_.sge_off;
  TxFrame f(mpa_.tx_markers, mpa_.crc, tx_pos_);
  bool ok = f.add(h, hdr);
  if (!data) {
    ok = ok && f.add(tx_.ctrl + tx_.sent, chunk);
  } else {
    // Walk the SGE cursor: payload goes straight from registered memory.
    uint64_t left = chunk;
    while (ok && left > 0) {
      const Sge& s = tx_sges()[tx_.sge_idx];
      uint64_t take = std::min<uint64_t>(left, s.length - tx_.sge_off);
      ok = f.add(reinterpret_cast<const void*>(s.addr + tx_.sge_off), take);
      left -= take;
      tx_.sge_off += take;
      if (tx_.sge_off == s.length) {
        ++tx_.sge_idx;
        tx_.sge_off = 0;
      }
    }
  }
  static const uint8_t kZero[4] = {};
  ok = ok && f.add(kZero, pad) && f.finish();
  if (!ok) {  // a frame layout we cannot express: a local bug, not a peer's
    to_error(WcStatus::kLocQpOpErr, 0);
    return false;
  }
  int rc = conn_->tx_send(f.iov(), f.iovcnt(), f.bytes());
  if (rc == -EAGAIN) {  // the same FPDU is rebuilt next time
    tx_.sge_idx = idx0;
    tx_.sge_off = off0;
    return false;
  }
  if (rc < 0) {  // the stream is gone (reset, timed out): say why, as on_stream_closed
    if (stream_err_ == 0) stream_err_ = rc;
    to_error(WcStatus::kFatalErr, static_cast<uint32_t>(-rc));
    return false;
  }
  tx_pos_ = f.end_pos();
  tx_.sent += chunk;
  if (tx_.fpdus++ == 0 && tx_.origin == TxMsg::Origin::kSq) count_message(tx_.op);
  ++stats_->fpdus_tx;
  stats_->markers_tx += static_cast<uint64_t>(f.markers());
  if (data) stats_->payload_tx += chunk;
  return true;
}

// The active message's gather list: its WR's, at the head of sq_, or a
// Read Response's source. Looked up, not kept: sq_ moves its entries when
// it grows, and WRs may be posted while its head is on the wire.
const Sge* Qp::tx_sges() const {
  return tx_.origin == TxMsg::Origin::kSq ? sq_.front().wr.sg_list : &tx_.one_sge;
}

// The last FPDU of tx_ is out: complete what can be completed now.
void Qp::tx_message_done() {
  tx_.active = false;
  switch (tx_.origin) {
    case TxMsg::Origin::kTerminate:
      term_sent_ = true;
      to_error(term_local_, term_cause_.packed());
      return;
    case TxMsg::Origin::kRtr:
      if (owner_) owner_->on_qp_ready(this);
      return;
    case TxMsg::Origin::kIrq:
      irq_.pop_front();
      return;
    case TxMsg::Origin::kSq: {
      SqEntry& e = sq_.front();
      if (++e.phase < phases(e.wr)) return;
      if (needs_response(e.wr.opcode)) {
        sq_await_response(e);  // completes when its (last) response arrives
      } else {
        sq_complete(e, WcStatus::kSuccess);
      }
      sq_.pop_front();
      return;
    }
  }
}

}  // namespace softrdma::iwarp
