// The fixture of the Terminate tests (terminate_*_test.cc): remote input is
// untrusted. A hand-driven peer (raw_peer.h) feeds a real Engine bad FPDUs
// and bad MPA frames, and for each one we check the whole contract:
//   (a) the engine answers with a Terminate carrying the RFC's layer, error
//       type and code (RFC 5040 §4.8/§7, RFC 5041 §7, RFC 5044 §8), the M/D/R
//       bits, and the offending DDP (and Read Request) header verbatim;
//   (b) the QP goes to error, every outstanding work request completes once
//       with an error, and the CM reports kDisconnected with the cause;
//   (c) nothing outside registered memory (canaries) nor any region the bad
//       FPDU aimed at was written;
//   (d) the engine keeps going: another connection on the same Engine still
//       moves verified data (Send, Write, Read).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "stack/engine.h"
#include "stack/tests/loopback.h"
#include "stack/tests/raw_peer.h"

namespace softrdma::testing::term {

using iwarp::AtomicOpcode;
using iwarp::DdpEtype;
using iwarp::DdpTaggedEcode;
using iwarp::DdpUntaggedEcode;
using iwarp::LlpEcode;
using iwarp::RdmapEcode;
using iwarp::RdmapEtype;
using iwarp::RdmapOpcode;
using iwarp::TermLayer;

inline constexpr uint8_t u8(auto v) { return static_cast<uint8_t>(v); }

inline constexpr size_t kCanary = 64;
inline constexpr int kWaitMs = 10000;
inline constexpr uint16_t kIrd = 2;               // the target QP's IRD (and ORD)
inline constexpr uint32_t kRawStag = 0x00abcd00;  // the raw peer's (never checked by us)
inline constexpr uint64_t kRawTo = 0x10000;
inline constexpr uint32_t kNoSuchStag = 0x7fffff00;

// Wire octets of the offending FPDU's header past the MPA length.
inline Bytes quoted_ddp_hdr(const Bytes& fpdu) {
  const bool tagged = fpdu[2] & iwarp::kDdpTagged;
  return Bytes(fpdu.begin() + 2, fpdu.begin() + static_cast<long>(iwarp::hdr_len(tagged)));
}

inline std::string code_str(uint8_t layer, uint8_t etype, uint8_t ecode) {
  char b[64];
  std::snprintf(b, sizeof(b), "layer %u etype %u ecode 0x%02x", layer, etype, ecode);
  return b;
}

// A buffer with canary octets on both sides and the contents we expect it
// to hold, so any write outside it, or inside it when none was due, shows.
class Guarded {
 public:
  Guarded(const char* name, size_t n, uint8_t fill) : name_(name), n_(n), mem_(n + 2 * kCanary) {
    for (size_t i = 0; i < mem_.size(); ++i) {
      mem_[i] = i < kCanary || i >= kCanary + n ? canary(i) : fill;
    }
    expected_.assign(n, fill);
  }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;

  uint8_t* data() { return mem_.data() + kCanary; }
  const uint8_t* data() const { return mem_.data() + kCanary; }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(data()); }
  size_t size() const { return n_; }
  const char* name() const { return name_; }
  Bytes contents() const { return Bytes(data(), data() + n_); }
  // A legitimate placement the test expects.
  void expect_write(size_t off, const Bytes& b) {
    std::copy(b.begin(), b.end(), expected_.begin() + static_cast<long>(off));
  }
  bool canaries_intact() const {
    for (size_t i = 0; i < kCanary; ++i) {
      if (mem_[i] != canary(i) || mem_[kCanary + n_ + i] != canary(kCanary + n_ + i)) return false;
    }
    return true;
  }
  bool as_expected() const { return contents() == expected_; }

 private:
  static uint8_t canary(size_t i) { return static_cast<uint8_t>(0xA5 ^ (i * 29)); }
  const char* name_;
  size_t n_;
  Bytes mem_;
  Bytes expected_;
};

struct OpenOpts {
  uint8_t rev = iwarp::kMpaRev2;  // MPA revision the raw peer asks for
  bool crc = true;
  bool raw = true;            // connect the raw peer to qp_t_
  bool send_rtr = true;       // rev 2: the raw peer sends its RTR
  bool pending_read = true;   // qp_t_ has a Read outstanding and a fenced Send behind it
  bool healthy_first = true;  // connect the healthy client before the raw peer
  uint64_t unexpected_bytes = EngineConfig{}.unexpected_bytes;  // Sends held without a receive
};

// What the Terminate must say.
struct Want {
  TermLayer layer;
  uint8_t etype;
  uint8_t ecode;
  bool m = false, d = false, r = false;
};

struct Check {
  bool code = true;                        // compare layer/etype/ecode with Want
  bool hdrct = true;                       // compare M/D/R with Want (and the quoted headers)
  std::vector<const Guarded*> may_change;  // regions the bad input may legitimately touch
  std::map<uint64_t, WcStatus> victims;    // WRs the error is about, and their status
};

class TerminateTest : public ::testing::Test {
 protected:
  void TearDown() override {
    raw_.reset();
    cli_.reset();
    eng_.reset();
  }

  // Progress for both engines; the engine under test accepts requests
  // whose private data names a QP ("raw" → qp_t_, "healthy" → qp_h_).
  void Pump() {
    if (eng_) eng_->progress(0);
    if (cli_) cli_->progress(0);
    CmEvent ev;
    while (eng_ && eng_->poll_cm(&ev)) {
      if (ev.type == CmEventType::kConnectRequest) {
        const std::string tag(ev.private_data.begin(), ev.private_data.end());
        Qp* qp = tag == "raw" ? qp_t_ : tag == "healthy" ? qp_h_ : nullptr;
        if (qp) {
          EXPECT_EQ(eng_->accept(ev.req, qp, nullptr, 0), 0);
        } else {
          EXPECT_EQ(eng_->reject(ev.req, nullptr, 0), 0);
        }
      }
      events_.push_back(std::move(ev));
    }
    while (cli_ && cli_->poll_cm(&ev)) cli_events_.push_back(std::move(ev));
  }

  bool WaitFor(const std::function<bool()>& pred, int ms = kWaitMs) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      Pump();
      if (pred()) return true;
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // Keeps the engines running for a while (to let wrong things happen).
  void Settle(int ms) {
    WaitFor([] { return false; }, ms);
  }

  // A registration's STag (0 when it failed, which no valid STag is).
  static uint32_t Stag(const Mr* mr) { return mr ? mr->stag : 0; }

  static size_t count(const std::vector<CmEvent>& evs, CmEventType t, const Qp* qp) {
    return static_cast<size_t>(std::count_if(evs.begin(), evs.end(), [&](const CmEvent& e) {
      return e.type == t && (qp == nullptr || e.qp == qp);
    }));
  }
  void Reap(Engine* e, Cq* cq, std::vector<Wc>* out) {
    Wc buf[16];
    for (int n; (n = e->poll_cq(cq, buf, 16)) > 0;) out->insert(out->end(), buf, buf + n);
  }

  void Open(const OpenOpts& o = {}) {
    EngineConfig cfg;
    cfg.crc = o.crc;
    cfg.markers = false;
    cfg.mpa_rev = iwarp::kMpaRev2;
    cfg.rtr = iwarp::Rtr::kWrite;
    cfg.mpa_timeout_ms = 5000;
    cfg.unexpected_bytes = o.unexpected_bytes;
    eng_ = std::make_unique<Engine>(cfg);
    pd_ = eng_->alloc_pd();
    pd2_ = eng_->alloc_pd();
    cq_t_ = eng_->create_cq(64);
    cq_h_ = eng_->create_cq(64);
    qp_t_ = eng_->create_qp({.pd = pd_,
                             .send_cq = cq_t_,
                             .recv_cq = cq_t_,
                             .sq_depth = 16,
                             .rq_depth = 16,
                             .ord = kIrd,
                             .ird = kIrd});
    qp_h_ = eng_->create_qp(
        {.pd = pd_, .send_cq = cq_h_, .recv_cq = cq_h_, .sq_depth = 16, .rq_depth = 16});
    ASSERT_TRUE(qp_t_ && qp_h_);
    constexpr uint32_t kAll =
        kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic;
    // A closed STag first, so the next registration reuses its index with a
    // new key: the stale STag must stay dead although the slot lives again.
    Mr* dead = eng_->reg_mr(pd_, rw_.data(), 16, kAll);
    ASSERT_NE(dead, nullptr);
    dead_stag_ = dead->stag;
    ASSERT_EQ(eng_->dereg_mr(dead_stag_), 0);
    mr_rw_ = Stag(eng_->reg_mr(pd_, rw_.data(), rw_.size(), kAll));
    ASSERT_NE(mr_rw_, dead_stag_);
    ASSERT_EQ(mr_rw_ >> 8, dead_stag_ >> 8);  // same slot, new key
    mr_ro_ = Stag(eng_->reg_mr(pd_, ro_.data(), ro_.size(), kAccessLocalWrite | kAccessRemoteRead));
    mr_wo_ =
        Stag(eng_->reg_mr(pd_, wo_.data(), wo_.size(), kAccessLocalWrite | kAccessRemoteWrite));
    mr_other_ = Stag(eng_->reg_mr(pd2_, other_.data(), other_.size(), kAll));
    mr_recv_ = Stag(eng_->reg_mr(pd_, recv_.data(), recv_.size(), kAccessLocalWrite));
    mr_sink_ = Stag(eng_->reg_mr(pd_, sink_.data(), sink_.size(), kAccessLocalWrite));
    mr_src_ = Stag(eng_->reg_mr(pd_, src_.data(), src_.size(), kAccessLocalWrite));
    mr_hrecv_ = Stag(eng_->reg_mr(pd_, hrecv_.data(), hrecv_.size(), kAccessLocalWrite));
    mr_hrw_ = Stag(eng_->reg_mr(pd_, hrw_.data(), hrw_.size(),
                                kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead));
    for (uint32_t st :
         {mr_rw_, mr_ro_, mr_wo_, mr_other_, mr_recv_, mr_sink_, mr_src_, mr_hrecv_, mr_hrw_}) {
      ASSERT_NE(st, 0u);
    }
    ASSERT_EQ(eng_->listen(loopback_addr(0), 16, &lis_), 0);
    if (o.healthy_first) {
      ASSERT_NO_FATAL_FAILURE(ConnectHealthy());
    }
    if (!o.raw) return;

    raw_ = std::make_unique<RawPeer>([this] { Pump(); });
    iwarp::MpaParams req;
    req.rev = o.rev;
    req.crc = o.crc;
    req.markers = false;
    req.p2p = o.rev == iwarp::kMpaRev2;
    req.ird = kIrd;
    req.ord = kIrd;
    req.rtr_write = req.p2p;
    req.private_data = {'r', 'a', 'w'};
    iwarp::MpaParams rep;
    ASSERT_TRUE(raw_->connect_mpa(eng_->listen_addr(lis_), req, &rep)) << "MPA exchange failed";
    ASSERT_EQ(raw_->crc(), o.crc);
    ASSERT_EQ(rep.rev, o.rev);
    const bool p2p = o.rev == iwarp::kMpaRev2;
    if (p2p) {
      ASSERT_EQ(raw_->mpa().rtr, iwarp::Rtr::kWrite);
      ASSERT_EQ(rep.ird, kIrd);
    }

    for (uint64_t id : {101, 102}) {
      RecvWr rw{.wr_id = id, .num_sge = 1};
      rw.sg_list[0] = {recv_.addr() + (id - 101) * 64, 64, mr_recv_};
      ASSERT_EQ(eng_->post_recv(qp_t_, rw), 0);
      outstanding_.insert(id);
    }
    if (p2p && o.send_rtr) {
      ASSERT_TRUE(raw_->send_rtr_write());
    }
    if (!p2p || o.send_rtr) {
      ASSERT_TRUE(WaitFor([&] { return count(events_, CmEventType::kEstablished, qp_t_) == 1; }));
    }
    if (o.pending_read) {
      // A Read the raw peer never answers, and a fenced Send stuck behind it.
      SendWr rd{.wr_id = 201,
                .opcode = WrOpcode::kRead,
                .num_sge = 1,
                .remote_addr = kRawTo,
                .rkey = kRawStag};
      rd.sg_list[0] = {sink_.addr(), static_cast<uint32_t>(sink_.size()), mr_sink_};
      ASSERT_EQ(eng_->post_send(qp_t_, rd), 0);
      SendWr sw{
          .wr_id = 202, .opcode = WrOpcode::kSend, .flags = kWrSignaled | kWrFence, .num_sge = 1};
      sw.sg_list[0] = {src_.addr(), 16, mr_src_};
      ASSERT_EQ(eng_->post_send(qp_t_, sw), 0);
      outstanding_.insert({201, 202});
      if (!p2p || o.send_rtr) {
        // The engine's Read Request, parsed by the raw peer (CRC checked).
        RxFpdu f;
        ASSERT_TRUE(raw_->read_fpdu(&f));
        ASSERT_TRUE(f.complete_hdr());
        EXPECT_TRUE(f.crc_ok);
        EXPECT_FALSE(f.tagged());
        EXPECT_TRUE(f.ctrl().last());
        EXPECT_EQ(f.opcode(), u8(RdmapOpcode::kRdmaReadReq));
        EXPECT_EQ(f.qn(), iwarp::kQnReadReq);
        EXPECT_EQ(f.msn(), 1u);
        EXPECT_EQ(f.mo(), 0u);
        EXPECT_EQ(f.payload(), read_req_payload(mr_sink_, sink_.addr(), 64, kRawStag, kRawTo));
      }
    }
    Settle(20);
    Reap(eng_.get(), cq_t_, &wcs_t_);
    ASSERT_TRUE(wcs_t_.empty()) << "completion before any bad input";
  }

  // A second, well-behaved connection to the same Engine (another QP).
  void ConnectHealthy() {
    EngineConfig cc;
    cc.crc = true;
    cli_ = std::make_unique<Engine>(cc);
    cpd_ = cli_->alloc_pd();
    ccq_ = cli_->create_cq(64);
    cqp_ = cli_->create_qp(
        {.pd = cpd_, .send_cq = ccq_, .recv_cq = ccq_, .sq_depth = 16, .rq_depth = 16});
    mr_csrc_ = Stag(cli_->reg_mr(cpd_, c_src_.data(), c_src_.size(), kAccessLocalWrite));
    mr_cback_ = Stag(cli_->reg_mr(cpd_, c_back_.data(), c_back_.size(), kAccessLocalWrite));
    ASSERT_EQ(cli_->connect(cqp_, eng_->listen_addr(lis_), "healthy", 7), 0);
    ASSERT_TRUE(WaitFor([&] {
      return count(cli_events_, CmEventType::kEstablished, cqp_) == 1 &&
             count(events_, CmEventType::kEstablished, qp_h_) == 1;
    })) << "healthy connection did not come up";
  }

  // Send, Write and Read on the healthy connection, all bytes verified.
  void VerifyHealthy(uint32_t seed) {
    SCOPED_TRACE("healthy connection after the bad input");
    ASSERT_NE(cli_, nullptr);
    std::vector<Wc> hw, cw;
    const Bytes msg = pattern(hrecv_.size(), seed);
    std::memcpy(c_src_.data(), msg.data(), msg.size());
    RecvWr rw{.wr_id = 900, .num_sge = 1};
    rw.sg_list[0] = {hrecv_.addr(), static_cast<uint32_t>(hrecv_.size()), mr_hrecv_};
    ASSERT_EQ(eng_->post_recv(qp_h_, rw), 0);
    SendWr sw{.wr_id = 1, .opcode = WrOpcode::kSend, .num_sge = 1};
    sw.sg_list[0] = {c_src_.addr(), static_cast<uint32_t>(msg.size()), mr_csrc_};
    ASSERT_EQ(cli_->post_send(cqp_, sw), 0);
    ASSERT_TRUE(WaitFor([&] {
      Reap(eng_.get(), cq_h_, &hw);
      Reap(cli_.get(), ccq_, &cw);
      return !hw.empty() && !cw.empty();
    }));
    EXPECT_EQ(hw[0].status, WcStatus::kSuccess);
    EXPECT_EQ(hw[0].byte_len, msg.size());
    EXPECT_EQ(cw[0].status, WcStatus::kSuccess);
    EXPECT_EQ(hrecv_.contents(), msg);

    const Bytes data = pattern(hrw_.size(), seed + 7777);
    std::memcpy(c_src_.data(), data.data(), data.size());
    SendWr ww{.wr_id = 2,
              .opcode = WrOpcode::kWrite,
              .num_sge = 1,
              .remote_addr = hrw_.addr(),
              .rkey = mr_hrw_};
    ww.sg_list[0] = {c_src_.addr(), static_cast<uint32_t>(data.size()), mr_csrc_};
    SendWr rd{.wr_id = 3,
              .opcode = WrOpcode::kRead,
              .num_sge = 1,
              .remote_addr = hrw_.addr(),
              .rkey = mr_hrw_};
    rd.sg_list[0] = {c_back_.addr(), static_cast<uint32_t>(data.size()), mr_cback_};
    ASSERT_EQ(cli_->post_send(cqp_, ww), 0);
    ASSERT_EQ(cli_->post_send(cqp_, rd), 0);
    ASSERT_TRUE(WaitFor([&] {
      Reap(cli_.get(), ccq_, &cw);
      return cw.size() >= 3;
    }));
    for (const Wc& wc : cw) EXPECT_EQ(wc.status, WcStatus::kSuccess) << "wr " << wc.wr_id;
    EXPECT_EQ(hrw_.contents(), data);
    EXPECT_EQ(c_back_.contents(), data);
  }

  void CheckMemory(const std::vector<const Guarded*>& may_change) {
    for (const Guarded* g : all_) {
      EXPECT_TRUE(g->canaries_intact()) << "write outside registered buffer " << g->name();
      const bool exempt = std::find(may_change.begin(), may_change.end(), g) != may_change.end();
      if (!exempt) {
        EXPECT_TRUE(g->as_expected()) << "unexpected write into " << g->name();
      }
    }
  }

  // Waits for the given receive completions to succeed (legitimate traffic
  // before the bad input) and takes them off the outstanding set.
  void ExpectRecvOk(std::initializer_list<uint64_t> ids, uint32_t len) {
    ASSERT_TRUE(WaitFor([&] {
      Reap(eng_.get(), cq_t_, &wcs_t_);
      return wcs_t_.size() >= ids.size();
    }));
    ASSERT_EQ(wcs_t_.size(), ids.size());
    size_t i = 0;
    for (uint64_t id : ids) {
      EXPECT_EQ(wcs_t_[i].wr_id, id);
      EXPECT_EQ(wcs_t_[i].status, WcStatus::kSuccess);
      EXPECT_EQ(wcs_t_[i].opcode, WcOpcode::kRecv);
      EXPECT_EQ(wcs_t_[i].byte_len, len);
      outstanding_.erase(id);
      ++i;
    }
    wcs_t_.clear();
  }

  // The whole contract after `bad` (the offending FPDU as sent) went out.
  void ExpectTerminated(const Want& w, const Bytes& bad, const Check& c = {},
                        std::optional<TermInfo>* out = nullptr) {
    // (a) The Terminate: one untagged FPDU on QN 2, MSN 1, MO 0, Last.
    RxFpdu term;
    std::vector<RxFpdu> before;
    ASSERT_TRUE(raw_->read_terminate(&term, &before)) << "no Terminate from the engine";
    ASSERT_TRUE(term.complete_hdr());
    EXPECT_TRUE(term.crc_ok) << "Terminate CRC";
    EXPECT_TRUE(term.ctrl().last());
    EXPECT_EQ(term.ctrl().ddp_version(), iwarp::kDdpVersion);
    EXPECT_EQ(term.ctrl().rdmap_version(), iwarp::kRdmapVersion);
    EXPECT_EQ(term.qn(), iwarp::kQnTerminate);
    EXPECT_EQ(term.msn(), 1u);
    EXPECT_EQ(term.mo(), 0u);
    for (const RxFpdu& f : before) {
      EXPECT_TRUE(f.crc_ok);
      // Only Read Responses may precede it (IRD test); nothing else is due.
      EXPECT_EQ(f.opcode(), u8(RdmapOpcode::kRdmaReadResp)) << "unexpected FPDU before Terminate";
    }
    TermInfo t;
    std::string why;
    ASSERT_TRUE(decode_terminate(term, &t, &why)) << why;
    if (out) *out = t;  // only once a Terminate was decoded
    if (c.code) {
      EXPECT_EQ(code_str(t.layer, t.etype, t.ecode), code_str(u8(w.layer), w.etype, w.ecode));
    }
    if (c.hdrct) {
      EXPECT_EQ(t.m, w.m) << "M (DDP Segment Length valid)";
      EXPECT_EQ(t.d, w.d) << "D (terminated DDP header included)";
      EXPECT_EQ(t.r, w.r) << "R (terminated RDMAP header included)";
      if (t.d) {
        EXPECT_EQ(t.ddp_hdr, quoted_ddp_hdr(bad))
            << "the quoted DDP header is not the offending one";
      }
      if (t.m) {
        EXPECT_EQ(t.seg_len, (bad[0] << 8) | bad[1]) << "DDP Segment Length";
      }
      if (t.r) {
        const size_t h = iwarp::hdr_len(bad[2] & iwarp::kDdpTagged);
        EXPECT_EQ(t.rdmap_hdr,
                  Bytes(bad.begin() + static_cast<long>(h),
                        bad.begin() + static_cast<long>(h + iwarp::kTermRdmapHdrSize)));
      }
    }
    // The stream ends after the Terminate, with nothing after it.
    size_t stray = 0;
    EXPECT_TRUE(raw_->conn().wait_closed(&stray)) << "engine did not close the stream";
    EXPECT_EQ(stray, 0u) << "octets after the Terminate";

    // (b) QP in error, kDisconnected with the cause, every WR completed once.
    ASSERT_TRUE(WaitFor([&] { return count(events_, CmEventType::kDisconnected, qp_t_) > 0; }))
        << "no kDisconnected";
    for (const CmEvent& e : events_) {
      if (e.type != CmEventType::kDisconnected || e.qp != qp_t_) continue;
      EXPECT_EQ(e.term, t.packed()) << "CmEvent.term";
      EXPECT_EQ(e.status, -EPROTO);
    }
    EXPECT_EQ(qp_t_->state(), QpState::kError);
    WaitFor([&] {
      Reap(eng_.get(), cq_t_, &wcs_t_);
      return wcs_t_.size() >= outstanding_.size();
    });
    Settle(20);  // duplicates would show up now
    Reap(eng_.get(), cq_t_, &wcs_t_);
    std::map<uint64_t, int> seen;
    for (const Wc& wc : wcs_t_) {
      ++seen[wc.wr_id];
      EXPECT_TRUE(outstanding_.count(wc.wr_id)) << "completion for wr " << wc.wr_id;
      EXPECT_NE(wc.status, WcStatus::kSuccess) << "wr " << wc.wr_id << " succeeded";
      EXPECT_EQ(wc.qp_num, qp_t_->num());
      if (auto v = c.victims.find(wc.wr_id); v != c.victims.end()) {
        EXPECT_EQ(to_string(wc.status), std::string(to_string(v->second))) << "wr " << wc.wr_id;
      }
      if (wc.status != WcStatus::kWrFlushErr) {
        EXPECT_EQ(wc.vendor_err, t.packed()) << "vendor_err of wr " << wc.wr_id;
      }
    }
    for (uint64_t id : outstanding_) {
      EXPECT_EQ(seen[id], 1) << "wr " << id << " completed " << seen[id] << " times";
    }
    EXPECT_EQ(count(events_, CmEventType::kDisconnected, qp_t_), 1u);

    // (c) memory, (d) the engine still works.
    CheckMemory(c.may_change);
    VerifyHealthy(42);
  }

  // Sends a single bad FPDU and checks the contract.
  void ExpectBadFpdu(Bytes hdr, const Bytes& payload, const Want& w, const Check& c = {},
                     FrameOpts fo = {}) {
    const Bytes bad = raw_->send_fpdu(std::move(hdr), payload, fo);
    ExpectTerminated(w, bad, c);
  }

  Bytes Send(uint32_t msn, const Bytes& payload, bool last = true, uint32_t mo = 0) {
    return raw_->send_fpdu(untagged_hdr(RdmapOpcode::kSend, last, iwarp::kQnSend, msn, mo),
                           payload);
  }
  Bytes ReadReqHdr() {
    return untagged_hdr(RdmapOpcode::kRdmaReadReq, true, iwarp::kQnReadReq,
                        raw_->next_msn(iwarp::kQnReadReq), 0);
  }
  Bytes AtomicHdr() {
    return untagged_hdr(RdmapOpcode::kAtomicReq, true, iwarp::kQnAtomicReq,
                        raw_->next_msn(iwarp::kQnAtomicReq), 0);
  }

  std::unique_ptr<Engine> eng_;
  Pd* pd_ = nullptr;
  Pd* pd2_ = nullptr;
  Cq* cq_t_ = nullptr;
  Cq* cq_h_ = nullptr;
  Qp* qp_t_ = nullptr;  // the QP the raw peer attacks
  Qp* qp_h_ = nullptr;  // the healthy connection's QP on the same Engine
  Listener* lis_ = nullptr;
  Guarded rw_{"rw", 4096, 0x11}, ro_{"ro", 4096, 0x22}, wo_{"wo", 4096, 0x33},
      other_{"other_pd", 4096, 0x44}, recv_{"recv", 128, 0x55}, sink_{"read_sink", 64, 0x66},
      src_{"send_src", 64, 0x77}, hrecv_{"healthy_recv", 256, 0}, hrw_{"healthy_rw", 256, 0};
  const std::vector<const Guarded*> all_{&rw_,   &ro_,  &wo_,    &other_, &recv_,
                                         &sink_, &src_, &hrecv_, &hrw_};
  // The regions' STags.
  uint32_t mr_rw_ = 0, mr_ro_ = 0, mr_wo_ = 0, mr_other_ = 0, mr_recv_ = 0, mr_sink_ = 0,
           mr_src_ = 0, mr_hrecv_ = 0, mr_hrw_ = 0;
  uint32_t dead_stag_ = 0;
  std::vector<CmEvent> events_;
  std::vector<Wc> wcs_t_;
  std::set<uint64_t> outstanding_;  // WRs of qp_t_ that must complete in error

  // The healthy client.
  std::unique_ptr<Engine> cli_;
  Pd* cpd_ = nullptr;
  Cq* ccq_ = nullptr;
  Qp* cqp_ = nullptr;
  Guarded c_src_{"client_src", 256, 0}, c_back_{"client_back", 256, 0};
  uint32_t mr_csrc_ = 0, mr_cback_ = 0;
  std::vector<CmEvent> cli_events_;

  std::unique_ptr<RawPeer> raw_;
};

inline const Bytes kSixteen = pattern(16, 3);
inline const Want kDdpInvalidStag{TermLayer::kDdp, u8(DdpEtype::kTaggedBuf),
                                  u8(DdpTaggedEcode::kInvalidStag), true, true};
inline const Want kDdpBounds{TermLayer::kDdp, u8(DdpEtype::kTaggedBuf),
                             u8(DdpTaggedEcode::kBaseBounds), true, true};

}  // namespace softrdma::testing::term
