// One connection of the soak server: its memory, the client's op sequence
// replayed, and the checks in order.
#pragma once

#include <deque>
#include <memory>

#include "stack/tools/soak_ctrl_pool.h"
#include "stack/tools/soak_node.h"

namespace softrdma::soak {

// One client connection: its memory, the client's op sequence replayed, and
// the checks in order.
class ServerConn {
 public:
  ServerConn(Node& node, CtrlPool<ServerCtrl>& ctrls, const Hello& h, Mismatches* mism)
      : node_(node), ctrls_(ctrls), h_(h), lay_(h.max_size, h.depth),
        gen_(h.seed, h.conn, h.max_size), mism_(mism) {
    data_ = alloc_touched(lay_.bytes());
    if (!data_) die(kExitError, "out of memory for connection %u", h.conn);
    const CtrlPool<ServerCtrl>::Block b = ctrls_.take();
    ctrl_ = b.ctrl;
    ctrl_stag_ = b.stag;
    slot_ = b.slot;
    constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                              kAccessRemoteAtomic;
    data_stag_ = node_.reg(data_.get(), lay_.bytes(), kAll);
    fill_pattern(data_.get() + lay_.read_src(), lay_.read_len(), gen_.read_seed());
    const uint64_t init = gen_.atomic_init();
    std::memcpy(data_.get() + lay_.atomic(), &init, 8);
    qp_ = node_.make_qp(32, h.depth + 1, static_cast<uint16_t>(h.depth));
    for (uint32_t i = 0; i < h.depth; ++i) post_recv();
  }
  ~ServerConn() {
    node_.eng().destroy_qp(qp_);
    node_.eng().dereg_mr(data_stag_);
    ctrls_.give(slot_);
  }
  ServerConn(const ServerConn&) = delete;
  ServerConn& operator=(const ServerConn&) = delete;

  Qp* qp() const { return qp_; }
  uint32_t slot() const { return slot_; }  // its control block's, in the pool
  bool finished() const { return done_posted_; }
  const Credit& credit() const { return live_; }
  Welcome welcome() const {
    Welcome w;
    w.data = {.addr = addr_of(data_.get()), .len = lay_.bytes(), .rkey = data_stag_};
    w.ctrl = {.addr = addr_of(ctrl_), .len = sizeof(ServerCtrl), .rkey = ctrl_stag_};
    return w;
  }
  void set_established() {
    established_ = true;
    last_moved_ = Clock::now();
  }
  // When this connection last showed a sign of its client (for --serve-until-idle).
  Clock::time_point last_moved() const { return last_moved_; }

  // Receive completions queue up until the cursor reaches their operation.
  bool on_wc(const Wc& wc) {
    if (wc.status != WcStatus::kSuccess) {
      // Once our account is out the client closes, which flushes the
      // receives still posted; their completions may be polled before the
      // kDisconnected event (the c2 watchdog runs progress in between).
      if (done_posted_ && wc.status == WcStatus::kWrFlushErr) return true;
      std::fprintf(stderr, "srdma_soak server: connection %u: %s completion failed: %s "
                   "(vendor_err 0x%x)\n", h_.conn, to_string(wc.opcode), to_string(wc.status),
                   wc.vendor_err);
      return false;
    }
    if (wc.opcode == WcOpcode::kRecv || wc.opcode == WcOpcode::kRecvRdmaImm) recvs_.push_back(wc);
    last_moved_ = Clock::now();
    return true;
  }

  // Checks what has arrived, returns credit, finishes once the client ends.
  // Returns true if anything moved.
  // now: the caller's pass time (a clock read per step costs at 10,000).
  bool step(uint64_t rss_kb, Clock::time_point now) {
    if (!established_ || done_posted_) return false;
    const uint64_t before = cursor_;
    advance();
    live_.rss_kb = rss_kb;
    const uint64_t end = load(ctrl_->end);
    if (end && cursor_ + 1 >= end) finish(end);
    if (!final_posted_) send_credit(now);
    if (cursor_ == before) return false;
    last_moved_ = now;
    return true;
  }

  std::string describe() const {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "conn %u at op %" PRIu64 " (%s) notify %" PRIu64 " end %"
                  PRIu64 " queued receives %zu", h_.conn, cursor_,
                  op_name(gen_.at(cursor_).op), load(ctrl_->notify), load(ctrl_->end),
                  recvs_.size());
    return buf;
  }

 private:
  void post_recv() {
    RecvWr wr{.wr_id = posted_, .num_sge = 1};
    wr.sg_list[0] = Sge{addr_of(data_.get() + lay_.recv(posted_)),
                        static_cast<uint32_t>(lay_.stride), data_stag_};
    if (int rc = node_.eng().post_recv(qp_, wr); rc < 0)
      die(kExitError, "post_recv: %s", std::strerror(-rc));
    ++posted_;
    live_.recv_posted = posted_;
  }

  // Walks the client's sequence as far as the evidence goes. Reads and
  // atomics need nothing here (the client checks them), so the cursor may
  // run ahead of the client over them; it waits at the next Send or Write.
  void advance() {
    const uint64_t end = load(ctrl_->end);
    const uint64_t issued = std::max(load(ctrl_->notify), end ? end - 1 : 0);
    while (!end || cursor_ + 1 < end) {
      const OpSpec s = next_op_.at(cursor_);
      switch (s.op) {
        case Op::kRead:
        case Op::kFetchAdd:
        case Op::kCmpSwap:
          break;
        case Op::kSend:
        case Op::kWriteImm:
          if (recvs_.empty()) return;
          check_recv(s, recvs_.front());
          recvs_.pop_front();
          break;
        case Op::kWrite:
          if (issued <= cursor_) return;
          check_write(s);
          break;
      }
      ++cursor_;
    }
  }

  void check_recv(const OpSpec& s, const Wc& wc) {
    const uint64_t k = cursor_;
    const uint8_t* rx = data_.get() + lay_.recv(recv_done_);
    if (s.op == Op::kSend) {
      if (wc.opcode != WcOpcode::kRecv || wc.byte_len != s.size)
        mism_->report("conn %u op %" PRIu64 " send of %u bytes arrived as %s of %u bytes",
                      h_.conn, k, s.size, to_string(wc.opcode), wc.byte_len);
      else
        mism_->check("send", h_.conn, k, rx, s.size, s.seed);
    } else {
      if (wc.opcode != WcOpcode::kRecvRdmaImm || wc.imm_data != s.imm)
        mism_->report("conn %u op %" PRIu64 " write_imm arrived as %s, immediate 0x%" PRIx64
                      " (expected 0x%" PRIx64 ")", h_.conn, k, to_string(wc.opcode), wc.imm_data,
                      s.imm);
      check_write(s);
    }
    ++recv_done_;
    post_recv();  // the slot just checked is the one reposted
    if (s.op == Op::kSend) count(s.size);
  }

  void check_write(const OpSpec& s) {
    const uint8_t* p = data_.get() + lay_.wslot(writes_done_) + s.remote_off;
    mism_->check(op_name(s.op), h_.conn, cursor_, p, s.size, s.seed);
    ++writes_done_;
    live_.writes_checked = writes_done_;
    count(s.size);
  }

  void count(uint64_t bytes) {
    ++live_.ops_checked;
    live_.bytes_checked += bytes;
    live_.mismatches = mism_->count() - mism0_;
  }

  // The client has completed end - 1 operations: last checks, final account.
  void finish(uint64_t end) {
    if (!final_checked_) {
      final_checked_ = true;
      if (!recvs_.empty())
        mism_->report("conn %u: %zu receives beyond the client's last operation", h_.conn,
                      recvs_.size());
      check_atomic_word(end - 1);
      live_.mismatches = mism_->count() - mism0_;
    }
    if (!final_posted_ && post_credit()) final_posted_ = true;
    if (final_posted_ && !done_posted_) {
      ctrl_->done_src = end;
      if (post_write(&ctrl_->done_src, 8, offsetof(ClientCtrl, done))) done_posted_ = true;
    }
  }

  // Replays the atomics of ops [0, n) and compares the word.
  void check_atomic_word(uint64_t n) {
    uint64_t v = gen_.atomic_init(), compare = 0;
    for (uint64_t k = 0; k < n; ++k) {
      const OpSpec s = gen_.at(k);
      if (is_atomic(s.op)) apply_atomic(s, &v, &compare);
    }
    uint64_t word;
    std::memcpy(&word, data_.get() + lay_.atomic(), 8);
    if (word != v)
      mism_->report("conn %u: atomic word 0x%016" PRIx64 " after %" PRIu64
                    " ops, model 0x%016" PRIx64, h_.conn, word, n, v);
  }

  // Credits move often: send them when they changed and the queue has room.
  void send_credit(Clock::time_point now) {
    if (live_.recv_posted == sent_.recv_posted && live_.writes_checked == sent_.writes_checked &&
        live_.rss_kb == sent_.rss_kb && now < next_idle_credit_)
      return;
    if (post_credit()) {
      sent_ = live_;
      next_idle_credit_ = now + std::chrono::milliseconds(250);
    }
  }
  bool post_credit() {
    ctrl_->credit_src = live_;
    return post_write(&ctrl_->credit_src, sizeof(Credit), offsetof(ClientCtrl, credit));
  }
  // An unsignaled Write into the client's control block; false if the send
  // queue is full (tried again on a later step).
  bool post_write(const void* src, uint32_t len, size_t peer_off) {
    SendWr wr{.opcode = WrOpcode::kWrite, .flags = 0, .num_sge = 1,
              .remote_addr = h_.ctrl.addr + peer_off, .rkey = h_.ctrl.rkey};
    wr.sg_list[0] = Sge{addr_of(src), len, ctrl_stag_};
    const int rc = node_.eng().post_send(qp_, wr);
    if (rc == -EAGAIN) return false;
    if (rc < 0) die(kExitError, "post_send(credit): %s", std::strerror(-rc));
    return true;
  }

  Node& node_;
  CtrlPool<ServerCtrl>& ctrls_;
  const Hello h_;
  const Layout lay_;
  const OpGen gen_;
  OpCache next_op_{gen_};
  Mismatches* mism_;
  const uint64_t mism0_ = mism_->count();
  Buffer data_;
  ServerCtrl* ctrl_ = nullptr;  // in ctrls_
  uint32_t data_stag_ = 0, ctrl_stag_ = 0, slot_ = 0;
  Qp* qp_ = nullptr;
  std::deque<Wc> recvs_;
  uint64_t cursor_ = 0;  // the next operation of the client's to check
  uint64_t posted_ = 0, recv_done_ = 0, writes_done_ = 0;
  Credit live_, sent_;
  Clock::time_point next_idle_credit_{};
  Clock::time_point last_moved_ = Clock::now();
  bool established_ = false, final_checked_ = false, final_posted_ = false, done_posted_ = false;
};

}  // namespace softrdma::soak
