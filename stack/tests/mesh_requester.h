// mesh_test's requester side of a connection (protocol in mesh_test.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "stack/tests/mesh_common.h"

namespace softrdma::mesh {

// Our connection to responder `peer`: we post, we check Reads and atomics.
class Requester {
 public:
  enum WrId : uint64_t { kWrite = 1, kSend, kWriteImm, kRead, kFetchAdd, kCasHit, kCasMiss, kDone };

  Requester(Engine& e, Pd* pd, int self, int peer, int procs, uint64_t big)
      : e_(e), self_(self), peer_(peer), sizes_(sizes_for(self, peer, procs, big)),
        atomic_(self, peer) {
    const uint64_t max = largest(sizes_);
    for (Buf* b : {&src_w_, &src_s_, &src_i_}) b->init(e, pd, max, 0);
    read_.init(e, pd, max, kAccessLocalWrite);
    words_.init(e, pd, 64, kAccessLocalWrite);  // atomic results and the DONE word
    acks_.init(e, pd, sizeof(Ack) * (sizes_.size() + 1), kAccessLocalWrite);
    read_expect_ = pattern(max + kReadSlack, seed_of(peer, self, 0, What::kReadSource));
    cq_ = e.create_cq(64);
    qp_ = e.create_qp({.pd = pd, .send_cq = cq_, .recv_cq = cq_, .sq_depth = 16,
                       .rq_depth = static_cast<uint32_t>(sizes_.size()) + 2});
    if (!cq_ || !qp_) fail("create_qp");
    // Every acknowledgement the responder will send, posted up front.
    for (size_t k = 0; k <= sizes_.size(); ++k) {
      RecvWr r{.wr_id = k, .num_sge = 1};
      r.sg_list[0] = acks_.sge(k * sizeof(Ack), sizeof(Ack));
      if (int rc = e.post_recv(qp_, r); rc != 0) fail("post_recv: %s", std::strerror(-rc));
    }
  }

  Qp* qp() const { return qp_; }
  bool done() const { return done_; }
  bool big() const { return sizes_.back() > (2u << 20); }
  const std::vector<uint64_t>& sizes() const { return sizes_; }

  void connect(uint16_t port) {
    Hello h;
    h.from = self_;
    if (int rc = e_.connect(qp_, loopback(port), &h, sizeof(h)); rc != 0)
      fail("connect %d->%d (127.0.0.1:%u): %s", self_, peer_, port, std::strerror(-rc));
  }

  void established(const CmEvent& ev) {
    Welcome w;
    if (!decode(ev.private_data, &w) || w.from != peer_)
      fail("%d->%d: the MPA Reply is not the expected peer's", self_, peer_);
    a_ = w.a, b_ = w.b, c_ = w.c, w_ = w.w;
    up_ = true;
    start_step();
  }

  // Reaps completions and moves on when a step is complete.
  void poll() {
    if (!up_ || done_) return;
    Wc wcs[16];
    for (int n; (n = e_.poll_cq(cq_, wcs, 16)) > 0;)
      for (int i = 0; i < n; ++i) on_wc(expect_success(wcs[i], "requester", self_, peer_));
    if (pending_ > 0 || !acked_) return;
    if (step_ < sizes_.size()) {
      finish_step();
      ++step_;
      start_step();
    } else {
      done_ = true;
    }
  }

 private:
  void post(const SendWr& wr) {
    if (int rc = e_.post_send(qp_, wr); rc != 0)
      fail("%d->%d: post_send(%s): %s", self_, peer_, to_string(wr.opcode), std::strerror(-rc));
    ++pending_;
  }

  SendWr rdma(WrOpcode op, WrId id, const Region& r, uint64_t off) const {
    return SendWr{.wr_id = id, .opcode = op, .remote_addr = r.addr + off, .rkey = r.rkey};
  }

  void start_step() {
    acked_ = false;
    if (step_ == sizes_.size()) {  // DONE: the atomic word we expect
      std::memcpy(words_.p(24), &atomic_.w, 8);
      SendWr s{.wr_id = kDone, .opcode = WrOpcode::kSend, .num_sge = 1};
      s.sg_list[0] = words_.sge(24, 8);
      post(s);
      return;
    }
    const uint64_t n = sizes_[step_];
    const size_t k = step_;
    auto fill = [&](Buf& b, What what) {
      const std::vector<uint8_t> p = pattern(n, seed_of(self_, peer_, k, what));
      std::memcpy(b.p(), p.data(), n);
    };
    fill(src_w_, What::kWrite);
    fill(src_s_, What::kSend);
    fill(src_i_, What::kWriteImm);
    std::memset(read_.p(), 0xA5, n);
    std::memset(words_.p(), 0xA5, 24);

    SendWr w = rdma(WrOpcode::kWrite, kWrite, a_, 0);
    w.num_sge = 1, w.sg_list[0] = src_w_.sge(0, n);
    post(w);
    SendWr fa = rdma(WrOpcode::kAtomicFetchAdd, kFetchAdd, w_, 0);
    fa.num_sge = 1, fa.sg_list[0] = words_.sge(0, 8), fa.compare_add = AtomicSeq::addend(k);
    post(fa);
    AtomicSeq after_add = atomic_;
    after_add.w += AtomicSeq::addend(k);
    SendWr hit = rdma(WrOpcode::kAtomicCmpSwap, kCasHit, w_, 0);
    hit.num_sge = 1, hit.sg_list[0] = words_.sge(8, 8);
    hit.compare_add = after_add.w, hit.swap = after_add.swap_value(k);
    post(hit);
    SendWr miss = rdma(WrOpcode::kAtomicCmpSwap, kCasMiss, w_, 0);
    miss.num_sge = 1, miss.sg_list[0] = words_.sge(16, 8);
    miss.compare_add = ~after_add.swap_value(k), miss.swap = 0x0BAD0BAD0BAD0BADull;
    post(miss);
    SendWr s{.wr_id = kSend, .opcode = WrOpcode::kSend, .num_sge = 1};
    s.sg_list[0] = src_s_.sge(0, n);
    post(s);
    SendWr wi = rdma(WrOpcode::kWriteWithImm, kWriteImm, b_, 0);
    wi.num_sge = 1, wi.sg_list[0] = src_i_.sge(0, n), wi.imm_data = tag(k);
    post(wi);
    SendWr r = rdma(WrOpcode::kRead, kRead, c_, k % kReadSlack);
    r.num_sge = 1, r.sg_list[0] = read_.sge(0, n);
    post(r);
  }

  static uint64_t tag(size_t step) { return 0x1D00000000ull + step; }

  void on_wc(const Wc& wc) {
    static constexpr WcOpcode kOps[] = {WcOpcode::kSend, WcOpcode::kWrite, WcOpcode::kSend,
                                        WcOpcode::kWrite, WcOpcode::kRead, WcOpcode::kFetchAdd,
                                        WcOpcode::kCmpSwap, WcOpcode::kCmpSwap, WcOpcode::kSend};
    if (wc.opcode == WcOpcode::kRecv) {  // the responder's acknowledgement
      Ack a;
      std::memcpy(&a, acks_.p(wc.wr_id * sizeof(Ack)), sizeof(a));
      if (wc.byte_len != sizeof(Ack) || a.magic != kMagic || a.step != step_ ||
          wc.wr_id != step_)
        fail("%d->%d: acknowledgement for step %" PRIu64 " (%u bytes, slot %" PRIu64
             ") while at step %zu", self_, peer_, a.step, wc.byte_len, wc.wr_id, step_);
      acked_ = true;
      return;
    }
    if (wc.wr_id < kWrite || wc.wr_id > kDone || wc.opcode != kOps[wc.wr_id])
      fail("%d->%d: completion %s for work request %" PRIu64, self_, peer_,
           to_string(wc.opcode), wc.wr_id);
    if (pending_ == 0) fail("%d->%d: a completion too many", self_, peer_);
    --pending_;
    if (wc.wr_id == kRead && wc.byte_len != sizes_[step_])
      fail("%d->%d: Read of %" PRIu64 " completed %u bytes", self_, peer_, sizes_[step_],
           wc.byte_len);
  }

  // All seven completed and the responder checked its side: our checks.
  void finish_step() {
    const uint64_t n = sizes_[step_];
    const size_t k = step_;
    expect_bytes("RDMA Read", peer_, self_, k, n, read_.p(), read_expect_.data() + k % kReadSlack);
    uint64_t got[3];
    std::memcpy(got, words_.p(), 24);
    const uint64_t before = atomic_.w;
    const uint64_t after_add = before + AtomicSeq::addend(k);
    atomic_.advance(k);
    const uint64_t want[3] = {before, after_add, atomic_.w};
    static const char* const kNames[] = {"Fetch-Add", "Cmp-Swap (equal)", "Cmp-Swap (unequal)"};
    for (int i = 0; i < 3; ++i)
      if (got[i] != want[i])
        fail("ATOMIC MISMATCH %d->%d step %zu: %s returned 0x%016" PRIx64
             ", the word was 0x%016" PRIx64, self_, peer_, k, kNames[i], got[i], want[i]);
  }

  Engine& e_;
  const int self_, peer_;
  const std::vector<uint64_t> sizes_;
  AtomicSeq atomic_;
  Buf src_w_, src_s_, src_i_, read_, words_, acks_;
  std::vector<uint8_t> read_expect_;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  Region a_, b_, c_, w_;
  size_t step_ = 0;
  int pending_ = 0;
  bool acked_ = false;
  bool up_ = false;
  bool done_ = false;
};

}  // namespace softrdma::mesh
