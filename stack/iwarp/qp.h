// A queue pair: one RDMAP stream (RFC 5040) over one transport stream.
//
// qp.cc       lifecycle (state transitions, flush) and work-request posting
// qp_state.h  the QP states' legal transitions
// opcodes.h   the RDMAP opcode table: header layouts, queues, receive handlers
// qp_tx.cc    SQ/IRQ → FPDUs (segmentation, CRC, markers) → transport
// qp_rx.cc    transport bytes → FPDU machine → checks → placement → completion
// terminate.cc  AccessResult / errors → RFC Terminate codes, build and parse
//
// All methods run under the engine lock on the progress thread or in an API
// call; nothing here blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "stack/common/ring.h"
#include "stack/iwarp/cq.h"
#include "stack/iwarp/mem.h"
#include "stack/iwarp/mpa.h"
#include "stack/iwarp/unexpected.h"
#include "stack/iwarp/wire.h"
#include "stack/net/transport.h"
#include "stack/verbs.h"

namespace softrdma::iwarp {

// Datapath counters, read by tools and tests (copies are counted to prove the
// one-copy receive claim; a Send held for want of a receive is copied twice).
struct Stats {
  uint64_t fpdus_tx = 0;
  uint64_t fpdus_rx = 0;
  uint64_t payload_tx = 0;      // ULP payload bytes sent
  uint64_t payload_rx = 0;      // ULP payload bytes received and placed
  uint64_t rx_copy_bytes = 0;   // payload bytes copied by the iWARP layers on receive
  uint64_t terminates_tx = 0;
  uint64_t terminates_rx = 0;
  uint64_t crc_errors = 0;
  uint64_t markers_rx = 0;
  uint64_t markers_tx = 0;
  uint64_t qp_transitions_refused = 0;  // illegal QP state changes asked for: local bugs
  // Sends held for want of a posted receive (unexpected.h).
  uint64_t unexpected_msgs = 0;       // messages held
  uint64_t unexpected_bytes = 0;      // their payload bytes
  uint64_t unexpected_bytes_hwm = 0;  // most bytes one QP held at once
  uint64_t unexpected_overruns = 0;   // Sends beyond the bound: Terminated
  // Messages work requests put on the wire, by kind (counters.h).
  uint64_t sends_tx = 0;
  uint64_t writes_tx = 0;
  uint64_t read_requests_tx = 0;
  uint64_t atomic_requests_tx = 0;
};

struct Srq {
  Pd* pd = nullptr;
  uint32_t depth = 0;
  Ring<RecvWr> q;
};

// A Terminate's cause, as the RFCs code it (RFC 5040 §7, 5041 §7, 5044 §8).
struct TermCause {
  TermLayer layer = TermLayer::kRdmap;
  uint8_t etype = 0;
  uint8_t ecode = 0;
  uint32_t packed() const {
    return (uint32_t{static_cast<uint8_t>(layer)} << 12) | (uint32_t{etype} << 8) | ecode;
  }
};

// RFC cause of a failed memory access (terminate.cc).
TermCause cause_for(AccessResult r, bool ddp_tagged);

class Qp;
struct OpcodeInfo;
class QpOwner {
 public:
  virtual ~QpOwner() = default;
  // The QP left RTS for error (Terminate sent/received, stream lost).
  virtual void on_qp_error(Qp* qp) = 0;
  // Responder in peer-to-peer mode: the initiator's RTR arrived.
  virtual void on_qp_ready(Qp* qp) = 0;
};

struct QpInit {
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  uint32_t sq_depth = 256;
  uint32_t rq_depth = 256;
  uint16_t ord = 16;  // outstanding Reads/Atomics we may issue (before MPA)
  uint16_t ird = 16;  // outstanding Reads/Atomics we accept
  // Bound on Sends held until a receive is posted (unexpected.h); the
  // engine sets them from FI_SOFTRDMA_UNEXPECTED_BYTES / _MSGS.
  uint64_t unexpected_bytes = 256 * 1024;
  uint32_t unexpected_msgs = 256;
};

class Qp {
 public:
  Qp(uint32_t num, const QpInit& init, MrTable* mrs, Stats* stats, QpOwner* owner);
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;

  uint32_t num() const { return num_; }
  QpState state() const { return state_; }
  Pd* pd() const { return init_.pd; }
  const QpInit& init() const { return init_; }
  // Why the QP is in error: -EREMOTEIO (peer's Terminate), -EPROTO (ours),
  // the stream's -errno, or 0 for an orderly close by the peer.
  int error_status() const;
  // The Terminate behind the error (TermCause::packed()), 0 if none.
  uint32_t error_term() const;

  // --- qp.cc: lifecycle ---
  // Enter RDMA mode on a stream whose MPA exchange is done. initiator: we
  // send the RTR (if any); otherwise we wait for it before transmitting.
  // -EINVAL, and nothing done, unless the QP is Idle.
  int start(net::StreamConn* conn, const MpaResult& mpa, bool initiator);
  // Moves to error: flushes every outstanding work request (errors always
  // complete) and aborts the stream. Safe to call in any state.
  void to_error(WcStatus first_status, uint32_t vendor_err);
  // Orderly close: stop accepting work, flush, close the stream.
  void close();
  net::StreamConn* conn() const { return conn_; }
  void detach_conn() { conn_ = nullptr; }
  const MpaResult& mpa() const { return mpa_; }

  // c1: posting only queues; the engine's I/O thread transmits.
  void set_defer_tx(bool defer) { defer_tx_ = defer; }
  int post_send(const SendWr& wr);
  int post_recv(const RecvWr& wr);

  // --- qp_tx.cc ---
  // Builds and sends FPDUs while the transport has room.
  void tx_progress();
  bool tx_pending() const;

  // --- qp_rx.cc ---
  // Consumes buffered stream bytes: FPDU framing, checks, placement.
  void rx_progress();
  // The same over views the transport offers (its receive entry, in place):
  // returns the octets consumed, all of them.
  size_t rx_input(const net::RxView* views, size_t n);
  // The stream ended under us.
  void on_stream_closed(int err);

  // Gives waiting unexpected Sends to the receives posted (qp_unexpected.cc).
  void rx_deliver_unexpected();

  const TermCause* term_received() const { return term_rx_valid_ ? &term_rx_ : nullptr; }

 private:
  friend struct QpTestPeer;
  friend struct OpcodeTable;  // its entries name the receive handlers

  // Send queue entry: a WR being transmitted (phase = message index within it).
  struct SqEntry {
    SendWr wr;
    uint64_t total = 0;
    uint32_t phase = 0;
    uint64_t phase_sent = 0;
  };
  // Outstanding Read piece or Atomic awaiting its response (requester side).
  struct OrqEntry {
    uint64_t wr_id;
    WrOpcode opcode;
    bool signaled;
    bool last_piece;       // completes the WR
    uint32_t sink_stag;
    uint64_t sink_to;      // where the next response byte must land
    uint64_t remaining;    // bytes of response still expected
    uint64_t wr_bytes;     // WR's total length, for the completion
    uint32_t atomic_id;
    uint64_t result_addr;  // atomic: where the original value goes
  };
  // A Read or Atomic Request we accepted (responder side, IRD-bounded).
  struct IrqEntry {
    bool atomic;
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t src_stag;
    uint64_t src_to;
    uint64_t len;
    uint64_t sent;
    uint32_t atomic_id;
    uint64_t orig;
  };
  // The message currently being transmitted.
  struct TxMsg {
    bool active = false;
    RdmapOpcode op{};  // its table entry says whether the payload is ctrl or tx_sges()
    uint32_t msn = 0, stag = 0, rsvd_ulp = 0;
    uint64_t to = 0;
    int nsge = 0;  // of tx_sges()
    uint8_t ctrl[sizeof(AtomicReqPayload) + 8];  // control payloads, a Terminate's too
    uint64_t total = 0, sent = 0;
    uint32_t fpdus = 0;
    int sge_idx = 0;           // payload cursor within tx_sges()
    uint64_t sge_off = 0;
    Sge one_sge{};             // the source of a Read Response
    enum class Origin : uint8_t { kSq, kIrq, kTerminate, kRtr } origin{};
  };
  // Receive FPDU machine (siw's GET_HDR / GET_DATA / GET_TRAILER).
  enum class RxStage : uint8_t { kHdr, kPayload, kTrailer, kDead };
  enum class Sink : uint8_t { kDiscard, kLinear, kRecv, kStore, kCtrl };

  // qp_tx.cc
  bool tx_next_message();
  void tx_ctrl(RdmapOpcode op);
  bool tx_from_sq();
  void count_message(RdmapOpcode op);  // Stats' messages by kind
  void tx_from_irq();
  bool tx_fpdu();
  const Sge* tx_sges() const;
  void tx_message_done();
  // Send-queue completions leave in posting order (verbs semantics): a WR
  // done behind an outstanding Read or Atomic waits in scq_ for it.
  void sq_complete(const SqEntry& e, WcStatus st);  // executed (or failed) now
  void sq_await_response(const SqEntry& e);         // transmitted, needs its response
  void sq_response_done();                          // the oldest awaited response came
  void sq_drain();
  // qp_rx.cc
  size_t rx_feed(const net::RxView* views, size_t n);
  size_t rx_chunk(const uint8_t* p, size_t n);
  size_t rx_marker(const uint8_t* p, size_t n);
  bool rx_header_done();
  bool rx_check_untagged();
  void rx_place(const uint8_t* p, size_t n);
  void rx_fpdu_done();
  void rx_recv_complete(bool imm);
  bool rx_take_recv();
  // qp_unexpected.cc
  bool rx_store_start();
  bool rx_store_room();
  void complete_recv(const RecvWr& wr, const UnexpectedStore::Msg& m);
  // Per opcode, reached through its OpcodeInfo (opcodes.h). Header checks:
  bool rx_hdr_write();
  bool rx_hdr_read_resp();
  bool rx_hdr_send();
  bool rx_hdr_ctrl();
  bool rx_hdr_imm();
  // ... and effects once the FPDU's CRC is good:
  void rx_read_resp_done();
  void rx_send_done();
  void rx_imm_data();
  void rx_read_request();
  void rx_atomic_request();
  void rx_atomic_response();
  void rx_terminate();
  // terminate.cc
  void terminate(TermCause cause, bool with_ddp_hdr, bool with_rdmap_hdr,
                 WcStatus local = WcStatus::kWrFlushErr);
  void queue_terminate_frame(const TermCause& cause, bool with_ddp_hdr, bool with_rdmap_hdr);
  static WcStatus status_for(const TermCause& cause);
  // qp.cc
  // The one place state_ changes: -EINVAL, state_ kept, for a transition
  // qp_state.h does not allow.
  int set_state(QpState to);
  void flush_all(WcStatus first_status, uint32_t vendor_err);
  uint32_t next_msn(uint32_t qn) { return tx_msn_[qn]++; }

  uint32_t num_;
  QpInit init_;
  MrTable* mrs_;
  Stats* stats_;
  QpOwner* owner_;
  QpState state_ = QpState::kIdle;
  net::StreamConn* conn_ = nullptr;
  MpaResult mpa_;
  bool initiator_ = false;
  bool rtr_pending_tx_ = false;  // initiator still has to send the RTR
  bool rtr_awaited_ = false;     // responder still waits for the RTR
  bool defer_tx_ = false;

  Ring<SqEntry> sq_;
  struct ScqEntry {
    Wc wc;
    bool report;  // signaled, or an error
    bool done;
  };
  Ring<ScqEntry> scq_;  // WRs out of sq_, not yet completed in order
  Ring<RecvWr> rq_;
  Ring<OrqEntry> orq_;
  Ring<IrqEntry> irq_;
  uint32_t orq_wrs_ = 0;   // WRs waiting in orq_ (count against sq_depth)
  uint32_t next_atomic_id_ = 1;
  uint32_t tx_msn_[kQnCount] = {1, 1, 1, 1, 1};
  TxMsg tx_;
  std::vector<uint8_t> term_frame_;   // queued Terminate FPDU payload
  TermCause term_cause_{};
  WcStatus term_local_ = WcStatus::kWrFlushErr;
  bool term_sent_ = false;

  // Transmit stream position (for markers) and scratch for one FPDU.
  uint64_t tx_pos_ = 0;

  // Receive state.
  RxStage rx_stage_ = RxStage::kHdr;
  const OpcodeInfo* rx_op_ = nullptr;  // the current FPDU's, once its header checked out
  uint8_t rx_hdr_[sizeof(UntaggedHdr)];
  size_t rx_hdr_have_ = 0;
  size_t rx_hdr_need_ = sizeof(Ctrl);
  uint32_t rx_crc_ = 0xFFFFFFFFu;  // kCrc32cInit
  uint64_t rx_payload_len_ = 0, rx_payload_done_ = 0;
  uint8_t rx_trailer_[8];
  size_t rx_trailer_have_ = 0, rx_trailer_need_ = 0;
  Sink rx_sink_ = Sink::kDiscard;
  uint8_t* rx_dst_ = nullptr;
  uint8_t rx_ctrl_[64];
  uint64_t rx_pos_ = 0;             // stream position, for markers
  uint64_t rx_fpdu_start_ = 0;
  uint8_t rx_marker_[kMpaMarkerSize];
  size_t rx_marker_have_ = 0;
  uint32_t rx_msn_[kQnCount] = {1, 1, 1, 1, 1};
  // The untagged QN 0 message being received into a posted receive.
  bool rx_msg_active_ = false;
  RecvWr rx_wr_{};
  uint64_t rx_wr_cap_ = 0;      // bytes the receive can hold
  uint64_t rx_msg_len_ = 0;     // bytes received so far (= next MO)
  int rx_sge_ = 0;              // placement cursor within rx_wr_
  uint64_t rx_sge_off_ = 0;
  uint32_t rx_inv_stag_ = 0;
  bool rx_solicited_ = false;
  bool rx_to_store_ = false;    // the message goes to unexp_, not to rx_wr_
  UnexpectedStore unexp_;

  int stream_err_ = 0;
  bool peer_closed_ = false;  // the stream ended with the peer's FIN
  bool term_rx_valid_ = false;
  TermCause term_rx_{};
};

}  // namespace softrdma::iwarp
