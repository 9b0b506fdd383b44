// Sends that find no posted receive (unexpected.h): held within the QP's
// bound, given to receives in MSN order as they are posted, and completed
// then, as if they had arrived then. Beyond the bound the peer has overrun
// us and gets RFC 5041's Terminate (untagged buffer, no buffer available).
#include "stack/iwarp/qp.h"

namespace softrdma::iwarp {

namespace {

constexpr uint8_t u8(auto v) { return static_cast<uint8_t>(v); }

uint64_t recv_capacity(const RecvWr& wr) {
  uint64_t cap = 0;
  for (int i = 0; i < wr.num_sge; ++i) cap += wr.sg_list[i].length;
  return cap;
}

}  // namespace

// A new QN 0 message with no receive for it: opens a held message.
bool Qp::rx_store_start() {
  if (!unexp_.can_start()) {
    ++stats_->unexpected_overruns;
    terminate({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kNoBuffer)},
              true, false);
    return false;
  }
  unexp_.start();
  ++stats_->unexpected_msgs;
  rx_to_store_ = true;
  rx_msg_active_ = true;
  rx_msg_len_ = 0;
  return true;
}

// The current FPDU's payload fits what is left of the bound.
bool Qp::rx_store_room() {
  if (unexp_.room(rx_payload_len_)) return true;
  ++stats_->unexpected_overruns;
  terminate({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kNoBuffer)}, true,
            false);
  return false;
}

void Qp::rx_deliver_unexpected() {
  Ring<RecvWr>& q = init_.srq ? init_.srq->q : rq_;
  while (state_ == QpState::kRts && !q.empty()) {
    const UnexpectedStore::Msg* held = unexp_.ready();
    if (!held) return;
    const UnexpectedStore::Msg m = *held;
    const RecvWr wr = q.front();
    q.pop_front();
    if (m.len > recv_capacity(wr)) {
      // As a too-short posted receive fails (qp_rx.cc rx_hdr_send).
      unexp_.clear();
      rx_to_store_ = false;
      rx_wr_ = wr;
      rx_msg_active_ = true;
      terminate({TermLayer::kDdp, u8(DdpEtype::kUntaggedBuf), u8(DdpUntaggedEcode::kTooLong)},
                false, false, WcStatus::kLocLenErr);
      return;
    }
    unexp_.take(wr.sg_list, wr.num_sge);
    stats_->rx_copy_bytes += m.len;  // the second copy, out of the store
    complete_recv(wr, m);
  }
}

void Qp::complete_recv(const RecvWr& wr, const UnexpectedStore::Msg& m) {
  Wc wc{.wr_id = wr.wr_id, .status = WcStatus::kSuccess,
        .opcode = m.imm ? WcOpcode::kRecvRdmaImm : WcOpcode::kRecv,
        .byte_len = static_cast<uint32_t>(m.len), .qp_num = num_};
  if (m.solicited) wc.flags |= kWcSolicited;
  if (m.imm) {
    wc.flags |= kWcWithImm;
    wc.imm_data = m.imm_data;
  }
  if (m.inv_stag) {
    if (mrs_->invalidate(m.inv_stag, init_.pd) != AccessResult::kOk) {
      rx_to_store_ = false;
      rx_wr_ = wr;
      rx_msg_active_ = true;  // the receive fails with the stream
      terminate({TermLayer::kRdmap, u8(RdmapEtype::kRemoteProtection),
                 u8(RdmapEcode::kCannotInvalidate)},
                false, false, WcStatus::kRemAccessErr);
      return;
    }
    wc.flags |= kWcWithInv;
    wc.invalidated_stag = m.inv_stag;
  }
  init_.recv_cq->push(wc);
}

}  // namespace softrdma::iwarp
