// One connection of the soak client: issues the op sequence within the
// server's credits, checks Reads and atomic results, and closes once the
// server's final account has landed.
#pragma once

#include "stack/tools/soak_ctrl_pool.h"
#include "stack/tools/soak_node.h"
#include "stack/tools/soak_options.h"

namespace softrdma::soak {

struct Totals {
  uint64_t ops = 0;             // operations completed and checked
  uint64_t client_bytes = 0;    // checked here (Reads, atomic results)
  uint64_t server_bytes = 0;    // checked by the server, of closed connections
  uint64_t server_mismatches = 0;
  uint64_t ooo = 0;             // completions out of posting order
  uint64_t slow_closes = 0;     // disconnects that had not finished after 5 s
};

class ClientConn {
 public:
  enum class State : uint8_t { kConnecting, kRunning, kDraining, kEnding, kClosing, kClosed };

  ClientConn(Node& node, CtrlPool<ClientCtrl>& ctrls, const Options& o, uint32_t id,
             uint32_t max_size, uint64_t op_limit, Mismatches* mism, Totals* totals)
      : node_(node), ctrls_(ctrls), id_(id), depth_(o.depth), max_size_(max_size),
        op_limit_(op_limit), gen_(o.seed, id, max_size), model_(gen_.atomic_init()), mism_(mism),
        totals_(totals), slots_(o.depth) {
    stride_ = (uint64_t{max_size} + kOffsetSlack + 63) & ~uint64_t{63};
    local_ = alloc_touched(stride_ * depth_);
    if (!local_) die(kExitError, "out of memory for connection %u", id);
    const CtrlPool<ClientCtrl>::Block b = ctrls_.take();
    ctrl_ = b.ctrl;
    ctrl_stag_ = b.stag;
    slot_ = b.slot;
    constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    local_stag_ = node_.reg(local_.get(), stride_ * depth_, kAll);
    // Room for the window, a notify after each op, and the end word.
    qp_ = node_.make_qp(2 * depth_ + 8, 1, static_cast<uint16_t>(depth_));
  }
  ~ClientConn() { release(); }
  ClientConn(const ClientConn&) = delete;
  ClientConn& operator=(const ClientConn&) = delete;

  Qp* qp() const { return qp_; }
  uint32_t id() const { return id_; }
  uint32_t slot() const { return slot_; }  // its control block's, in the pool
  State state() const { return state_; }
  bool closed() const { return state_ == State::kClosed; }
  uint64_t issued() const { return next_; }
  // Bytes the server has checked so far on this connection (live figure).
  uint64_t server_bytes() const { return load(ctrl_->credit.bytes_checked); }
  uint64_t server_rss_kb() const { return load(ctrl_->credit.rss_kb); }

  void connect(const sockaddr_in& peer, uint64_t seed) {
    Hello h;
    h.kind = static_cast<uint8_t>(HelloKind::kData);
    h.conn = id_;
    h.seed = seed;
    h.max_size = max_size_;
    h.depth = depth_;
    h.ctrl = {.addr = addr_of(ctrl_), .len = sizeof(ClientCtrl), .rkey = ctrl_stag_};
    if (int rc = node_.eng().connect(qp_, peer, &h, sizeof(h)); rc < 0)
      die(kExitError, "connect: %s", std::strerror(-rc));
  }

  // CM events of this QP. Returns false for a connection lost under us.
  bool on_cm(const CmEvent& ev) {
    switch (ev.type) {
      case CmEventType::kEstablished: {
        Welcome w;
        if (!decode(ev.private_data, &w)) die(kExitError, "the peer is not an srdma_soak server");
        if (w.data.len < Layout(max_size_, depth_).bytes() || w.ctrl.len < sizeof(ServerCtrl))
          die(kExitError, "the server's regions are too small");
        peer_data_ = w.data;
        peer_ctrl_ = w.ctrl;
        state_ = State::kRunning;
        if (op_limit_ == 0) state_ = State::kDraining;
        return true;
      }
      case CmEventType::kDisconnected:
        if (state_ == State::kClosing) {
          state_ = State::kClosed;
          return true;
        }
        std::fprintf(stderr, "srdma_soak client: connection %u lost after %" PRIu64
                     " ops (state %d): %s\n", id_, next_, int(state_),
                     describe_status(ev.status, ev.term).c_str());
        state_ = State::kClosed;
        return false;
      default:
        std::fprintf(stderr, "srdma_soak client: connection %u: %s (%s)\n", id_,
                     to_string(ev.type), describe_status(ev.status, 0).c_str());
        state_ = State::kClosed;
        return false;
    }
  }

  // A completion of this QP. Returns false on a failed one.
  bool on_wc(const Wc& wc) {
    if (wc.status != WcStatus::kSuccess) {
      if (state_ == State::kClosing || state_ == State::kClosed) return true;  // teardown flush
      std::fprintf(stderr, "srdma_soak client: connection %u: %s completion (wr %" PRIu64
                   ") failed: %s (vendor_err 0x%x)\n", id_, to_string(wc.opcode), wc.wr_id,
                   to_string(wc.status), wc.vendor_err);
      return false;
    }
    Slot& s = slots_[wc.wr_id % depth_];
    if (!s.busy || s.k != wc.wr_id) {
      mism_->report("conn %u: completion for op %" PRIu64 " that is not in flight", id_, wc.wr_id);
      return true;
    }
    if (wc.wr_id != oldest_ && totals_->ooo++ < 3) {
      std::fprintf(stderr, "srdma_soak client: note: conn %u op %" PRIu64 " (%s) completed "
                   "before op %" PRIu64 " (%s)\n", id_, wc.wr_id, op_name(s.spec.op), oldest_,
                   op_name(slots_[oldest_ % depth_].spec.op));
    }
    check_completion(s, wc);
    s.busy = false;
    --in_flight_;
    while (oldest_ < next_ && !slots_[oldest_ % depth_].busy) ++oldest_;
    ++totals_->ops;
    return true;
  }

  // Issues what the window and credits allow, or moves the close along.
  // Returns whether the connection now waits on what the server writes
  // (credits, its done word) or on time, which no completion announces: the
  // caller steps it again on its next sweep. Otherwise a completion or CM
  // event of its own comes first.
  bool step(bool stop) {
    if (stop && state_ == State::kRunning) state_ = State::kDraining;
    if (!flush_notify()) return false;  // the send queue is full
    switch (state_) {
      case State::kRunning:
        // A full window is the common case: skip the slot look-up then.
        while (in_flight_ < depth_ && next_ < op_limit_ && issue_next()) {}
        if (next_ >= op_limit_) state_ = State::kDraining;
        return state_ == State::kRunning && in_flight_ < depth_;
      case State::kDraining:
        if (in_flight_ == 0) post_end();
        return state_ == State::kEnding;
      case State::kEnding:
        if (load(ctrl_->done) == ctrl_->end_src) finish();
        return state_ != State::kClosed;
      case State::kClosing:
        // The closing side gets no kDisconnected: its stream is gone once
        // the QP lets go of it (as srdma_perf's close_active waits).
        if (!qp_->conn()) {
          state_ = State::kClosed;
        } else if (Clock::now() > close_deadline_) {
          std::fprintf(stderr, "srdma_soak client: connection %u: close took over 5 s\n", id_);
          ++totals_->slow_closes;
          state_ = State::kClosed;
        }
        return state_ == State::kClosing;
      default:
        return false;
    }
  }

  std::string describe() const {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "conn %u state %d issued %" PRIu64 " in flight %u recv %" PRIu64 "/%" PRIu64
                  " wslots %" PRIu64 "/%" PRIu64 " done %" PRIu64,
                  id_, int(state_), next_, in_flight_, recv_issued_,
                  load(ctrl_->credit.recv_posted), wslot_issued_,
                  load(ctrl_->credit.writes_checked) + depth_, load(ctrl_->done));
    return buf;
  }

 private:
  struct Slot {
    bool busy = false;
    uint64_t k = 0;
    OpSpec spec;
    uint64_t expect = 0;  // atomics: the original value the model says
  };

  uint8_t* local(uint64_t k) { return local_.get() + (k % depth_) * stride_; }

  SendWr wr_for(uint64_t k, WrOpcode op, uint8_t* p, uint32_t len, uint64_t raddr,
                uint32_t rkey, uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = k, .opcode = op, .flags = flags, .num_sge = 1, .remote_addr = raddr,
              .rkey = rkey};
    wr.sg_list[0] = Sge{addr_of(p), len, local_stag_};
    return wr;
  }

  // Posts op next_ if its slot is free and the server has room for it.
  bool issue_next() {
    const uint64_t k = next_;
    Slot& s = slots_[k % depth_];
    if (s.busy) return false;
    const OpSpec spec = next_op_.at(k);
    const Layout lay(max_size_, depth_);
    if (uses_recv(spec.op) && recv_issued_ >= load(ctrl_->credit.recv_posted)) return false;
    if (uses_wslot(spec.op) && wslot_issued_ >= load(ctrl_->credit.writes_checked) + depth_)
      return false;
    uint8_t* const buf = local(k) + spec.local_off;
    const uint64_t wslot = peer_data_.addr + lay.wslot(wslot_issued_) + spec.remote_off;
    SendWr wr;
    uint64_t model_next = model_;
    switch (spec.op) {
      case Op::kSend:
        fill_pattern(buf, spec.size, spec.seed);
        wr = wr_for(k, WrOpcode::kSend, buf, spec.size, 0, 0);
        break;
      case Op::kWrite:
      case Op::kWriteImm:
        fill_pattern(buf, spec.size, spec.seed);
        wr = wr_for(k, spec.op == Op::kWrite ? WrOpcode::kWrite : WrOpcode::kWriteWithImm, buf,
                    spec.size, wslot, peer_data_.rkey);
        wr.imm_data = spec.imm;
        break;
      case Op::kRead:
        std::memset(buf, static_cast<int>(mix64(k) | 1), spec.size);  // stale bytes must not pass
        wr = wr_for(k, WrOpcode::kRead, buf, spec.size,
                    peer_data_.addr + lay.read_src() + spec.remote_off, peer_data_.rkey);
        break;
      case Op::kFetchAdd:
      case Op::kCmpSwap: {
        uint64_t compare = 0;
        s.expect = apply_atomic(spec, &model_next, &compare);
        const uint64_t poison = ~s.expect;
        std::memcpy(buf, &poison, 8);
        wr = wr_for(k, spec.op == Op::kFetchAdd ? WrOpcode::kAtomicFetchAdd
                                                : WrOpcode::kAtomicCmpSwap,
                    buf, 8, peer_data_.addr + lay.atomic(), peer_data_.rkey);
        wr.compare_add = spec.op == Op::kFetchAdd ? spec.operand : compare;
        wr.swap = spec.swap;
        break;
      }
    }
    const int rc = node_.eng().post_send(qp_, wr);
    if (rc == -EAGAIN) return false;  // the send queue is full: later
    if (rc < 0) die(kExitError, "post_send(%s): %s", op_name(spec.op), std::strerror(-rc));
    model_ = model_next;  // the responder applies atomics in the order posted
    s = Slot{.busy = true, .k = k, .spec = spec, .expect = s.expect};
    ++in_flight_;
    ++next_;
    if (uses_recv(spec.op)) ++recv_issued_;
    if (uses_wslot(spec.op)) ++wslot_issued_;
    if (spec.op == Op::kWrite) notify_due_ = next_;  // the server checks it once told
    flush_notify();
    return true;
  }

  // Posts the pending notify (ops issued so far); false while it cannot.
  bool flush_notify() {
    if (notify_due_ <= notified_) return true;
    uint64_t& src = ctrl_->notify_src[notifies_ % kNotifyRing];
    src = notify_due_;
    const SendWr wr = ctrl_write(&src, offsetof(ServerCtrl, notify));
    const int rc = node_.eng().post_send(qp_, wr);
    if (rc == -EAGAIN) return false;
    if (rc < 0) die(kExitError, "post_send(notify): %s", std::strerror(-rc));
    ++notifies_;
    notified_ = notify_due_;
    return true;
  }

  SendWr ctrl_write(uint64_t* src, size_t peer_off) const {
    SendWr wr{.opcode = WrOpcode::kWrite, .flags = 0, .num_sge = 1,
              .remote_addr = peer_ctrl_.addr + peer_off, .rkey = peer_ctrl_.rkey};
    wr.sg_list[0] = Sge{addr_of(src), 8, ctrl_stag_};
    return wr;
  }

  // All operations completed: tell the server how many there were.
  void post_end() {
    ctrl_->end_src = next_ + 1;
    const int rc = node_.eng().post_send(qp_, ctrl_write(&ctrl_->end_src, offsetof(ServerCtrl, end)));
    if (rc == -EAGAIN) return;
    if (rc < 0) die(kExitError, "post_send(end): %s", std::strerror(-rc));
    state_ = State::kEnding;
  }

  // The server's final account has landed: take it and close.
  void finish() {
    totals_->server_bytes += load(ctrl_->credit.bytes_checked);
    totals_->server_mismatches += load(ctrl_->credit.mismatches);
    state_ = State::kClosing;
    close_deadline_ = Clock::now() + std::chrono::seconds(5);
    if (int rc = node_.eng().disconnect(qp_); rc < 0) state_ = State::kClosed;
  }

  void check_completion(const Slot& s, const Wc& wc) {
    const OpSpec& spec = s.spec;
    static constexpr WcOpcode kWant[] = {WcOpcode::kSend, WcOpcode::kWrite, WcOpcode::kRead,
                                         WcOpcode::kWrite, WcOpcode::kFetchAdd,
                                         WcOpcode::kCmpSwap};
    if (wc.opcode != kWant[static_cast<size_t>(spec.op)]) {
      mism_->report("conn %u op %" PRIu64 " %s completed as %s", id_, s.k, op_name(spec.op),
                    to_string(wc.opcode));
    }
    const uint8_t* buf = local(s.k) + spec.local_off;
    if (spec.op == Op::kRead) {
      if (wc.byte_len != spec.size)
        mism_->report("conn %u op %" PRIu64 " read completed %u bytes of %u", id_, s.k,
                      wc.byte_len, spec.size);
      mism_->check("read", id_, s.k, buf, spec.size, gen_.read_seed(), spec.remote_off);
      totals_->client_bytes += spec.size;
    } else if (is_atomic(spec.op)) {
      uint64_t got;
      std::memcpy(&got, buf, 8);
      if (got != s.expect)
        mism_->report("conn %u op %" PRIu64 " %s returned 0x%016" PRIx64 ", model 0x%016" PRIx64,
                      id_, s.k, op_name(spec.op), got, s.expect);
      totals_->client_bytes += 8;
    }
  }

  void release() {
    if (qp_) node_.eng().destroy_qp(qp_);
    qp_ = nullptr;
    if (local_stag_) node_.eng().dereg_mr(local_stag_);
    if (ctrl_) ctrls_.give(slot_);
    local_stag_ = ctrl_stag_ = 0;
    ctrl_ = nullptr;
  }

  Node& node_;
  CtrlPool<ClientCtrl>& ctrls_;
  const uint32_t id_;
  const uint32_t depth_;
  const uint32_t max_size_;
  const uint64_t op_limit_;
  const OpGen gen_;
  OpCache next_op_{gen_};
  uint64_t model_;  // the server's atomic word once all posted atomics ran
  Mismatches* mism_;
  Totals* totals_;
  std::vector<Slot> slots_;
  uint64_t stride_ = 0;
  Buffer local_;
  ClientCtrl* ctrl_ = nullptr;  // in ctrls_
  uint32_t local_stag_ = 0, ctrl_stag_ = 0, slot_ = 0;
  Qp* qp_ = nullptr;
  Region peer_data_, peer_ctrl_;
  State state_ = State::kConnecting;
  uint64_t next_ = 0, oldest_ = 0;
  uint32_t in_flight_ = 0;
  uint64_t recv_issued_ = 0, wslot_issued_ = 0;
  uint64_t notify_due_ = 0, notified_ = 0, notifies_ = 0;
  Clock::time_point close_deadline_{};
};

}  // namespace softrdma::soak
