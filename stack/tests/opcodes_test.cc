// The RDMAP opcode table (stack/iwarp/opcodes.h) against the RFCs, written
// out here apart from it: each entry's facts (RFC 5040 §4-5, RFC 7306), the
// headers transmit builds from it, octet for octet as the RFC figures lay
// them out (by build_hdr and on the wire from a real QP), and receive
// dispatch reaching each opcode's handler, seen by the handler's effect.
#include "stack/iwarp/opcodes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "stack/tests/fake_conn.h"
#include "stack/tests/raw_peer.h"

namespace softrdma::iwarp {

struct QpTestPeer {
  static void bound_unexpected(Qp& q, uint64_t bytes, uint32_t msgs) {
    q.unexp_.set_bounds(bytes, msgs);
  }
  struct Handlers {
    bool (Qp::*hdr)();
    void (Qp::*done)();
  };
  // The handlers each opcode must reach.
  static Handlers expected(RdmapOpcode op) {
    switch (op) {
      case RdmapOpcode::kRdmaWrite: return {&Qp::rx_hdr_write, nullptr};
      case RdmapOpcode::kRdmaReadReq: return {&Qp::rx_hdr_ctrl, &Qp::rx_read_request};
      case RdmapOpcode::kRdmaReadResp: return {&Qp::rx_hdr_read_resp, &Qp::rx_read_resp_done};
      case RdmapOpcode::kSend:
      case RdmapOpcode::kSendInv:
      case RdmapOpcode::kSendSe:
      case RdmapOpcode::kSendSeInv: return {&Qp::rx_hdr_send, &Qp::rx_send_done};
      case RdmapOpcode::kTerminate: return {&Qp::rx_hdr_ctrl, &Qp::rx_terminate};
      case RdmapOpcode::kImmData:
      case RdmapOpcode::kImmDataSe: return {&Qp::rx_hdr_imm, &Qp::rx_imm_data};
      case RdmapOpcode::kAtomicReq: return {&Qp::rx_hdr_ctrl, &Qp::rx_atomic_request};
      case RdmapOpcode::kAtomicResp: return {&Qp::rx_hdr_ctrl, &Qp::rx_atomic_response};
    }
    return {nullptr, nullptr};
  }
};

}  // namespace softrdma::iwarp

namespace softrdma::testing {
namespace {

using iwarp::find_opcode;
using iwarp::OpcodeInfo;
using iwarp::PayloadKind;
using iwarp::RdmapOpcode;

RdmapOpcode op_at(int i) { return static_cast<RdmapOpcode>(i); }

RecvWr recv_wr(uint64_t id, uint64_t addr, uint32_t len, uint32_t stag) {
  RecvWr wr{.wr_id = id, .num_sge = 1};
  wr.sg_list[0] = Sge{addr, len, stag};
  return wr;
}

// ---------------------------------------------------------------------------
// The entries.
// ---------------------------------------------------------------------------

struct Expect {
  bool tagged;
  size_t hdr_len;
  uint32_t qn;
  PayloadKind payload;
  size_t ctrl_len;
  bool solicited, invalidate;
};

// RFC 5040 §4.2 Table 1 and §5.1 (queues 0-2), RFC 7306 §5.1-5.2 (queues
// 3-4, Immediate Data on queue 0); sizes from the RFC figures: tagged DDP
// header 14 + MPA length 2, untagged 18 + 2; Read Request 28, Terminate
// control 4, Immediate Data 8, Atomic Request 52, Atomic Response 12.
constexpr Expect kExpect[] = {
    {true, 16, 0, PayloadKind::kData, 0, false, false},       // RDMA Write
    {false, 20, 1, PayloadKind::kFixed, 28, false, false},    // RDMA Read Request
    {true, 16, 0, PayloadKind::kData, 0, false, false},       // RDMA Read Response
    {false, 20, 0, PayloadKind::kData, 0, false, false},      // Send
    {false, 20, 0, PayloadKind::kData, 0, false, true},       // Send with Invalidate
    {false, 20, 0, PayloadKind::kData, 0, true, false},       // Send with SE
    {false, 20, 0, PayloadKind::kData, 0, true, true},        // Send with SE and Invalidate
    {false, 20, 2, PayloadKind::kTerminate, 4, false, false},  // Terminate
    {false, 20, 0, PayloadKind::kFixed, 8, false, false},     // Immediate Data
    {false, 20, 0, PayloadKind::kFixed, 8, true, false},      // Immediate Data with SE
    {false, 20, 3, PayloadKind::kFixed, 52, false, false},    // Atomic Request
    {false, 20, 4, PayloadKind::kFixed, 12, false, false},    // Atomic Response
};
static_assert(std::size(kExpect) == iwarp::kRdmapOpcodeCount);

TEST(OpcodeTableTest, EntriesMatchTheRfcs) {
  for (int i = 0; i < iwarp::kRdmapOpcodeCount; ++i) {
    const OpcodeInfo* e = find_opcode(static_cast<uint8_t>(i));
    ASSERT_NE(e, nullptr) << i;
    SCOPED_TRACE(e->name);
    const Expect& x = kExpect[i];
    EXPECT_EQ(static_cast<int>(e->op), i);
    EXPECT_EQ(&iwarp::opcode_info(op_at(i)), e);
    EXPECT_EQ(e->tagged, x.tagged);
    EXPECT_EQ(e->hdr_len, x.hdr_len);
    EXPECT_EQ(e->qn, x.qn);
    EXPECT_EQ(e->payload, x.payload);
    EXPECT_EQ(e->ctrl_len, x.ctrl_len);
    EXPECT_EQ(e->solicited, x.solicited);
    EXPECT_EQ(e->invalidate, x.invalidate);
    // The template: T as the model says, L clear, DV 1, RV 1, the opcode.
    EXPECT_EQ(e->ctrl.ddp, (x.tagged ? 0x81 : 0x01));
    EXPECT_EQ(e->ctrl.rdmap, 0x40 | i);
    EXPECT_EQ(e->ctrl.mpa_len.get(), 0);
  }
}

TEST(OpcodeTableTest, ReservedOpcodesHaveNoEntry) {
  for (int op = iwarp::kRdmapOpcodeCount; op < 256; ++op)
    EXPECT_EQ(find_opcode(static_cast<uint8_t>(op)), nullptr) << op;
}

TEST(OpcodeTableTest, NamesAreTheRfcs) {
  const char* want[] = {"RDMA Write", "RDMA Read Request", "RDMA Read Response", "Send",
                        "Send with Invalidate", "Send with Solicited Event",
                        "Send with Solicited Event and Invalidate", "Terminate",
                        "Immediate Data", "Immediate Data with Solicited Event",
                        "Atomic Request", "Atomic Response"};
  for (int i = 0; i < iwarp::kRdmapOpcodeCount; ++i)
    EXPECT_STREQ(iwarp::opcode_info(op_at(i)).name, want[i]);
}

// ---------------------------------------------------------------------------
// Headers transmit builds.
// ---------------------------------------------------------------------------

// build_hdr with every field non-zero where the layout has one, L clear:
// fields land where RFC 5041 §4.3 / §4.4 put them, big-endian, and only there.
TEST(OpcodeTxTest, BuildHdrGoldenBytes) {
  const iwarp::HdrFields f{.ulpdu_len = 0x05a1, .last = false, .stag = 0x11223344,
                           .to = 0x0102030405060708ull, .rsvd_ulp = 0xcafebabe,
                           .msn = 0x80000001u, .mo = 0x00abcdefu};
  struct Case {
    RdmapOpcode op;
    Bytes want;
  };
  const Case cases[] = {
      {RdmapOpcode::kRdmaReadResp,
       {0x05, 0xa1, 0x81, 0x42,                           // length | T, DV 1 | RV 1, Read Resp
        0x11, 0x22, 0x33, 0x44,                           // Data Sink STag
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}},  // Data Sink Tagged Offset
      {RdmapOpcode::kSendSeInv,
       {0x05, 0xa1, 0x01, 0x46,  // length | DV 1 | RV 1, Send with SE and Invalidate
        0xca, 0xfe, 0xba, 0xbe,  // RsvdULP: the Invalidate STag
        0x00, 0x00, 0x00, 0x00,  // QN 0
        0x80, 0x00, 0x00, 0x01,  // MSN
        0x00, 0xab, 0xcd, 0xef}},  // MO
      {RdmapOpcode::kAtomicResp,
       {0x05, 0xa1, 0x01, 0x4b, 0xca, 0xfe, 0xba, 0xbe, 0x00, 0x00, 0x00, 0x04,  // QN 4
        0x80, 0x00, 0x00, 0x01, 0x00, 0xab, 0xcd, 0xef}},
  };
  for (const Case& c : cases) {
    uint8_t h[sizeof(iwarp::UntaggedHdr)];
    std::memset(h, 0xee, sizeof(h));
    const size_t n = iwarp::build_hdr(iwarp::opcode_info(c.op), f, h);
    EXPECT_EQ(Bytes(h, h + n), c.want) << iwarp::opcode_info(c.op).name;
  }
  // L is the one bit `last` adds.
  uint8_t h[sizeof(iwarp::UntaggedHdr)];
  iwarp::HdrFields last = f;
  last.last = true;
  iwarp::build_hdr(iwarp::opcode_info(RdmapOpcode::kRdmaWrite), last, h);
  EXPECT_EQ(Bytes(h, h + 4), (Bytes{0x05, 0xa1, 0xc1, 0x40}));
}

// One QP and the stream under it; the far end is this test.
struct Rig {
  static constexpr uint32_t kAll =
      kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic;

  Rig() : buf(8192), mine(FakeConnConfig{}, 1), peer(FakeConnConfig{}, 2) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 7 + 3);
    stag = h.reg(buf.data(), buf.size(), kAll);
    FakeConn::join(mine, peer);
    EXPECT_EQ(h.qp->start(&mine, mpa_pair(true, false, false).first, true), 0);
  }
  uint64_t addr(size_t off) const { return reinterpret_cast<uint64_t>(buf.data()) + off; }
  SendWr wr(uint64_t id, WrOpcode op, size_t off, uint32_t len, uint32_t flags = 0) const {
    SendWr w{.wr_id = id, .opcode = op, .flags = kWrSignaled | flags, .num_sge = 1};
    w.sg_list[0] = Sge{addr(off), len, stag};
    return w;
  }
  // An FPDU from the far end: framed, CRC'd, received.
  void feed(const Bytes& hdr, const Bytes& payload) {
    const Bytes f = frame_fpdu(hdr, payload);
    mine.inject(f.data(), f.size());
    h.qp->rx_progress();
  }
  // Every FPDU the QP sent (MPA length through payload), CRCs checked.
  std::vector<Bytes> sent() {
    std::vector<Bytes> out;
    const uint8_t* p = peer.pending_data();
    for (size_t off = 0, n = peer.pending(); off < n;) {
      const size_t ulpdu = (size_t{p[off]} << 8) | p[off + 1];
      const size_t covered = iwarp::kMpaLenSize + ulpdu + iwarp::mpa_pad(ulpdu);
      EXPECT_LE(off + covered + iwarp::kMpaCrcSize, n) << "a cut FPDU";
      if (off + covered + iwarp::kMpaCrcSize > n) break;
      uint32_t crc = 0;
      for (int i = 0; i < 4; ++i) crc |= uint32_t{p[off + covered + i]} << (8 * i);
      EXPECT_EQ(crc, crc32c(p + off, covered)) << "FPDU " << out.size();
      out.emplace_back(p + off, p + off + iwarp::kMpaLenSize + ulpdu);
      off += covered + iwarp::kMpaCrcSize;
    }
    return out;
  }

  FakeHost h{1};
  std::vector<uint8_t> buf;
  uint32_t stag = 0;
  FakeConn mine, peer;
};

// A real QP sends one message of every opcode; each FPDU's header is
// compared with the RFC layout, octet for octet.
TEST(OpcodeTxTest, HeadersOnTheWireMatchRfcLayout) {
  Rig r;
  iwarp::Qp& q = *r.h.qp;
  SendWr inv = r.wr(2, WrOpcode::kSendWithInv, 0, 10);
  inv.invalidate_stag = 0xcafebabe;
  SendWr se_inv = inv;
  se_inv.flags |= kWrSolicited;
  SendWr write = r.wr(5, WrOpcode::kWrite, 0, 10);
  write.rkey = 0x11223344;
  write.remote_addr = 0x0000700000001000ull;
  SendWr imm_se = r.wr(6, WrOpcode::kImmData, 0, 0, kWrSolicited);
  imm_se.num_sge = 0;
  imm_se.imm_data = 0x0102030405060708ull;
  SendWr imm = imm_se;
  imm.flags = kWrSignaled;
  SendWr read = r.wr(8, WrOpcode::kRead, 256, 16);
  read.rkey = 0x55667788;
  read.remote_addr = 0x3000;
  SendWr fadd = r.wr(9, WrOpcode::kAtomicFetchAdd, 512, 8);
  fadd.rkey = 0x55667788;
  fadd.remote_addr = 0x4000;
  fadd.compare_add = 1;
  for (const SendWr& w : {r.wr(1, WrOpcode::kSend, 0, 10), inv,
                          r.wr(3, WrOpcode::kSend, 0, 10, kWrSolicited), se_inv, write, imm_se,
                          imm, read, fadd})
    ASSERT_EQ(q.post_send(w), 0);
  // Responses, then a Terminate: the far end asks for a Read and an
  // Atomic, then Sends with no receive posted, beyond the 2 bytes the QP
  // may hold for want of one.
  iwarp::QpTestPeer::bound_unexpected(q, 2, 16);
  r.feed(untagged_hdr(RdmapOpcode::kRdmaReadReq, true, iwarp::kQnReadReq, 1, 0),
         read_req_payload(0x99aabbcc, 0x2000, 8, r.stag, r.addr(64)));
  r.feed(untagged_hdr(RdmapOpcode::kAtomicReq, true, iwarp::kQnAtomicReq, 1, 0),
         atomic_req_payload(iwarp::AtomicOpcode::kFetchAdd, 7, r.stag, r.addr(1024), 1));
  r.feed(untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, 1, 0), Bytes(4, 0));

  const std::vector<Bytes> want = {
      // ULPDU_Length | T L Rsvd DV | RV Rsvd Opcode | RsvdULP | QN | MSN | MO
      {0x00, 0x1c, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},  // Send
      {0x00, 0x1c, 0x41, 0x44, 0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0},
      {0x00, 0x1c, 0x41, 0x45, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0},  // Send SE
      {0x00, 0x1c, 0x41, 0x46, 0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0},
      // ULPDU_Length | T L Rsvd DV | RV Rsvd Opcode | STag | TO
      {0x00, 0x18, 0xc1, 0x40, 0x11, 0x22, 0x33, 0x44, 0, 0, 0x70, 0, 0, 0, 0x10, 0},  // Write
      {0x00, 0x1a, 0x41, 0x49, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0},  // Imm SE
      {0x00, 0x1a, 0x41, 0x48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0},  // Imm
      {0x00, 0x2e, 0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0},  // Read Req
      {0x00, 0x46, 0x41, 0x4a, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0},  // Atomic Req
      {0x00, 0x16, 0xc1, 0x42, 0x99, 0xaa, 0xbb, 0xcc, 0, 0, 0, 0, 0, 0, 0x20, 0},  // Read Resp
      {0x00, 0x1e, 0x41, 0x4b, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0},  // Atomic Resp
      {0x00, 0x2a, 0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0},  // Terminate
  };
  const std::vector<Bytes> got = r.sent();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_GE(got[i].size(), want[i].size()) << "FPDU " << i;
    EXPECT_EQ(Bytes(got[i].begin(), got[i].begin() + static_cast<long>(want[i].size())), want[i])
        << "FPDU " << i << ", " << find_opcode(got[i][3] & 0xf)->name;
  }
  // The payloads behind them: data from the SGEs, control payloads whole.
  EXPECT_EQ(Bytes(got[0].begin() + 20, got[0].end()), Bytes(r.buf.begin(), r.buf.begin() + 10));
  EXPECT_EQ(Bytes(got[5].begin() + 20, got[5].end()),
            (Bytes{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}));
  EXPECT_EQ(Bytes(got[9].begin() + 16, got[9].end()), Bytes(r.buf.begin() + 64, r.buf.begin() + 72));
  EXPECT_EQ(Bytes(got[11].begin() + 20, got[11].begin() + 24), (Bytes{0x12, 0x02, 0xc0, 0x00}))
      << "DDP, untagged buffer, no buffer; M and D";
}

// ---------------------------------------------------------------------------
// Receive dispatch.
// ---------------------------------------------------------------------------

TEST(OpcodeRxTest, TableNamesEachOpcodesHandlers) {
  for (int i = 0; i < iwarp::kRdmapOpcodeCount; ++i) {
    const OpcodeInfo& e = iwarp::opcode_info(op_at(i));
    const iwarp::QpTestPeer::Handlers want = iwarp::QpTestPeer::expected(op_at(i));
    EXPECT_TRUE(e.rx_hdr == want.hdr) << e.name;
    EXPECT_TRUE(e.rx_done == want.done) << e.name;
  }
}

Bytes be64(uint64_t v) {
  Bytes b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  return b;
}

// One FPDU of each opcode into a fresh QP: what its handler, and only it,
// does (memory written, a response sent, a completion with its flags, the
// QP in error) shows that dispatch reached it.
TEST(OpcodeRxTest, EachOpcodeReachesItsHandler) {
  for (int i = 0; i < iwarp::kRdmapOpcodeCount; ++i) {
    const RdmapOpcode op = op_at(i);
    SCOPED_TRACE(iwarp::opcode_info(op).name);
    Rig r;
    iwarp::Qp& q = *r.h.qp;
    const Bytes data = {0xd1, 0xd2, 0xd3, 0xd4, 0xd5};
    const uint32_t inv_stag = r.h.reg(r.buf.data() + 4096, 64, Rig::kAll);
    auto sent_ops = [&r] {
      std::vector<int> ops;
      for (const Bytes& f : r.sent()) ops.push_back(f[3] & 0xf);
      return ops;
    };
    const bool is_send = op == RdmapOpcode::kSend || op == RdmapOpcode::kSendInv ||
                         op == RdmapOpcode::kSendSe || op == RdmapOpcode::kSendSeInv;
    const bool is_imm = op == RdmapOpcode::kImmData || op == RdmapOpcode::kImmDataSe;
    if (is_send || is_imm) {
      ASSERT_EQ(q.post_recv(recv_wr(9, r.addr(2048), 64, r.stag)), 0);
    }

    if (op == RdmapOpcode::kRdmaWrite) {
      r.feed(tagged_hdr(op, true, r.stag, r.addr(3000)), data);
      EXPECT_EQ(Bytes(r.buf.begin() + 3000, r.buf.begin() + 3005), data);
      EXPECT_TRUE(r.sent().empty());
    } else if (op == RdmapOpcode::kRdmaReadReq) {
      r.feed(untagged_hdr(op, true, iwarp::kQnReadReq, 1, 0),
             read_req_payload(0x4242, 0x10, 6, r.stag, r.addr(100)));
      const std::vector<Bytes> s = r.sent();
      ASSERT_EQ(s.size(), 1u);
      EXPECT_EQ(s[0][3] & 0xf, static_cast<int>(RdmapOpcode::kRdmaReadResp));
      EXPECT_EQ(Bytes(s[0].begin() + 16, s[0].end()), Bytes(r.buf.begin() + 100, r.buf.begin() + 106));
    } else if (op == RdmapOpcode::kRdmaReadResp) {
      SendWr rd = r.wr(5, WrOpcode::kRead, 3000, 5);
      rd.rkey = 0x77;
      ASSERT_EQ(q.post_send(rd), 0);
      EXPECT_EQ(sent_ops(), std::vector<int>{static_cast<int>(RdmapOpcode::kRdmaReadReq)});
      r.feed(tagged_hdr(op, true, r.stag, r.addr(3000)), data);
      const std::vector<Wc> wcs = r.h.poll_send();
      ASSERT_EQ(wcs.size(), 1u);
      EXPECT_EQ(wcs[0].wr_id, 5u);
      EXPECT_EQ(wcs[0].opcode, WcOpcode::kRead);
      EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
      EXPECT_EQ(Bytes(r.buf.begin() + 3000, r.buf.begin() + 3005), data);
    } else if (is_send) {
      r.feed(untagged_hdr(op, true, iwarp::kQnSend, 1, 0, inv_stag), data);
      const std::vector<Wc> wcs = r.h.poll_recv();
      ASSERT_EQ(wcs.size(), 1u);
      EXPECT_EQ(wcs[0].wr_id, 9u);
      EXPECT_EQ(wcs[0].opcode, WcOpcode::kRecv);
      EXPECT_EQ(wcs[0].byte_len, data.size());
      const bool se = op == RdmapOpcode::kSendSe || op == RdmapOpcode::kSendSeInv;
      const bool inv = op == RdmapOpcode::kSendInv || op == RdmapOpcode::kSendSeInv;
      EXPECT_EQ((wcs[0].flags & kWcSolicited) != 0, se);
      EXPECT_EQ((wcs[0].flags & kWcWithInv) != 0, inv);
      EXPECT_EQ(wcs[0].invalidated_stag, inv ? inv_stag : 0u);
      EXPECT_EQ(r.h.mrs.find(inv_stag)->valid, !inv);
      EXPECT_EQ(Bytes(r.buf.begin() + 2048, r.buf.begin() + 2053), data);
    } else if (op == RdmapOpcode::kTerminate) {
      r.feed(untagged_hdr(op, true, iwarp::kQnTerminate, 1, 0), Bytes{0x02, 0xff, 0x00, 0x00});
      EXPECT_EQ(q.state(), QpState::kError);
      ASSERT_NE(q.term_received(), nullptr);
      EXPECT_EQ(q.term_received()->layer, iwarp::TermLayer::kRdmap);
      EXPECT_EQ(q.term_received()->etype, 2);
      EXPECT_EQ(q.term_received()->ecode, 0xff);
    } else if (is_imm) {
      r.feed(untagged_hdr(op, true, iwarp::kQnSend, 1, 0), be64(0x1122334455667788ull));
      const std::vector<Wc> wcs = r.h.poll_recv();
      ASSERT_EQ(wcs.size(), 1u);
      EXPECT_EQ(wcs[0].opcode, WcOpcode::kRecvRdmaImm);
      EXPECT_EQ(wcs[0].imm_data, 0x1122334455667788ull);
      EXPECT_TRUE(wcs[0].flags & kWcWithImm);
      EXPECT_EQ((wcs[0].flags & kWcSolicited) != 0, op == RdmapOpcode::kImmDataSe);
    } else if (op == RdmapOpcode::kAtomicReq) {
      uint64_t word = 40;
      std::memcpy(r.buf.data() + 1024, &word, 8);
      r.feed(untagged_hdr(op, true, iwarp::kQnAtomicReq, 1, 0),
             atomic_req_payload(iwarp::AtomicOpcode::kFetchAdd, 7, r.stag, r.addr(1024), 2));
      std::memcpy(&word, r.buf.data() + 1024, 8);
      EXPECT_EQ(word, 42u);
      const std::vector<Bytes> s = r.sent();
      ASSERT_EQ(s.size(), 1u);
      EXPECT_EQ(s[0][3] & 0xf, static_cast<int>(RdmapOpcode::kAtomicResp));
      EXPECT_EQ(Bytes(s[0].begin() + 20, s[0].end()), concat(Bytes{0, 0, 0, 7}, be64(40)));
    } else if (op == RdmapOpcode::kAtomicResp) {
      SendWr fa = r.wr(11, WrOpcode::kAtomicFetchAdd, 1032, 8);
      fa.rkey = 0x77;
      fa.remote_addr = 0x8000;
      ASSERT_EQ(q.post_send(fa), 0);
      EXPECT_EQ(sent_ops(), std::vector<int>{static_cast<int>(RdmapOpcode::kAtomicReq)});
      r.feed(untagged_hdr(op, true, iwarp::kQnAtomicResp, 1, 0),
             concat(Bytes{0, 0, 0, 1}, be64(0xabcdef)));  // the first request's id is 1
      const std::vector<Wc> wcs = r.h.poll_send();
      ASSERT_EQ(wcs.size(), 1u);
      EXPECT_EQ(wcs[0].opcode, WcOpcode::kFetchAdd);
      EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
      uint64_t got;
      std::memcpy(&got, r.buf.data() + 1032, 8);
      EXPECT_EQ(got, 0xabcdefu);
    }
    if (op != RdmapOpcode::kTerminate) {
      EXPECT_EQ(q.state(), QpState::kRts);
      EXPECT_EQ(r.h.stats.terminates_tx, 0u);
    }
    EXPECT_EQ(r.h.stats.fpdus_rx, 1u);
  }
}

}  // namespace
}  // namespace softrdma::testing
