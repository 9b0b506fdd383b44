// srdma_perf's engine plumbing, shared by client and server: one QP, its
// buffers, the control mailbox, and waits that never outlast the global
// deadline.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "stack/engine.h"
#include "stack/tools/engine_pump.h"
#include "stack/tools/perf_protocol.h"
#include "stack/tools/tool_common.h"
#include "stack/tools/tool_die.h"

namespace softrdma::perf {

using namespace softrdma::tools;  // Clock, die, buffers, control words

inline Buffer alloc_buffer(uint64_t n) {
  Buffer b = alloc_touched(n);  // every page touched before anything is timed
  if (!b) die(kExitError, "cannot allocate %" PRIu64 " bytes", n);
  return b;
}

// One QP, its buffers, the control mailbox, and waits that never outlast the
// global deadline.
class Endpoint {
 public:
  Endpoint(const EngineConfig& cfg, Clock::time_point deadline)
      : deadline_(deadline), eng_(cfg), pd_(eng_.alloc_pd()) {}

  Engine& engine() { return eng_; }
  Qp* qp() const { return qp_; }
  const Geometry& geometry() const { return g_; }
  std::vector<Wc>& wcs() { return wcs_; }
  // Moves the collected completions into *out (posting may pump meanwhile).
  void take(std::vector<Wc>* out) {
    out->clear();
    out->swap(wcs_);
  }
  bool established() const { return established_; }
  // Exit code for a connection that dies under us (a mismatch already seen
  // must not be reported as a mere error).
  void set_lost_code(int code) { lost_code_ = code; }

  // Allocates and registers the buffers, then creates the QP.
  void setup(const Geometry& g) {
    g_ = g;
    data_ = alloc_buffer(g.bytes());
    ctrl_ = std::make_unique<CtrlBlock>();
    constexpr uint32_t kAll =
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    data_stag_ = register_mr(data_.get(), g.bytes(), kAll);
    ctrl_stag_ =
        register_mr(ctrl_.get(), sizeof(CtrlBlock), kAccessLocalWrite | kAccessRemoteWrite);
    // Room for the data window plus control, credit and notify Writes.
    const uint32_t sq = g.window() + static_cast<uint32_t>(kNotifyRing) + 16;
    const uint32_t rq = (g.kind == Kind::kBw ? g.depth : 1) + 4;
    const uint16_t rd = static_cast<uint16_t>(g.kind == Kind::kBw ? g.depth : 16);
    cq_ = eng_.create_cq(2 * (sq + rq) + 64);
    qp_ = eng_.create_qp({.pd = pd_, .send_cq = cq_, .recv_cq = cq_, .sq_depth = sq,
                          .rq_depth = rq, .ord = rd, .ird = rd});
    if (!qp_) die(kExitError, "create_qp failed");
  }

  Region data_region() const {
    return {.addr = addr_of(data_.get()), .len = g_.bytes(), .rkey = data_stag_};
  }
  Region ctrl_region() const {
    return {.addr = addr_of(ctrl_.get()), .len = sizeof(CtrlBlock), .rkey = ctrl_stag_};
  }
  // False if the peer's regions cannot hold what the geometry puts there.
  bool set_peer(const Region& data, const Region& ctrl) {
    peer_data_ = data;
    peer_ctrl_ = ctrl;
    return data.len >= g_.bytes() && ctrl.len >= sizeof(CtrlBlock);
  }

  uint8_t* rx(uint64_t slot) { return data_.get() + slot * g_.stride; }
  uint8_t* tx(uint64_t slot) { return data_.get() + (g_.slots + slot) * g_.stride; }
  uint64_t peer_rx(uint64_t slot) const { return peer_data_.addr + slot * g_.stride; }
  uint64_t peer_tx(uint64_t slot) const {
    return peer_data_.addr + (g_.slots + slot) * g_.stride;
  }

  // A signaled data operation: local [p, p+len), remote at raddr.
  SendWr data_wr(WrOpcode op, uint64_t id, const uint8_t* p, uint64_t len, uint64_t raddr) const {
    SendWr wr{.wr_id = id, .opcode = op, .num_sge = 1, .remote_addr = raddr,
              .rkey = peer_data_.rkey};
    wr.sg_list[0] = Sge{addr_of(p), static_cast<uint32_t>(len), data_stag_};
    return wr;
  }

  void post(const SendWr& wr) {
    for (;;) {
      int rc = eng_.post_send(qp_, wr);
      if (rc == 0) return;
      if (rc != -EAGAIN)
        die(kExitError, "post_send(%s): %s", to_string(wr.opcode), std::strerror(-rc));
      pump();
      check_deadline("send queue space");
    }
  }
  // A receive into [p, p+len); len 0 with p null takes no buffer at all.
  void post_recv(uint8_t* p, uint64_t len, uint64_t id) {
    RecvWr wr{.wr_id = id, .num_sge = p ? 1 : 0};
    if (p) wr.sg_list[0] = Sge{addr_of(p), static_cast<uint32_t>(len), data_stag_};
    for (;;) {
      int rc = eng_.post_recv(qp_, wr);
      if (rc == 0) return;
      if (rc != -EAGAIN) die(kExitError, "post_recv: %s", std::strerror(-rc));
      pump();
      check_deadline("receive queue space");
    }
  }

  // One busy pass: I/O, CM events, completions (successful ones go to wcs()).
  void pump() {
    tools::pump_engine<32>(
        eng_, cq_, [this](const CmEvent& ev) { on_cm(ev); }, [this](const Wc& wc) { on_wc(wc); });
  }
  void check_deadline(const char* what) const {
    if (Clock::now() > deadline_) die(kExitError, "timeout waiting for %s", what);
  }
  // Busy-waits for pred, looking at the clock only every 64th pass: a clock
  // read in every pass would sit in the round trip being measured.
  template <class Pred>
  void wait(const char* what, Pred pred) {
    for (uint32_t i = 1; !pred(); ++i) {
      pump();
      if (i % 64 == 0) check_deadline(what);
    }
  }
  // The first completion of the given kind among those collected, or null.
  const Wc* find_wc(WcOpcode op) const {
    for (const Wc& wc : wcs_)
      if (wc.opcode == op) return &wc;
    return nullptr;
  }
  Wc wait_wc(WcOpcode op, const char* what) {
    wait(what, [&] { return find_wc(op) != nullptr; });
    Wc wc = *find_wc(op);
    wcs_.clear();  // the rest are local completions of our own posts
    return wc;
  }

  // --- control mailbox ---
  void send_ctrl(CtrlMsg m) {
    m.seq = m.seq_end = ++tx_seq_;
    ctrl_->outbox = m;
    ctrl_write(&ctrl_->outbox, sizeof(CtrlMsg), offsetof(CtrlBlock, inbox));
  }
  bool ctrl_arrived() const { return load(ctrl_->inbox.seq_end) > rx_seq_; }
  CtrlMsg wait_ctrl(MsgType type) {
    wait(to_string(type), [&] { return ctrl_arrived(); });
    ++rx_seq_;
    CtrlMsg m = ctrl_->inbox;
    if (m.seq != rx_seq_ || m.type != type) {
      die(kExitError, "protocol: expected %s #%" PRIu64 ", got %s #%" PRIu64, to_string(type),
          rx_seq_, to_string(m.type), m.seq);
    }
    return m;
  }
  // The credit source is updated in place: if an older credit Write is
  // still queued it carries the newer value, which is just as true.
  void write_credit(uint64_t v) {
    ctrl_->credit_src = v;
    ctrl_write(&ctrl_->credit_src, sizeof(uint64_t), offsetof(CtrlBlock, credit));
  }
  uint64_t credit() const { return load(ctrl_->credit); }
  // Notify sources rotate: each value must reach the peer exactly as posted.
  void write_notify(uint64_t v, uint64_t n) {
    uint64_t& src = ctrl_->notify_src[n % kNotifyRing];
    src = v;
    ctrl_write(&src, sizeof(uint64_t), offsetof(CtrlBlock, notify));
  }
  uint64_t notify() const { return load(ctrl_->notify); }

  // --- teardown ---
  // Active side: orderly close, then a short wait for the peer's end so our
  // exit does not cut off bytes still queued.
  void close_active() {
    closing_ = true;
    eng_.disconnect(qp_);
    const Clock::time_point until = std::min(deadline_, Clock::now() + std::chrono::seconds(5));
    while (qp_->conn() && Clock::now() < until) pump();
  }
  // Passive side: the peer closes.
  void await_close() {
    closing_ = true;
    wait("the client to disconnect", [&] { return disconnected_; });
  }
  // After the close: the engine keeps running (links polled) for a while.
  void linger(double secs) {
    const Clock::time_point until = deadline_after(secs);
    while (Clock::now() < until) {
      pump();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

 private:
  // Registers [p, p+len) and returns its STag (the only part of the MR the
  // tool needs: local key and, sent to the peer, remote key).
  uint32_t register_mr(void* p, uint64_t len, uint32_t access) {
    const Mr* mr = eng_.reg_mr(pd_, p, len, access);
    if (!mr) die(kExitError, "memory registration of %" PRIu64 " bytes failed", len);
    return mr->stag;
  }

  void ctrl_write(const void* src, size_t len, size_t peer_off) {
    SendWr wr{.opcode = WrOpcode::kWrite, .flags = 0, .num_sge = 1,
              .remote_addr = peer_ctrl_.addr + peer_off, .rkey = peer_ctrl_.rkey};
    wr.sg_list[0] = Sge{addr_of(src), static_cast<uint32_t>(len), ctrl_stag_};
    post(wr);
  }

  void on_cm(const CmEvent& ev) {
    switch (ev.type) {
      case CmEventType::kConnectRequest: {
        static const char kBusy[] = "busy";
        eng_.reject(ev.req, kBusy, sizeof(kBusy));
        return;
      }
      case CmEventType::kEstablished:
        established_ = true;
        return;
      case CmEventType::kDisconnected:
        disconnected_ = true;
        if (closing_) return;
        die(lost_code_, "connection lost: %s", describe_status(ev.status, ev.term).c_str());
      default:
        die(kExitError, "unexpected CM event %s", to_string(ev.type));
    }
  }
  void on_wc(const Wc& wc) {
    if (wc.status != WcStatus::kSuccess) {
      if (closing_) return;  // flushed by the teardown
      die(lost_code_, "%s completion failed: %s (vendor_err 0x%x)", to_string(wc.opcode),
          to_string(wc.status), wc.vendor_err);
    }
    wcs_.push_back(wc);
  }

  Clock::time_point deadline_;
  Engine eng_;
  Pd* pd_;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  Geometry g_;
  Buffer data_;
  std::unique_ptr<CtrlBlock> ctrl_;
  uint32_t data_stag_ = 0;
  uint32_t ctrl_stag_ = 0;
  Region peer_data_, peer_ctrl_;
  std::vector<Wc> wcs_;
  uint64_t tx_seq_ = 0;
  uint64_t rx_seq_ = 0;
  bool established_ = false;
  bool disconnected_ = false;
  bool closing_ = false;
  int lost_code_ = kExitError;
};

// A --crc the peer overrode (CRC is on if either side asks).
inline void warn_crc(bool crc_set, bool crc_asked, const iwarp::MpaResult& mpa, const char* peer) {
  if (crc_set && crc_asked != mpa.crc) {
    std::fprintf(stderr, "srdma_perf: warning: CRC is %s: the %s asked for it (used if either "
                 "side asks)\n", mpa.crc ? "on" : "off", peer);
  }
}

}  // namespace softrdma::perf
