// Receive, top to bottom: transport views → markers stripped (RFC 5044 §5)
// → FPDU header collected → checks (DDP RFC 5041 §7, RDMAP RFC 5040 §7)
// → payload placed straight from the transport's buffer into registered
// memory or the posted receive (the one copy; with no receive posted, the
// QP's store of unexpected Sends, unexpected.h) → pad and CRC checked →
// message effects and completions.
//
// Every check runs on the header, before any payload octet is placed, so a
// bad STag, bounds, right, queue or length never touches memory. Payload is
// placed before its FPDU's CRC is checked; a CRC failure then terminates the
// stream and the message is never completed, so no bad data is delivered as
// good.
#include <algorithm>
#include <cstring>

#include "stack/common/crc32c.h"
#include "stack/iwarp/opcodes.h"
#include "stack/iwarp/qp.h"

namespace softrdma::iwarp {

namespace {

constexpr uint8_t u8(auto v) { return static_cast<uint8_t>(v); }

// Masked Fetch-Add (RFC 7306 §5.2.1): a set mask bit ends a field, so the
// carry out of that bit is dropped instead of entering the next field.
uint64_t partitioned_add(uint64_t a, uint64_t b, uint64_t field_ends) {
  uint64_t sum = 0, carry = 0;
  for (int i = 0; i < 64; ++i) {
    uint64_t x = (a >> i) & 1, y = (b >> i) & 1;
    sum |= ((x ^ y ^ carry) & 1) << i;
    carry = ((x & y) | (x & carry) | (y & carry)) & ~((field_ends >> i) & 1);
  }
  return sum;
}

}  // namespace

void Qp::rx_progress() {
  if (!conn_) return;
  net::RxView views[8];
  for (size_t nv; conn_ && (nv = conn_->rx_peek(views, 8)) > 0;) {
    const size_t used = rx_feed(views, nv);
    conn_->rx_consume(used);
  }
  tx_progress();  // read responses, atomics and RTR-gated sends may now go
}

size_t Qp::rx_input(const net::RxView* views, size_t n) {
  const size_t used = rx_feed(views, n);
  tx_progress();
  return used;
}

// Runs the FPDU machine over every octet of views (after an error they are
// discarded); returns the octets used, all of them.
size_t Qp::rx_feed(const net::RxView* views, size_t n) {
  size_t used = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t off = 0;
    while (off < views[i].len) {
      if (rx_stage_ == RxStage::kDead) {  // discard what follows an error
        off = views[i].len;
        break;
      }
      off += rx_chunk(views[i].data + off, views[i].len - off);
    }
    used += off;
  }
  return used;
}

// Feeds up to n stream octets to the FPDU machine; returns octets used (>0).
size_t Qp::rx_chunk(const uint8_t* p, size_t n) {
  if (mpa_.rx_markers) {
    if (rx_marker_have_ > 0 || rx_pos_ % kMpaMarkerInterval == 0) return rx_marker(p, n);
    n = std::min<size_t>(n, kMpaMarkerInterval - rx_pos_ % kMpaMarkerInterval);
  }
  size_t take = 0;
  switch (rx_stage_) {
    case RxStage::kHdr:
      take = std::min(n, rx_hdr_need_ - rx_hdr_have_);
      std::memcpy(rx_hdr_ + rx_hdr_have_, p, take);
      rx_crc_ = crc32c_update(rx_crc_, p, take);
      rx_hdr_have_ += take;
      rx_pos_ += take;
      if (rx_hdr_have_ == rx_hdr_need_) {
        if (rx_hdr_need_ == sizeof(Ctrl)) {
          rx_hdr_need_ = hdr_len(reinterpret_cast<Ctrl*>(rx_hdr_)->tagged());
        } else {
          rx_header_done();
        }
      }
      return take;
    case RxStage::kPayload:
      take = static_cast<size_t>(std::min<uint64_t>(n, rx_payload_len_ - rx_payload_done_));
      rx_place(p, take);
      rx_crc_ = crc32c_update(rx_crc_, p, take);
      rx_payload_done_ += take;
      rx_pos_ += take;
      if (rx_payload_done_ == rx_payload_len_) rx_stage_ = RxStage::kTrailer;
      return take;
    case RxStage::kTrailer: {
      take = std::min(n, rx_trailer_need_ - rx_trailer_have_);
      std::memcpy(rx_trailer_ + rx_trailer_have_, p, take);
      // Pad octets are under the CRC; the CRC field itself is not.
      size_t pad = rx_trailer_need_ - kMpaCrcSize;
      if (rx_trailer_have_ < pad) {
        size_t crc_part = std::min(take, pad - rx_trailer_have_);
        rx_crc_ = crc32c_update(rx_crc_, p, crc_part);
      }
      rx_trailer_have_ += take;
      rx_pos_ += take;
      if (rx_trailer_have_ == rx_trailer_need_) rx_fpdu_done();
      return take;
    }
    case RxStage::kDead:
      return n;
  }
  return n;
}

// A marker: 4 octets every 512 of the stream. Counted in the CRC unless it
// sits inside the CRC field; its FPDUPTR must point at this FPDU's start.
size_t Qp::rx_marker(const uint8_t* p, size_t n) {
  size_t take = std::min(n, kMpaMarkerSize - rx_marker_have_);
  std::memcpy(rx_marker_ + rx_marker_have_, p, take);
  const bool in_crc_field = rx_stage_ == RxStage::kTrailer &&
                            rx_trailer_have_ >= rx_trailer_need_ - kMpaCrcSize;
  if (!in_crc_field) rx_crc_ = crc32c_update(rx_crc_, p, take);
  rx_marker_have_ += take;
  rx_pos_ += take;
  if (rx_marker_have_ < kMpaMarkerSize) return take;
  rx_marker_have_ = 0;
  ++stats_->markers_rx;
  const auto* m = reinterpret_cast<const MpaMarker*>(rx_marker_);
  const uint64_t marker_at = rx_pos_ - kMpaMarkerSize;
  const bool at_start = rx_stage_ == RxStage::kHdr && rx_hdr_have_ == 0;
  const uint64_t expect = at_start ? 0 : marker_at - rx_fpdu_start_;
  if (m->fpduptr.get() != expect) {
    terminate({TermLayer::kLlp, 0, u8(LlpEcode::kMarker)}, false, false, WcStatus::kFatalErr);
  }
  return take;
}

// The whole DDP/RDMAP header is in: validate it and choose where the payload
// goes. Anything wrong terminates before a payload octet is placed.
bool Qp::rx_header_done() {
  const auto* c = reinterpret_cast<const Ctrl*>(rx_hdr_);
  const bool tagged = c->tagged();
  const uint8_t ddp_etype = u8(tagged ? DdpEtype::kTaggedBuf : DdpEtype::kUntaggedBuf);
  if (c->ddp_version() != kDdpVersion) {
    uint8_t ecode = tagged ? u8(DdpTaggedEcode::kVersion) : u8(DdpUntaggedEcode::kVersion);
    terminate({TermLayer::kDdp, ddp_etype, ecode}, true, false);
    return false;
  }
  if (c->rdmap_version() != kRdmapVersion) {
    terminate({TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kVersion)},
              true, false);
    return false;
  }
  const OpcodeInfo* op = find_opcode(c->opcode());
  if (!op || op->tagged != tagged) {
    terminate({TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode)}, true,
              false);
    return false;
  }
  rx_op_ = op;
  const size_t hdr = op->hdr_len;
  const size_t ulpdu = c->mpa_len.get();
  if (ulpdu < hdr - kMpaLenSize) {  // shorter than its own header: framing is lost
    terminate({TermLayer::kDdp, u8(DdpEtype::kCatastrophic), 0}, false, false,
              WcStatus::kFatalErr);
    return false;
  }
  rx_payload_len_ = ulpdu - (hdr - kMpaLenSize);
  rx_payload_done_ = 0;
  rx_trailer_need_ = mpa_pad(ulpdu) + kMpaCrcSize;
  rx_trailer_have_ = 0;
  rx_sink_ = Sink::kDiscard;
  if (!(this->*op->rx_hdr)()) return false;
  rx_stage_ = rx_payload_len_ ? RxStage::kPayload : RxStage::kTrailer;
  return true;
}

bool Qp::rx_hdr_write() {
  const auto* t = reinterpret_cast<const TaggedHdr*>(rx_hdr_);
  if (rtr_awaited_) {
    if (mpa_.rtr != Rtr::kWrite || rx_payload_len_ != 0) {
      terminate({TermLayer::kLlp, 0, u8(LlpEcode::kNoMatchingRtr)}, false, false,
                WcStatus::kFatalErr);
      return false;
    }
    return true;  // the RTR: nothing to place, checked done in rx_fpdu_done
  }
  if (rx_payload_len_ == 0) return true;  // nothing to place, nothing to check
  AccessResult r = mrs_->check(t->stag.get(), init_.pd, t->to.get(), rx_payload_len_,
                               kAccessRemoteWrite, &rx_dst_);
  if (r != AccessResult::kOk) {
    terminate(cause_for(r, true), true, false);
    return false;
  }
  rx_sink_ = Sink::kLinear;
  return true;
}

// RDMA Read Response: must continue the oldest outstanding Read exactly.
bool Qp::rx_hdr_read_resp() {
  const auto* t = reinterpret_cast<const TaggedHdr*>(rx_hdr_);
  const uint32_t stag = t->stag.get();
  const uint64_t to = t->to.get();
  if (orq_.empty() || orq_.front().atomic_id != 0 || orq_.front().sink_stag != stag ||
      orq_.front().sink_to != to || rx_payload_len_ > orq_.front().remaining) {
    terminate({TermLayer::kDdp, u8(DdpEtype::kTaggedBuf),
               u8(orq_.empty() ? DdpTaggedEcode::kInvalidStag : DdpTaggedEcode::kBaseBounds)},
              true, false, WcStatus::kBadRespErr);
    return false;
  }
  if (rx_payload_len_ > 0) {
    rx_dst_ = reinterpret_cast<uint8_t*>(orq_.front().sink_to);
    rx_sink_ = Sink::kLinear;
  }
  return true;
}

// What every untagged message must satisfy, checked first by each untagged
// opcode's handler: its opcode's queue, the queue's next MSN (RFC 5041
// §5.3), and the agreed RTR first (RFC 6581 §5).
bool Qp::rx_check_untagged() {
  const auto* u = reinterpret_cast<const UntaggedHdr*>(rx_hdr_);
  const auto op = rx_op_->op;
  const uint32_t qn = u->qn.get(), msn = u->msn.get();
  const uint8_t etype = u8(DdpEtype::kUntaggedBuf);
  if (qn != rx_op_->qn) {
    terminate({TermLayer::kDdp, etype, u8(DdpUntaggedEcode::kInvalidQn)}, true, false);
    return false;
  }
  if (msn != rx_msn_[qn]) {
    terminate({TermLayer::kDdp, etype, u8(DdpUntaggedEcode::kMsnRange)}, true, false);
    return false;
  }
  if (rtr_awaited_) {
    // RFC 6581 §5: the first FPDU must be the RTR that was agreed.
    bool rtr = (mpa_.rtr == Rtr::kSend && op == RdmapOpcode::kSend && rx_payload_len_ == 0) ||
               (mpa_.rtr == Rtr::kRead && op == RdmapOpcode::kRdmaReadReq);
    if (!rtr) {
      terminate({TermLayer::kLlp, 0, u8(LlpEcode::kNoMatchingRtr)}, false, false,
                WcStatus::kFatalErr);
      return false;
    }
  }
  return true;
}

// Control messages are single FPDUs of a fixed (or bounded) size.
bool Qp::rx_hdr_ctrl() {
  static_assert(sizeof(rx_ctrl_) >= max_ctrl_len());
  if (!rx_check_untagged()) return false;
  const auto* u = reinterpret_cast<const UntaggedHdr*>(rx_hdr_);
  const size_t want = rx_op_->ctrl_len;
  const bool size_ok = rx_op_->payload == PayloadKind::kFixed
                           ? rx_payload_len_ == want
                           : rx_payload_len_ >= want && rx_payload_len_ <= sizeof(rx_ctrl_);
  if (u->mo.get() != 0 || !u->ctrl.last() || !size_ok) {
    terminate({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kInvalidMo)},
              true, false);
    return false;
  }
  rx_sink_ = Sink::kCtrl;
  return true;
}

// Immediate Data (RFC 7306 §4.2): a control message that consumes a receive.
bool Qp::rx_hdr_imm() {
  if (!rx_hdr_ctrl()) return false;
  if (rx_msg_active_) {  // a new message inside an unfinished Send
    terminate({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kInvalidMo)},
              true, false);
    return false;
  }
  return rx_take_recv();
}

bool Qp::rx_hdr_send() {
  const auto* u = reinterpret_cast<const UntaggedHdr*>(rx_hdr_);
  const uint32_t mo = u->mo.get();
  const uint8_t etype = u8(DdpEtype::kUntaggedBuf);
  if (!rx_check_untagged()) return false;
  if (rtr_awaited_) return true;  // zero-length Send RTR: consumes no buffer
  // A Send: continue the message in progress or start one in a posted receive.
  if (!rx_msg_active_) {
    if (mo != 0) {
      terminate({TermLayer::kDdp, etype, u8(DdpUntaggedEcode::kInvalidMo)}, true, false);
      return false;
    }
    if (!rx_take_recv()) return false;
    rx_inv_stag_ = rx_op_->invalidate ? u->rsvd_ulp.get() : 0;
  } else if (mo != rx_msg_len_) {
    terminate({TermLayer::kDdp, etype, u8(DdpUntaggedEcode::kInvalidMo)}, true, false);
    return false;
  }
  if (rx_to_store_) {
    if (!rx_store_room()) return false;
  } else if (rx_msg_len_ + rx_payload_len_ > rx_wr_cap_) {
    terminate({TermLayer::kDdp, etype, u8(DdpUntaggedEcode::kTooLong)}, true, false,
              WcStatus::kLocLenErr);
    return false;
  }
  rx_solicited_ = rx_op_->solicited;
  rx_sink_ = rx_to_store_ ? Sink::kStore : Sink::kRecv;
  return true;
}

// Takes the next posted receive (own RQ or shared) for a new QN 0 message;
// without one, or behind messages already held, the message is held.
bool Qp::rx_take_recv() {
  Ring<RecvWr>& q = init_.srq ? init_.srq->q : rq_;
  if (q.empty() || !unexp_.empty()) return rx_store_start();
  rx_wr_ = q.front();
  q.pop_front();
  rx_msg_active_ = true;
  rx_msg_len_ = 0;
  rx_sge_ = 0;
  rx_sge_off_ = 0;
  rx_wr_cap_ = 0;
  for (int i = 0; i < rx_wr_.num_sge; ++i) rx_wr_cap_ += rx_wr_.sg_list[i].length;
  return true;
}

// The one copy: transport buffer → destination.
void Qp::rx_place(const uint8_t* p, size_t n) {
  switch (rx_sink_) {
    case Sink::kDiscard:
      return;
    case Sink::kCtrl:
      std::memcpy(rx_ctrl_ + rx_payload_done_, p, n);
      return;
    case Sink::kLinear:
      std::memcpy(rx_dst_ + rx_payload_done_, p, n);
      break;
    case Sink::kRecv:
      for (size_t left = n; left > 0;) {
        const Sge& s = rx_wr_.sg_list[rx_sge_];
        size_t take = static_cast<size_t>(std::min<uint64_t>(left, s.length - rx_sge_off_));
        std::memcpy(reinterpret_cast<uint8_t*>(s.addr + rx_sge_off_), p, take);
        p += take;
        left -= take;
        rx_sge_off_ += take;
        if (rx_sge_off_ == s.length) {
          ++rx_sge_;
          rx_sge_off_ = 0;
        }
      }
      break;
    case Sink::kStore:
      unexp_.put(p, n);
      stats_->unexpected_bytes += n;
      stats_->unexpected_bytes_hwm = std::max(stats_->unexpected_bytes_hwm, unexp_.used());
      break;
  }
  stats_->rx_copy_bytes += n;
  stats_->payload_rx += n;
}

// Pad and CRC are in: verify, then apply the FPDU's effects.
void Qp::rx_fpdu_done() {
  if (mpa_.crc) {
    const uint8_t* c = rx_trailer_ + (rx_trailer_need_ - kMpaCrcSize);
    uint32_t got = uint32_t{c[0]} | (uint32_t{c[1]} << 8) | (uint32_t{c[2]} << 16) |
                   (uint32_t{c[3]} << 24);
    if (got != crc32c_final(rx_crc_)) {
      ++stats_->crc_errors;
      terminate({TermLayer::kLlp, 0, u8(LlpEcode::kCrc)}, false, false, WcStatus::kFatalErr);
      return;
    }
  }
  ++stats_->fpdus_rx;
  const auto* c = reinterpret_cast<const Ctrl*>(rx_hdr_);
  const OpcodeInfo& op = *rx_op_;
  // Reset for the next FPDU before effects, which may terminate.
  rx_stage_ = RxStage::kHdr;
  rx_hdr_have_ = 0;
  rx_hdr_need_ = sizeof(Ctrl);
  rx_crc_ = kCrc32cInit;
  rx_fpdu_start_ = rx_pos_;

  if (rtr_awaited_) {  // the RTR (checked at its header): now we may talk
    rtr_awaited_ = false;
    if (!op.tagged) ++rx_msn_[op.qn];
    if (op.op == RdmapOpcode::kRdmaReadReq) rx_read_request();
    if (owner_) owner_->on_qp_ready(this);
    return;
  }
  // An untagged message's last FPDU completes its MSN (RFC 5041 §5.3);
  // control messages are single FPDUs.
  if (!op.tagged && c->last()) ++rx_msn_[op.qn];
  if (op.rx_done) (this->*op.rx_done)();
}

void Qp::rx_read_resp_done() {
  const bool last = reinterpret_cast<const Ctrl*>(rx_hdr_)->last();
  OrqEntry& o = orq_.front();
  o.sink_to += rx_payload_len_;
  o.remaining -= rx_payload_len_;
  if (last != (o.remaining == 0)) {
    terminate({TermLayer::kDdp, u8(DdpEtype::kTaggedBuf), u8(DdpTaggedEcode::kBaseBounds)}, true,
              false, WcStatus::kBadRespErr);
    return;
  }
  if (!last) return;
  const bool wr_done = o.last_piece;
  orq_.pop_front();
  if (wr_done) sq_response_done();
}

void Qp::rx_send_done() {
  rx_msg_len_ += rx_payload_len_;
  if (reinterpret_cast<const Ctrl*>(rx_hdr_)->last()) rx_recv_complete(false);
}

void Qp::rx_imm_data() {
  rx_solicited_ = rx_op_->solicited;
  rx_recv_complete(true);
}

// A message on QN 0 is complete: its receive completes (RFC 5040 §5.3), or,
// held, waits for one.
void Qp::rx_recv_complete(bool imm) {
  UnexpectedStore::Msg m{
      .len = imm ? 0 : rx_msg_len_, .complete = true, .imm = imm, .solicited = rx_solicited_,
      .imm_data = imm ? reinterpret_cast<const ImmDataPayload*>(rx_ctrl_)->data.get() : 0,
      .inv_stag = rx_inv_stag_};
  rx_msg_active_ = false;
  rx_inv_stag_ = 0;
  if (rx_to_store_) {
    rx_to_store_ = false;
    unexp_.back() = m;
    rx_deliver_unexpected();  // a receive may have been posted meanwhile
    return;
  }
  complete_recv(rx_wr_, m);
}

void Qp::rx_read_request() {
  const auto* rr = reinterpret_cast<const ReadReqPayload*>(rx_ctrl_);
  if (irq_.size() >= mpa_.ird) {  // more Reads outstanding than we granted
    terminate({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kNoBuffer)},
              true, true);
    return;
  }
  const uint32_t size = rr->read_size.get();
  if (size > 0) {
    uint8_t* p;
    AccessResult r = mrs_->check(rr->src_stag.get(), init_.pd, rr->src_to.get(), size,
                                 kAccessRemoteRead, &p);
    if (r != AccessResult::kOk) {
      terminate(cause_for(r, false), true, true);
      return;
    }
  }
  irq_.push_back(IrqEntry{.atomic = false, .sink_stag = rr->sink_stag.get(),
                          .sink_to = rr->sink_to.get(), .src_stag = rr->src_stag.get(),
                          .src_to = rr->src_to.get(), .len = size, .sent = 0, .atomic_id = 0,
                          .orig = 0});
}

// RFC 7306 atomics: executed here, on arrival, with the CPU's own atomic
// instructions so that local threads touching the word see them whole.
void Qp::rx_atomic_request() {
  const auto* a = reinterpret_cast<const AtomicReqPayload*>(rx_ctrl_);
  if (irq_.size() >= mpa_.ird) {
    terminate({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kNoBuffer)},
              true, false);
    return;
  }
  const uint64_t to = a->remote_to.get();
  uint8_t* p;
  AccessResult r = mrs_->check(a->remote_stag.get(), init_.pd, to, 8, kAccessRemoteAtomic, &p);
  if (r == AccessResult::kOk && (to & 7)) r = AccessResult::kBaseBounds;  // must be aligned
  const uint32_t aop = a->opcode.get() & 0xf;
  if (r == AccessResult::kOk && aop > static_cast<uint32_t>(AtomicOpcode::kCompareSwap)) {
    terminate({TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode)},
              true, false);
    return;
  }
  if (r != AccessResult::kOk) {
    terminate(cause_for(r, false), true, false);
    return;
  }
  auto* word = reinterpret_cast<uint64_t*>(p);
  const uint64_t data = a->add_swap.get(), mask = a->add_swap_mask.get();
  uint64_t orig;
  if (aop == static_cast<uint32_t>(AtomicOpcode::kFetchAdd) && mask == 0) {
    orig = __atomic_fetch_add(word, data, __ATOMIC_SEQ_CST);
  } else {
    const uint64_t cmp = a->compare.get(), cmp_mask = a->compare_mask.get();
    const bool add = aop == static_cast<uint32_t>(AtomicOpcode::kFetchAdd);
    const bool always = aop == static_cast<uint32_t>(AtomicOpcode::kSwap);
    orig = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    for (;;) {
      if (!add && !always && ((orig ^ cmp) & cmp_mask)) break;
      uint64_t next = add ? partitioned_add(orig, data, mask) : (orig & ~mask) | (data & mask);
      if (__atomic_compare_exchange_n(word, &orig, next, false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST))
        break;
    }
  }
  irq_.push_back(IrqEntry{.atomic = true, .sink_stag = 0, .sink_to = 0, .src_stag = 0,
                          .src_to = 0, .len = 0, .sent = 0, .atomic_id = a->req_id.get(),
                          .orig = orig});
}

void Qp::rx_atomic_response() {
  const auto* a = reinterpret_cast<const AtomicRespPayload*>(rx_ctrl_);
  if (orq_.empty() || orq_.front().atomic_id == 0 || orq_.front().atomic_id != a->req_id.get()) {
    terminate({TermLayer::kRdmap, u8(RdmapEtype::kRemoteOperation), u8(RdmapEcode::kOpcode)},
              true, false, WcStatus::kBadRespErr);
    return;
  }
  OrqEntry o = orq_.front();
  orq_.pop_front();
  uint64_t v = a->orig_value.get();
  std::memcpy(reinterpret_cast<void*>(o.result_addr), &v, sizeof(v));
  sq_response_done();
}

}  // namespace softrdma::iwarp
