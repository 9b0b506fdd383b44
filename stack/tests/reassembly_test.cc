// Long randomized traffic between two QPs over FakeConn: thousands of Sends
// (0..200 KiB, scattered over several SGEs into posted receives), Writes,
// Writes with Immediate, Immediate Data, multi-SGE Reads, Fetch-Adds and
// Compare-Swaps, in both directions at once, with the stream cut at random
// points (single octets, arbitrary pieces, views coalescing many FPDUs),
// random back-pressure and refused sends, for every CRC / marker setting and
// several segment sizes.
//
// Everything is checked against a model: every octet of every local buffer
// (sources, receive areas with their unused tails, read sinks, atomic
// results and the gaps between them), the remote Write targets, the atomic
// words, every completion's fields and order, and the datapath counters,
// including the one-copy claim (rx_copy_bytes == payload_rx == ULP payload
// delivered).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "stack/tests/fake_conn.h"

namespace softrdma::iwarp {

// Internal state that must be back at rest once a link is idle.
struct QpTestPeer {
  static std::string unrest(const Qp& q) {
    std::string s;
    if (!q.sq_.empty()) s += " sq";
    if (!q.orq_.empty() || q.orq_wrs_ != 0) s += " orq";
    if (!q.irq_.empty()) s += " irq";
    if (!q.rq_.empty()) s += " rq";
    if (q.tx_.active) s += " tx_active";
    if (q.rx_msg_active_) s += " rx_msg_active";
    if (q.rx_stage_ != Qp::RxStage::kHdr || q.rx_hdr_have_ != 0) s += " rx_mid_fpdu";
    return s;
  }
};

}  // namespace softrdma::iwarp

namespace softrdma::testing {
namespace {

using iwarp::MpaResult;
using iwarp::QpTestPeer;
using iwarp::Rtr;

constexpr size_t kSlab = 6u << 20;      // per side: sources, receive areas, sinks, results
constexpr size_t kOpReserve = 640u << 10;  // the most one operation carves from a slab
constexpr size_t kRegion = 1u << 20;    // per side: the peer's Write target / Read source
constexpr size_t kAtomics = 64;         // per side: the peer's atomic words
constexpr uint8_t kSentinel = 0xa5;

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t next() { return g_(); }
  uint64_t below(uint64_t n) { return n ? g_() % n : 0; }
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g_) < p; }
  // Message sizes: mostly small, a fair share mid-sized, some up to 200 KiB.
  size_t msg_size() {
    double p = std::uniform_real_distribution<double>(0, 1)(g_);
    if (p < 0.05) return 0;
    if (p < 0.60) return range(1, 2048);
    if (p < 0.90) return range(1, 32u << 10);
    return range(1, 200u << 10);
  }
  // total split into n pieces at random cuts (pieces may be empty).
  std::vector<size_t> split(size_t total, int n) {
    std::vector<size_t> cuts{0, total};
    // Now and then a repeated cut: an empty piece between non-empty ones.
    for (int i = 1; i < n; ++i) cuts.push_back(chance(0.1) ? cuts.back() : range(0, total));
    std::sort(cuts.begin(), cuts.end());
    std::vector<size_t> out;
    for (int i = 0; i < n; ++i) out.push_back(cuts[i + 1] - cuts[i]);
    return out;
  }
  std::vector<uint8_t> bytes(size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; i += 8) {
      uint64_t x = g_();
      std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
    }
    return v;
  }

 private:
  std::mt19937_64 g_;
};

// memcpy that accepts the null data() of an empty vector.
void copy_bytes(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}

struct Piece {
  size_t off;  // within the slab
  size_t len;
};

// A send-queue work request and what its completion must say.
struct SentWr {
  Wc wc;
  bool signaled;
  bool needs_response;
};

struct Side {
  explicit Side(uint32_t num) : host(num, 256, 7) {
    slab.assign(kSlab, kSentinel);
    slab_model = slab;
    slab_stag = host.reg(slab.data(), slab.size(), kAccessLocalWrite);
    target.assign(kRegion, 0);
    target_model = target;
    target_stag = host.reg(target.data(), target.size(), kAccessRemoteWrite);
    source = Rng(num * 77).bytes(kRegion);
    source_stag = host.reg(source.data(), source.size(), kAccessRemoteRead);
    atoms.assign(kAtomics, 0);
    for (size_t i = 0; i < kAtomics; ++i) atoms[i] = i * 0x0101010101010101ull;
    atoms_model = atoms;
    atoms_stag = host.reg(atoms.data(), atoms.size() * 8, kAccessRemoteAtomic);
  }
  iwarp::Qp& qp() { return *host.qp; }
  uint64_t addr(size_t off) const { return reinterpret_cast<uint64_t>(slab.data()) + off; }
  size_t room() const { return slab.size() - used; }
  // Carves len octets (with a random sentinel gap before them, so a stray
  // octet lands somewhere the model says must stay untouched).
  Piece carve(Rng& rng, size_t len, size_t align = 1) {
    size_t off = used + rng.below(17);
    off = (off + align - 1) / align * align;
    EXPECT_LE(off + len, slab.size());
    used = off + len;
    return {off, len};
  }
  void model_write(const Piece& p, const uint8_t* data) {
    copy_bytes(slab_model.data() + p.off, data, p.len);
  }
  // Resets the slab for the next batch.
  void reset() {
    std::memset(slab.data(), kSentinel, used);
    std::memset(slab_model.data(), kSentinel, used);
    used = 0;
  }

  FakeHost host;
  std::vector<uint8_t> slab, slab_model;
  size_t used = 0;
  uint32_t slab_stag;
  std::vector<uint8_t> target, target_model;
  uint32_t target_stag;
  std::vector<uint8_t> source;
  uint32_t source_stag;
  std::vector<uint64_t> atoms, atoms_model;
  uint32_t atoms_stag;

  uint64_t next_wr_id = 1;
  std::vector<SentWr> sent;         // this batch's SQ work requests, in post order
  std::vector<Wc> recv_expect;      // this batch's receive completions, in order
  std::vector<uint32_t> inv_stags;  // STags the peer invalidates this batch
  uint64_t payload_in = 0;          // ULP payload octets placed here (cumulative)
  uint64_t payload_out = 0;         // ULP payload octets sent from here (cumulative)
};

struct Params {
  bool crc;
  bool markers_ab;
  bool markers_ba;
  size_t max_fpdu;
};

std::string describe(const Params& p) {
  return std::string(p.crc ? "Crc" : "NoCrc") + (p.markers_ab ? "_MarkAB" : "") +
         (p.markers_ba ? "_MarkBA" : "") + "_Fpdu" + std::to_string(p.max_fpdu);
}
std::string param_name(const ::testing::TestParamInfo<Params>& info) { return describe(info.param); }
// gtest prints parameters; without this it dumps raw bytes, padding included.
void PrintTo(const Params& p, std::ostream* os) { *os << describe(p); }

class Traffic {
 public:
  Traffic(const Params& p, uint64_t seed) : p_(p), rng_(seed), a_(1), b_(2) {
    FakeConnConfig cfg;
    cfg.max_fpdu = p.max_fpdu;
    const size_t spaces[] = {p.max_fpdu, 3 * p.max_fpdu + 100, size_t{1} << 20};
    cfg.tx_space = std::max(p.max_fpdu, spaces[rng_.below(3)]);
    cfg.max_views = rng_.range(1, 8);
    cfg.stall = rng_.chance(0.5) ? 0.0 : 0.2;
    cfg.eagain = rng_.chance(0.5) ? 0.0 : 0.05;
    cfg_ = cfg;
    rtr_ = static_cast<Rtr>(rng_.below(4));  // kNone, kWrite, kRead, kSend
    const auto ord_ab = static_cast<uint16_t>(rng_.range(1, 16));
    const auto ord_ba = static_cast<uint16_t>(rng_.range(1, 16));
    link_ = std::make_unique<FakeLink>(a_.host.qp.get(), b_.host.qp.get(), cfg, seed);
    auto [ma, mb] = mpa_pair(p.crc, p.markers_ab, p.markers_ba, rtr_, ord_ab, ord_ba);
    link_->start(ma, mb);
  }

  std::string describe() const {
    return "tx_space " + std::to_string(cfg_.tx_space) + " views " +
           std::to_string(cfg_.max_views) + " stall " + std::to_string(cfg_.stall) +
           " eagain " + std::to_string(cfg_.eagain) + " rtr " +
           std::to_string(static_cast<int>(rtr_));
  }

  // Runs `batches` batches of up to `ops` operations; stops at the first
  // failing batch.
  void run(int batches, int ops) {
    for (int i = 0; i < batches && !::testing::Test::HasFailure(); ++i) {
      SCOPED_TRACE("batch " + std::to_string(i));
      batch(ops);
    }
    if (!::testing::Test::HasFailure()) final_checks();
  }

 private:
  void batch(int ops) {
    for (int i = 0; i < ops && a_.room() > kOpReserve && b_.room() > kOpReserve; ++i) {
      const bool a_sends = rng_.chance(0.5);
      one_op(a_sends ? a_ : b_, a_sends ? b_ : a_);
      if (::testing::Test::HasFatalFailure()) return;
      // Leave traffic in flight: partial progress between posts.
      for (uint64_t s = rng_.below(3); s > 0; --s) link_->step();
    }
    ASSERT_TRUE(link_->pump()) << "link did not go idle";
    verify(a_, b_, "A");
    verify(b_, a_, "B");
    a_.reset();
    b_.reset();
  }

  // Posts with retries: a full queue drains as the link makes progress.
  void post_send(Side& s, const SendWr& wr) {
    int rc;
    for (int tries = 0; (rc = s.qp().post_send(wr)) == -EAGAIN && tries < 100000; ++tries)
      link_->step();
    ASSERT_EQ(rc, 0);
  }
  void post_recv(Side& s, const RecvWr& wr) {
    int rc;
    for (int tries = 0; (rc = s.qp().post_recv(wr)) == -EAGAIN && tries < 100000; ++tries)
      link_->step();
    ASSERT_EQ(rc, 0);
  }

  // A receive of at least `need` octets over up to 8 SGEs; returns its pieces.
  std::vector<Piece> post_receive(Side& r, size_t need, Wc expect) {
    const size_t cap = need + (rng_.chance(0.5) ? 0 : rng_.below(4096));
    const int n = cap == 0 && rng_.chance(0.5) ? 0 : static_cast<int>(rng_.range(1, kMaxSge));
    RecvWr wr{.wr_id = r.next_wr_id++, .num_sge = n};
    std::vector<Piece> pieces;
    std::vector<size_t> lens = rng_.split(cap, n);
    for (int i = 0; i < n; ++i) {
      pieces.push_back(r.carve(rng_, lens[i]));
      wr.sg_list[i] = Sge{r.addr(pieces.back().off), static_cast<uint32_t>(lens[i]), r.slab_stag};
    }
    expect.wr_id = wr.wr_id;
    expect.qp_num = r.qp().num();
    r.recv_expect.push_back(expect);
    post_recv(r, wr);
    return pieces;
  }

  // Source SGEs over `payload`, written into s's slab (and its model).
  void gather(Side& s, const std::vector<uint8_t>& payload, SendWr& wr, bool allow_unregistered) {
    int n = payload.empty() && rng_.chance(0.3) ? 0 : static_cast<int>(rng_.range(1, kMaxSge));
    const bool unreg = allow_unregistered && rng_.chance(0.1);
    std::vector<size_t> lens = rng_.split(payload.size(), n);
    size_t at = 0;
    for (int i = 0; i < n; ++i) {
      Piece p = s.carve(rng_, lens[i]);
      copy_bytes(s.slab.data() + p.off, payload.data() + at, p.len);
      s.model_write(p, payload.data() + at);
      wr.sg_list[i] = Sge{s.addr(p.off), static_cast<uint32_t>(p.len), unreg ? 0 : s.slab_stag};
      at += p.len;
    }
    wr.num_sge = n;
  }

  void scatter(Side& r, const std::vector<Piece>& pieces, const std::vector<uint8_t>& payload) {
    size_t at = 0;
    for (const Piece& p : pieces) {
      size_t n = std::min(p.len, payload.size() - at);
      copy_bytes(r.slab_model.data() + p.off, payload.data() + at, n);
      at += n;
    }
    ASSERT_EQ(at, payload.size());
  }

  void expect_send(Side& s, const SendWr& wr, WcOpcode op, uint32_t byte_len, bool response) {
    s.sent.push_back({Wc{.wr_id = wr.wr_id, .status = WcStatus::kSuccess, .opcode = op,
                         .byte_len = byte_len, .qp_num = s.qp().num()},
                      (wr.flags & kWrSignaled) != 0, response});
  }

  uint32_t flags() {
    uint32_t f = rng_.chance(0.8) ? uint32_t{kWrSignaled} : 0u;
    if (rng_.chance(0.05)) f |= kWrFence;
    return f;
  }

  void one_op(Side& s, Side& r) {
    const uint64_t kind = rng_.below(100);
    SendWr wr{.wr_id = s.next_wr_id++, .flags = flags()};
    if (kind < 30) {  // Send (with Solicited Event, with Invalidate)
      std::vector<uint8_t> payload = rng_.bytes(rng_.msg_size());
      const bool se = rng_.chance(0.2);
      const bool inv = rng_.chance(0.05);
      if (se) wr.flags |= kWrSolicited;
      Wc rwc{.opcode = WcOpcode::kRecv, .byte_len = static_cast<uint32_t>(payload.size())};
      if (se) rwc.flags |= kWcSolicited;
      if (inv) {
        // A region at the receiver for the Send to invalidate.
        wr.opcode = WrOpcode::kSendWithInv;
        wr.invalidate_stag = r.host.reg(r.target.data(), 64, kAccessRemoteWrite);
        r.inv_stags.push_back(wr.invalidate_stag);
        rwc.flags |= kWcWithInv;
        rwc.invalidated_stag = wr.invalidate_stag;
      }
      std::vector<Piece> rp = post_receive(r, payload.size(), rwc);
      scatter(r, rp, payload);
      gather(s, payload, wr, true);
      expect_send(s, wr, WcOpcode::kSend, static_cast<uint32_t>(payload.size()), false);
      s.payload_out += payload.size();
      r.payload_in += payload.size();
      post_send(s, wr);
    } else if (kind < 60) {  // Write, Write with Immediate, Immediate Data alone
      const uint64_t sub = rng_.below(10);
      std::vector<uint8_t> payload = sub < 9 ? rng_.bytes(rng_.msg_size()) : std::vector<uint8_t>{};
      const size_t at = rng_.below(kRegion - payload.size() + 1);
      wr.opcode = sub < 6 ? WrOpcode::kWrite : sub < 9 ? WrOpcode::kWriteWithImm : WrOpcode::kImmData;
      wr.rkey = r.target_stag;
      wr.remote_addr = reinterpret_cast<uint64_t>(r.target.data()) + at;
      std::copy(payload.begin(), payload.end(), r.target_model.begin() + static_cast<long>(at));
      if (wr.opcode != WrOpcode::kWrite) {
        wr.imm_data = rng_.next();
        const bool se = rng_.chance(0.2);
        if (se) wr.flags |= kWrSolicited;
        Wc rwc{.opcode = WcOpcode::kRecvRdmaImm, .flags = kWcWithImm | (se ? kWcSolicited : 0u),
               .byte_len = 0, .imm_data = wr.imm_data};
        post_receive(r, 0, rwc);
      }
      gather(s, payload, wr, false);
      expect_send(s, wr, wr.opcode == WrOpcode::kImmData ? WcOpcode::kImmData : WcOpcode::kWrite,
                  static_cast<uint32_t>(payload.size()), false);
      s.payload_out += payload.size();
      r.payload_in += payload.size();
      post_send(s, wr);
    } else if (kind < 80) {  // Read into up to 8 sinks
      const size_t total = std::min<size_t>(rng_.msg_size(), 256u << 10);
      const int n = total == 0 && rng_.chance(0.3) ? 0 : static_cast<int>(rng_.range(1, kMaxSge));
      const size_t at = rng_.below(kRegion - total + 1);
      std::vector<size_t> lens = rng_.split(total, n);
      size_t done = 0;
      for (int i = 0; i < n; ++i) {
        Piece p = s.carve(rng_, lens[i]);
        s.model_write(p, r.source.data() + at + done);
        wr.sg_list[i] = Sge{s.addr(p.off), static_cast<uint32_t>(p.len), s.slab_stag};
        done += p.len;
      }
      wr.opcode = WrOpcode::kRead;
      wr.num_sge = n;
      wr.rkey = r.source_stag;
      wr.remote_addr = reinterpret_cast<uint64_t>(r.source.data()) + at;
      expect_send(s, wr, WcOpcode::kRead, static_cast<uint32_t>(total), true);
      r.payload_out += total;
      s.payload_in += total;
      post_send(s, wr);
    } else {  // Fetch-Add or Compare-Swap on one of the peer's words
      const size_t k = rng_.below(kAtomics);
      const bool cas = kind >= 90;
      uint64_t& word = r.atoms_model[k];
      const uint64_t orig = word;
      if (cas) {
        wr.opcode = WrOpcode::kAtomicCmpSwap;
        wr.compare_add = rng_.chance(0.5) ? word : rng_.next();
        wr.swap = rng_.next();
        if (word == wr.compare_add) word = wr.swap;
      } else {
        wr.opcode = WrOpcode::kAtomicFetchAdd;
        wr.compare_add = rng_.chance(0.3) ? rng_.below(16) : rng_.next();
        word += wr.compare_add;
      }
      Piece res = s.carve(rng_, 8, 8);
      s.model_write(res, reinterpret_cast<const uint8_t*>(&orig));
      wr.num_sge = 1;
      wr.sg_list[0] = Sge{s.addr(res.off), 8, s.slab_stag};
      wr.rkey = r.atoms_stag;
      wr.remote_addr = reinterpret_cast<uint64_t>(r.atoms.data() + k);
      expect_send(s, wr, cas ? WcOpcode::kCmpSwap : WcOpcode::kFetchAdd, 8, true);
      post_send(s, wr);
    }
  }

  static bool same(const Wc& got, const Wc& want) {
    return got.wr_id == want.wr_id && got.status == want.status && got.opcode == want.opcode &&
           got.flags == want.flags && got.byte_len == want.byte_len &&
           got.imm_data == want.imm_data && got.invalidated_stag == want.invalidated_stag &&
           got.qp_num == want.qp_num && got.vendor_err == want.vendor_err;
  }
  static std::string show(const Wc& w) {
    return "{wr_id " + std::to_string(w.wr_id) + " status " + to_string(w.status) + " opcode " +
           to_string(w.opcode) + " flags " + std::to_string(w.flags) + " len " +
           std::to_string(w.byte_len) + " imm " + std::to_string(w.imm_data) + " inv " +
           std::to_string(w.invalidated_stag) + " qp " + std::to_string(w.qp_num) + "}";
  }

  // Memory equals the model; on a mismatch, name the first differing octet.
  static void same_bytes(const uint8_t* got, const uint8_t* want, size_t n, const std::string& what) {
    if (std::memcmp(got, want, n) == 0) return;
    size_t i = 0;
    while (got[i] == want[i]) ++i;
    ADD_FAILURE() << what << ": first difference at offset " << i << " (got "
                  << int{got[i]} << ", want " << int{want[i]} << ")";
  }

  void verify(Side& s, Side& peer, const char* name) {
    SCOPED_TRACE(name);
    EXPECT_EQ(s.qp().state(), QpState::kRts);
    EXPECT_EQ(s.host.owner.errors, 0);
    EXPECT_EQ(QpTestPeer::unrest(s.qp()), "") << "not at rest when idle";

    // Send queue: every signaled WR exactly once, nothing for unsignaled
    // ones, fields exact. Order: WRs that complete on transmission in post
    // order; Reads/Atomics in post order; and no WR completes before an
    // earlier-posted one that needs no response.
    std::vector<Wc> got = s.host.poll_send();
    std::unordered_map<uint64_t, size_t> index;
    for (size_t i = 0; i < s.sent.size(); ++i) index[s.sent[i].wc.wr_id] = i;
    std::vector<size_t> plain_before(s.sent.size() + 1, 0);
    for (size_t i = 0; i < s.sent.size(); ++i)
      plain_before[i + 1] = plain_before[i] + (s.sent[i].signaled && !s.sent[i].needs_response);
    size_t expected = 0, plain_seen = 0;
    long last_plain = -1, last_resp = -1;
    std::vector<bool> seen(s.sent.size(), false);
    for (const SentWr& w : s.sent) expected += w.signaled;
    for (const Wc& wc : got) {
      auto it = index.find(wc.wr_id);
      ASSERT_NE(it, index.end()) << "completion for an unknown WR " << show(wc);
      const size_t i = it->second;
      const SentWr& w = s.sent[i];
      EXPECT_TRUE(same(wc, w.wc)) << "got " << show(wc) << " want " << show(w.wc);
      EXPECT_TRUE(w.signaled) << "unsignaled WR completed " << show(wc);
      EXPECT_FALSE(seen[i]) << "WR completed twice " << show(wc);
      seen[i] = true;
      long& last = w.needs_response ? last_resp : last_plain;
      EXPECT_GT(static_cast<long>(i), last) << "out of order " << show(wc);
      last = static_cast<long>(i);
      EXPECT_GE(plain_seen, plain_before[i]) << "completed ahead of an earlier WR " << show(wc);
      if (!w.needs_response) ++plain_seen;
    }
    EXPECT_EQ(got.size(), expected) << "signaled WRs vs send completions";

    // Receive queue: exactly the expected completions, in order.
    std::vector<Wc> rgot = s.host.poll_recv();
    EXPECT_EQ(rgot.size(), s.recv_expect.size());
    for (size_t i = 0; i < std::min(rgot.size(), s.recv_expect.size()); ++i) {
      EXPECT_TRUE(same(rgot[i], s.recv_expect[i]))
          << "receive " << i << " got " << show(rgot[i]) << " want " << show(s.recv_expect[i]);
      if (!same(rgot[i], s.recv_expect[i])) break;
    }
    for (uint32_t stag : s.inv_stags) {
      const iwarp::Mr* mr = s.host.mrs.find(stag);
      ASSERT_NE(mr, nullptr);
      EXPECT_FALSE(mr->valid) << "Send with Invalidate left the STag valid";
      EXPECT_EQ(s.host.mrs.dereg(stag), 0);
    }
    s.sent.clear();
    s.recv_expect.clear();
    s.inv_stags.clear();

    same_bytes(s.slab.data(), s.slab_model.data(), s.slab.size(), "local buffers");
    same_bytes(s.target.data(), s.target_model.data(), s.target.size(), "write target");
    EXPECT_TRUE(s.atoms == s.atoms_model) << "atomic words";

    // The one-copy claim, and the counters agreeing across the link.
    const iwarp::Stats& st = s.host.stats;
    EXPECT_EQ(st.payload_rx, s.payload_in);
    EXPECT_EQ(st.rx_copy_bytes, st.payload_rx);
    EXPECT_EQ(st.payload_tx, s.payload_out);
    EXPECT_EQ(st.crc_errors, 0u);
    EXPECT_EQ(st.terminates_rx + st.terminates_tx, 0u);
    EXPECT_EQ(st.fpdus_tx, peer.host.stats.fpdus_rx);
    EXPECT_EQ(st.markers_tx, peer.host.stats.markers_rx);
  }

  void final_checks() {
    EXPECT_EQ(a_.host.owner.ready, rtr_ == Rtr::kNone ? 0 : 1);
    EXPECT_EQ(b_.host.owner.ready, rtr_ == Rtr::kNone ? 0 : 1);
    EXPECT_EQ(a_.host.stats.markers_tx > 0, p_.markers_ab);
    EXPECT_EQ(b_.host.stats.markers_tx > 0, p_.markers_ba);
    EXPECT_EQ(link_->a.oversize() + link_->b.oversize(), 0u);
    if (cfg_.eagain > 0) {
      EXPECT_GT(link_->a.refused() + link_->b.refused(), 0u);
    }
    EXPECT_TRUE(a_.source == Rng(1 * 77).bytes(kRegion)) << "Read source modified";
    EXPECT_TRUE(b_.source == Rng(2 * 77).bytes(kRegion)) << "Read source modified";
  }

  Params p_;
  Rng rng_;
  Side a_, b_;
  FakeConnConfig cfg_;
  Rtr rtr_;
  std::unique_ptr<FakeLink> link_;
};

class ReassemblyTest : public ::testing::TestWithParam<Params> {};

TEST_P(ReassemblyTest, MixedTraffic) {
  for (uint64_t seed = 1; seed <= 4 && !HasFailure(); ++seed) {
    const uint64_t s = seed * 1000003 + GetParam().max_fpdu * 7 + GetParam().crc * 3 +
                       GetParam().markers_ab * 5 + GetParam().markers_ba * 11;
    Traffic t(GetParam(), s);
    SCOPED_TRACE("seed " + std::to_string(s) + ": " + t.describe());
    t.run(4, 150);
  }
}

std::vector<Params> all_params() {
  std::vector<Params> out;
  for (size_t fpdu : {536, 1448, 9000, 65536})
    for (int bits = 0; bits < 8; ++bits)
      out.push_back({(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, fpdu});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllSettings, ReassemblyTest, ::testing::ValuesIn(all_params()),
                         param_name);

// A transport may offer segments beyond what the 16-bit ULPDU_Length can
// describe (TSO/GSO-sized max_fpdu); FPDUs must still be well formed.
TEST(ReassemblyEdgeTest, MaxFpduBeyondUlpduLength) {
  FakeHost a(1), b(2);
  std::vector<uint8_t> src = Rng(5).bytes(100000), dst(100000, 0);
  const uint32_t ss = a.reg(src.data(), src.size(), 0);
  const uint32_t ds = b.reg(dst.data(), dst.size(), kAccessLocalWrite);
  FakeConnConfig cfg;
  cfg.max_fpdu = size_t{1} << 20;
  FakeLink link(a.qp.get(), b.qp.get(), cfg, 1);
  auto [ma, mb] = mpa_pair(true, false, false);
  link.start(ma, mb);
  RecvWr rw{.wr_id = 7, .num_sge = 1};
  rw.sg_list[0] = Sge{reinterpret_cast<uint64_t>(dst.data()), 100000, ds};
  ASSERT_EQ(b.qp->post_recv(rw), 0);
  SendWr sw{.wr_id = 1, .opcode = WrOpcode::kSend, .num_sge = 1};
  sw.sg_list[0] = Sge{reinterpret_cast<uint64_t>(src.data()), 100000, ss};
  ASSERT_EQ(a.qp->post_send(sw), 0);
  ASSERT_TRUE(link.pump());
  EXPECT_EQ(b.stats.terminates_tx, 0u);
  std::vector<Wc> wcs = b.poll_recv();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, 100000u);
  EXPECT_TRUE(dst == src);
}

}  // namespace
}  // namespace softrdma::testing
