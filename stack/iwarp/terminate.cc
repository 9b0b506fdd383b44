// Terminate (RFC 5040 §4.8, §7): the one place where internal errors become
// the RFCs' layer / error type / error code, and where a received Terminate
// becomes a completion status.
#include <cstring>

#include "stack/iwarp/qp.h"

namespace softrdma::iwarp {

namespace {
constexpr uint8_t u8(auto v) { return static_cast<uint8_t>(v); }
}  // namespace

// Tagged-buffer checks belong to DDP (RFC 5041 §7.2: STag, bounds, stream,
// wrap), except access rights, which RDMAP owns (RFC 5040 §7.2). A Read
// Request's source is checked by RDMAP as a Remote Protection Error.
TermCause cause_for(AccessResult r, bool ddp_tagged) {
  if (ddp_tagged && r != AccessResult::kAccessRights) {
    DdpTaggedEcode e = DdpTaggedEcode::kInvalidStag;
    if (r == AccessResult::kBaseBounds) e = DdpTaggedEcode::kBaseBounds;
    if (r == AccessResult::kPdMismatch) e = DdpTaggedEcode::kStagNotAssoc;
    if (r == AccessResult::kToWrap) e = DdpTaggedEcode::kToWrap;
    return {TermLayer::kDdp, u8(DdpEtype::kTaggedBuf), u8(e)};
  }
  RdmapEcode e = RdmapEcode::kInvalidStag;
  if (r == AccessResult::kBaseBounds) e = RdmapEcode::kBaseBounds;
  if (r == AccessResult::kAccessRights) e = RdmapEcode::kAccessRights;
  if (r == AccessResult::kPdMismatch) e = RdmapEcode::kStagNotAssoc;
  if (r == AccessResult::kToWrap) e = RdmapEcode::kToWrap;
  return {TermLayer::kRdmap, u8(RdmapEtype::kRemoteProtection), u8(e)};
}

WcStatus Qp::status_for(const TermCause& c) {
  switch (c.layer) {
    case TermLayer::kLlp:
      return WcStatus::kFatalErr;
    case TermLayer::kDdp:
      if (c.etype == u8(DdpEtype::kTaggedBuf)) return WcStatus::kRemAccessErr;
      if (c.etype == u8(DdpEtype::kUntaggedBuf))
        return c.ecode == u8(DdpUntaggedEcode::kNoBuffer) ? WcStatus::kRemOpErr
                                                           : WcStatus::kRemInvReqErr;
      return WcStatus::kFatalErr;
    case TermLayer::kRdmap:
      if (c.etype == u8(RdmapEtype::kRemoteProtection)) return WcStatus::kRemAccessErr;
      if (c.etype == u8(RdmapEtype::kRemoteOperation))
        return (c.ecode == u8(RdmapEcode::kOpcode) || c.ecode == u8(RdmapEcode::kVersion))
                   ? WcStatus::kRemInvReqErr
                   : WcStatus::kRemOpErr;
      return WcStatus::kFatalErr;
  }
  return WcStatus::kFatalErr;
}

// Bad input from the peer: stop receiving, send a Terminate naming the
// cause (with the offending headers where the RFC asks for them), then the
// QP goes to error once the Terminate is on its way.
//
// `local` is what our own first outstanding request completes with: a
// request of ours the error is about (a receive too short, a Read whose
// response is wrong) gets its own status; requests the peer's error does
// not concern are flushed.
void Qp::terminate(TermCause cause, bool with_ddp_hdr, bool with_rdmap_hdr, WcStatus local) {
  rx_stage_ = RxStage::kDead;
  if (state_ != QpState::kRts || set_state(QpState::kTerminate) < 0) {
    to_error(local, cause.packed());
    return;
  }
  term_cause_ = cause;
  term_local_ = local;
  queue_terminate_frame(cause, with_ddp_hdr, with_rdmap_hdr);
  ++stats_->terminates_tx;
  // The Terminate goes before anything else; a message half sent is cut.
  tx_.active = false;
  tx_progress();
}

void Qp::queue_terminate_frame(const TermCause& cause, bool with_ddp_hdr, bool with_rdmap_hdr) {
  const auto* c = reinterpret_cast<const Ctrl*>(rx_hdr_);
  uint32_t ctrl = (uint32_t{static_cast<uint8_t>(cause.layer)} << kTermLayerShift) |
                  (uint32_t{cause.etype} << kTermEtypeShift) |
                  (uint32_t{cause.ecode} << kTermEcodeShift);
  if (with_ddp_hdr) ctrl |= kTermFlagM | kTermFlagD;
  if (with_rdmap_hdr) ctrl |= kTermFlagR;
  term_frame_.assign(sizeof(TerminatePayload), 0);
  reinterpret_cast<TerminatePayload*>(term_frame_.data())->ctrl.set(ctrl);
  if (with_ddp_hdr) {
    // DDP Segment Length, then the DDP header as received (after MPA length).
    term_frame_.push_back(rx_hdr_[0]);
    term_frame_.push_back(rx_hdr_[1]);
    size_t n = hdr_len(c->tagged()) - kMpaLenSize;
    term_frame_.insert(term_frame_.end(), rx_hdr_ + kMpaLenSize, rx_hdr_ + kMpaLenSize + n);
  }
  if (with_rdmap_hdr) term_frame_.insert(term_frame_.end(), rx_ctrl_, rx_ctrl_ + kTermRdmapHdrSize);
}

// The peer terminated: remember why; every outstanding request fails with
// the matching status. The stream closes after this.
void Qp::rx_terminate() {
  const auto* t = reinterpret_cast<const TerminatePayload*>(rx_ctrl_);
  uint32_t ctrl = t->ctrl.get();
  term_rx_ = TermCause{static_cast<TermLayer>((ctrl >> kTermLayerShift) & 0xf),
                       static_cast<uint8_t>((ctrl >> kTermEtypeShift) & 0xf),
                       static_cast<uint8_t>((ctrl >> kTermEcodeShift) & 0xff)};
  term_rx_valid_ = true;
  ++stats_->terminates_rx;
  rx_stage_ = RxStage::kDead;
  to_error(status_for(term_rx_), term_rx_.packed());
}

}  // namespace softrdma::iwarp
