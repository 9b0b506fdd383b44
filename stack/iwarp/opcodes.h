// The RDMAP opcode table (RFC 5040 §4.2 Table 1, RFC 7306 §5.1): what this
// stack knows per opcode, in one place, after Linux siw's iwarp_pktinfo[]
// and rxe's rxe_opcode[]. Transmit copies an entry's control-word template
// and header layout (build_hdr); receive checks a header against its entry
// and dispatches through the entry's handlers. Indexed by the opcode.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stack/iwarp/qp.h"
#include "stack/iwarp/wire.h"

namespace softrdma::iwarp {

// What follows an opcode's header.
enum class PayloadKind : uint8_t {
  kData,       // ULP data of any length, placed in registered memory or a receive
  kFixed,      // a control payload of exactly ctrl_len octets (RFC 5040 §4.4, RFC 7306 §5)
  kTerminate,  // the Terminate header (RFC 5040 §4.8): ctrl_len octets or more
};

struct OpcodeInfo {
  const char* name = nullptr;
  RdmapOpcode op{};
  bool tagged = false;   // DDP tagged (RFC 5041 §4.3) or untagged (§4.4) buffer model
  uint8_t hdr_len = 0;   // MPA ULPDU_Length + DDP + RDMAP header octets
  uint8_t qn = 0;        // untagged queue (RFC 5040 §5.1, RFC 7306 §5.2); 0 when tagged
  Ctrl ctrl{};           // control-word template: T, DV, RV, opcode (TX adds L, the length)
  PayloadKind payload = PayloadKind::kData;
  uint8_t ctrl_len = 0;  // kFixed: the payload's size; kTerminate: its least size
  bool solicited = false;   // Solicited Event (RFC 5040 §4.3)
  bool invalidate = false;  // RsvdULP is the STag to invalidate (RFC 5040 §4.3)
  bool (Qp::*rx_hdr)() = nullptr;   // the header is in: its checks, then where payload goes
  void (Qp::*rx_done)() = nullptr;  // the FPDU is in, its CRC good: its effects (null: none)
};

constexpr Ctrl ctrl_word(bool tagged, RdmapOpcode op) {
  Ctrl c{};
  c.set(tagged, /*is_last=*/false, op);
  return c;
}

// A friend of Qp, so that entries can name its receive handlers.
struct OpcodeTable {
  using Op = RdmapOpcode;
  using Pk = PayloadKind;
  static constexpr uint8_t kTagged = sizeof(TaggedHdr);
  static constexpr uint8_t kUntagged = sizeof(UntaggedHdr);

  static constexpr OpcodeInfo kEntries[kRdmapOpcodeCount] = {
      {.name = "RDMA Write", .op = Op::kRdmaWrite, .tagged = true, .hdr_len = kTagged,
       .ctrl = ctrl_word(true, Op::kRdmaWrite), .payload = Pk::kData,
       .rx_hdr = &Qp::rx_hdr_write},
      {.name = "RDMA Read Request", .op = Op::kRdmaReadReq, .tagged = false,
       .hdr_len = kUntagged, .qn = kQnReadReq, .ctrl = ctrl_word(false, Op::kRdmaReadReq),
       .payload = Pk::kFixed, .ctrl_len = sizeof(ReadReqPayload), .rx_hdr = &Qp::rx_hdr_ctrl,
       .rx_done = &Qp::rx_read_request},
      {.name = "RDMA Read Response", .op = Op::kRdmaReadResp, .tagged = true, .hdr_len = kTagged,
       .ctrl = ctrl_word(true, Op::kRdmaReadResp), .payload = Pk::kData,
       .rx_hdr = &Qp::rx_hdr_read_resp, .rx_done = &Qp::rx_read_resp_done},
      {.name = "Send", .op = Op::kSend, .tagged = false, .hdr_len = kUntagged, .qn = kQnSend,
       .ctrl = ctrl_word(false, Op::kSend), .payload = Pk::kData, .rx_hdr = &Qp::rx_hdr_send,
       .rx_done = &Qp::rx_send_done},
      {.name = "Send with Invalidate", .op = Op::kSendInv, .tagged = false, .hdr_len = kUntagged,
       .qn = kQnSend, .ctrl = ctrl_word(false, Op::kSendInv), .payload = Pk::kData,
       .invalidate = true, .rx_hdr = &Qp::rx_hdr_send, .rx_done = &Qp::rx_send_done},
      {.name = "Send with Solicited Event", .op = Op::kSendSe, .tagged = false,
       .hdr_len = kUntagged, .qn = kQnSend, .ctrl = ctrl_word(false, Op::kSendSe),
       .payload = Pk::kData, .solicited = true, .rx_hdr = &Qp::rx_hdr_send,
       .rx_done = &Qp::rx_send_done},
      {.name = "Send with Solicited Event and Invalidate", .op = Op::kSendSeInv, .tagged = false,
       .hdr_len = kUntagged, .qn = kQnSend, .ctrl = ctrl_word(false, Op::kSendSeInv),
       .payload = Pk::kData, .solicited = true, .invalidate = true, .rx_hdr = &Qp::rx_hdr_send,
       .rx_done = &Qp::rx_send_done},
      {.name = "Terminate", .op = Op::kTerminate, .tagged = false, .hdr_len = kUntagged,
       .qn = kQnTerminate, .ctrl = ctrl_word(false, Op::kTerminate), .payload = Pk::kTerminate,
       .ctrl_len = sizeof(TerminatePayload), .rx_hdr = &Qp::rx_hdr_ctrl,
       .rx_done = &Qp::rx_terminate},
      {.name = "Immediate Data", .op = Op::kImmData, .tagged = false, .hdr_len = kUntagged,
       .qn = kQnSend, .ctrl = ctrl_word(false, Op::kImmData), .payload = Pk::kFixed,
       .ctrl_len = sizeof(ImmDataPayload), .rx_hdr = &Qp::rx_hdr_imm,
       .rx_done = &Qp::rx_imm_data},
      {.name = "Immediate Data with Solicited Event", .op = Op::kImmDataSe, .tagged = false,
       .hdr_len = kUntagged, .qn = kQnSend, .ctrl = ctrl_word(false, Op::kImmDataSe),
       .payload = Pk::kFixed, .ctrl_len = sizeof(ImmDataPayload), .solicited = true,
       .rx_hdr = &Qp::rx_hdr_imm, .rx_done = &Qp::rx_imm_data},
      {.name = "Atomic Request", .op = Op::kAtomicReq, .tagged = false, .hdr_len = kUntagged,
       .qn = kQnAtomicReq, .ctrl = ctrl_word(false, Op::kAtomicReq), .payload = Pk::kFixed,
       .ctrl_len = sizeof(AtomicReqPayload), .rx_hdr = &Qp::rx_hdr_ctrl,
       .rx_done = &Qp::rx_atomic_request},
      {.name = "Atomic Response", .op = Op::kAtomicResp, .tagged = false, .hdr_len = kUntagged,
       .qn = kQnAtomicResp, .ctrl = ctrl_word(false, Op::kAtomicResp), .payload = Pk::kFixed,
       .ctrl_len = sizeof(AtomicRespPayload), .rx_hdr = &Qp::rx_hdr_ctrl,
       .rx_done = &Qp::rx_atomic_response},
  };
};

// A received opcode's entry; null for the reserved ones (0xc-0xf), checked
// before the table is indexed.
constexpr const OpcodeInfo* find_opcode(uint8_t op) {
  return op < kRdmapOpcodeCount ? &OpcodeTable::kEntries[op] : nullptr;
}
// One of ours: always in the table.
constexpr const OpcodeInfo& opcode_info(RdmapOpcode op) {
  return OpcodeTable::kEntries[static_cast<uint8_t>(op)];
}

// The entries agree with the opcode they sit at, the wire structs and the
// DDP header the T bit selects (hdr_len), which the receiver uses before it
// has checked the opcode.
constexpr bool opcode_entry_ok(int i) {
  const OpcodeInfo& e = OpcodeTable::kEntries[i];
  const bool layout = e.hdr_len == hdr_len(e.tagged) &&
                      e.hdr_len == (e.tagged ? sizeof(TaggedHdr) : sizeof(UntaggedHdr));
  const bool ctrl = e.ctrl.tagged() == e.tagged && !e.ctrl.last() && e.ctrl.opcode() == i &&
                    e.ctrl.ddp_version() == kDdpVersion &&
                    e.ctrl.rdmap_version() == kRdmapVersion && e.ctrl.mpa_len.get() == 0;
  // Tagged messages carry data only and no RDMAP flags; untagged ones name
  // a queue; only data messages invalidate, and only they have no size.
  const bool model = e.tagged ? (e.qn == 0 && e.payload == PayloadKind::kData && !e.solicited &&
                                 !e.invalidate)
                              : e.qn < kQnCount;
  const bool sized = (e.payload == PayloadKind::kData) == (e.ctrl_len == 0) &&
                     (e.payload == PayloadKind::kData || !e.invalidate);
  // (No test of the handlers here: GCC's UBSan makes a member pointer's
  // comparison non-constant; opcodes_test dispatches every opcode instead.)
  return static_cast<int>(e.op) == i && e.name && layout && ctrl && model && sized;
}
constexpr bool opcode_table_ok() {
  for (int i = 0; i < kRdmapOpcodeCount; ++i)
    if (!opcode_entry_ok(i)) return false;
  return true;
}
static_assert(opcode_table_ok());
static_assert(find_opcode(kRdmapOpcodeCount) == nullptr && find_opcode(0xf) == nullptr);

// The largest control payload: what TX's and RX's control buffers must hold.
constexpr size_t max_ctrl_len() {
  size_t m = 0;
  for (const OpcodeInfo& e : OpcodeTable::kEntries)
    if (e.payload == PayloadKind::kFixed && e.ctrl_len > m) m = e.ctrl_len;
  return m;
}

// The fields of one FPDU's header that are not the opcode's: tagged ones use
// stag/to, untagged ones rsvd_ulp/msn/mo (their QN is the opcode's).
struct HdrFields {
  uint16_t ulpdu_len = 0;  // MPA ULPDU_Length: the header after it plus payload
  bool last = false;       // DDP L
  uint32_t stag = 0;
  uint64_t to = 0;
  uint32_t rsvd_ulp = 0;
  uint32_t msn = 0;
  uint32_t mo = 0;
};

// Writes op's header (RFC 5041 §4.2-4.4, RFC 5040 §4) into out, which holds
// sizeof(UntaggedHdr) octets; returns its length.
inline size_t build_hdr(const OpcodeInfo& op, const HdrFields& f, uint8_t* out) {
  auto* c = reinterpret_cast<Ctrl*>(out);
  *c = op.ctrl;
  c->mpa_len.set(f.ulpdu_len);
  if (f.last) c->ddp |= kDdpLast;
  if (op.tagged) {
    auto* t = reinterpret_cast<TaggedHdr*>(out);
    t->stag.set(f.stag);
    t->to.set(f.to);
  } else {
    auto* u = reinterpret_cast<UntaggedHdr*>(out);
    u->rsvd_ulp.set(f.rsvd_ulp);
    u->qn.set(op.qn);
    u->msn.set(f.msn);
    u->mo.set(f.mo);
  }
  return op.hdr_len;
}

}  // namespace softrdma::iwarp
