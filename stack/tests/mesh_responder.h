// mesh_test's responder side of a connection (protocol in mesh_test.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "stack/tests/mesh_common.h"

namespace softrdma::mesh {

// The connection requester `peer` opened to us: we check what lands.
class Responder {
 public:
  Responder(Engine& e, Pd* pd, int self, int peer, int procs, uint64_t big)
      : e_(e), self_(self), peer_(peer), sizes_(sizes_for(peer, self, procs, big)),
        atomic_(peer, self) {
    const uint64_t max = largest(sizes_);
    recv_.init(e, pd, max, kAccessLocalWrite);
    a_.init(e, pd, max, kAccessRemoteWrite);
    b_.init(e, pd, max, kAccessRemoteWrite);
    c_.init(e, pd, max + kReadSlack, kAccessRemoteRead);
    const std::vector<uint8_t> src = pattern(max + kReadSlack, seed_of(self, peer, 0, What::kReadSource));
    std::memcpy(c_.p(), src.data(), src.size());
    w_.init(e, pd, 8, kAccessRemoteAtomic | kAccessRemoteWrite | kAccessLocalWrite);
    std::memcpy(w_.p(), &atomic_.w, 8);
    acks_.init(e, pd, sizeof(Ack) * (sizes_.size() + 1), 0);
    cq_ = e.create_cq(64);
    qp_ = e.create_qp({.pd = pd, .send_cq = cq_, .recv_cq = cq_,
                       .sq_depth = static_cast<uint32_t>(sizes_.size()) + 2, .rq_depth = 8});
    if (!cq_ || !qp_) fail("create_qp");
    post_receives();
  }

  bool done() const { return done_; }
  Qp* qp() const { return qp_; }

  void accept(ConnReq* req) {
    Welcome w;
    w.from = self_;
    w.a = {addr_of(a_.p()), a_.mr->stag};
    w.b = {addr_of(b_.p()), b_.mr->stag};
    w.c = {addr_of(c_.p()), c_.mr->stag};
    w.w = {addr_of(w_.p()), w_.mr->stag};
    if (int rc = e_.accept(req, qp_, &w, sizeof(w)); rc != 0)
      fail("accept from %d: %s", peer_, std::strerror(-rc));
  }

  void poll() {
    Wc wcs[16];
    for (int n; (n = e_.poll_cq(cq_, wcs, 16)) > 0;)
      for (int i = 0; i < n; ++i) on_wc(expect_success(wcs[i], "responder", peer_, self_));
  }

 private:
  // The receives one step consumes: the Send's, then the Immediate Data's
  // (no buffer); after the last step only DONE's.
  void post_receives() {
    RecvWr r{.wr_id = 2 * step_, .num_sge = 1};
    r.sg_list[0] = recv_.sge(0, recv_.v.size());
    if (int rc = e_.post_recv(qp_, r); rc != 0) fail("post_recv: %s", std::strerror(-rc));
    if (step_ == sizes_.size()) return;
    RecvWr imm{.wr_id = 2 * step_ + 1, .num_sge = 0};
    if (int rc = e_.post_recv(qp_, imm); rc != 0) fail("post_recv: %s", std::strerror(-rc));
  }

  void on_wc(const Wc& wc) {
    const size_t k = step_;
    if (wc.opcode == WcOpcode::kSend) return;  // our acknowledgement went out
    if (done_) fail("%d->%d: a completion after DONE", peer_, self_);
    if (wc.opcode == WcOpcode::kRecv) {
      if (wc.wr_id != 2 * k || got_send_)
        fail("%d->%d: Send completed receive %" PRIu64 " at step %zu", peer_, self_, wc.wr_id, k);
      // This step's atomics came before this Send on the stream (the next
      // step's wait for our acknowledgement).
      if (k < sizes_.size()) atomic_.advance(k);
      uint64_t word;
      std::memcpy(&word, w_.p(), 8);
      if (word != atomic_.w)
        fail("ATOMIC MISMATCH %d->%d: the word is 0x%016" PRIx64 " after step %zu, expected "
             "0x%016" PRIx64, peer_, self_, word, k, atomic_.w);
      if (k == sizes_.size()) {  // DONE carries what the requester expects
        uint64_t theirs = 0;
        if (wc.byte_len == 8) std::memcpy(&theirs, recv_.p(), 8);
        if (wc.byte_len != 8 || theirs != atomic_.w)
          fail("%d->%d: DONE of %u bytes says the word is 0x%016" PRIx64 ", we have 0x%016" PRIx64,
               peer_, self_, wc.byte_len, theirs, atomic_.w);
        acknowledge();
        done_ = true;
        return;
      }
      const uint64_t n = sizes_[k];
      if (wc.byte_len != n)
        fail("%d->%d step %zu: Send of %" PRIu64 " bytes arrived with %u", peer_, self_, k, n,
             wc.byte_len);
      expect_bytes("Send", peer_, self_, k, n, recv_.p(),
                   pattern(n, seed_of(peer_, self_, k, What::kSend)).data());
      // The Write was posted before the Send on the same stream: placed.
      expect_bytes("RDMA Write", peer_, self_, k, n, a_.p(),
                   pattern(n, seed_of(peer_, self_, k, What::kWrite)).data());
      got_send_ = true;
    } else if (wc.opcode == WcOpcode::kRecvRdmaImm) {
      if (wc.wr_id != 2 * k + 1 || !got_send_ || !(wc.flags & kWcWithImm) ||
          wc.imm_data != 0x1D00000000ull + k)
        fail("%d->%d step %zu: Immediate Data 0x%" PRIx64 " (flags 0x%x) on receive %" PRIu64,
             peer_, self_, k, wc.imm_data, wc.flags, wc.wr_id);
      const uint64_t n = sizes_[k];
      expect_bytes("RDMA Write with Immediate", peer_, self_, k, n, b_.p(),
                   pattern(n, seed_of(peer_, self_, k, What::kWriteImm)).data());
      got_send_ = false;
      ++step_;
      post_receives();  // before the acknowledgement lets the requester go on
      acknowledge();
    } else {
      fail("%d->%d: unexpected %s completion", peer_, self_, to_string(wc.opcode));
    }
  }

  void acknowledge() {
    // Acknowledgement i names step i (DONE: the number of steps).
    const uint64_t acked = k_acked_++;
    Ack a{.step = acked};
    std::memcpy(acks_.p(acked * sizeof(Ack)), &a, sizeof(a));
    SendWr s{.wr_id = 100 + acked, .opcode = WrOpcode::kSend, .num_sge = 1};
    s.sg_list[0] = acks_.sge(acked * sizeof(Ack), sizeof(Ack));
    if (int rc = e_.post_send(qp_, s); rc != 0)
      fail("%d->%d: acknowledgement: %s", peer_, self_, std::strerror(-rc));
  }

  Engine& e_;
  const int self_, peer_;
  const std::vector<uint64_t> sizes_;
  AtomicSeq atomic_;
  Buf recv_, a_, b_, c_, w_, acks_;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  size_t step_ = 0;
  uint64_t k_acked_ = 0;
  bool got_send_ = false;
  bool done_ = false;
};

}  // namespace softrdma::mesh
