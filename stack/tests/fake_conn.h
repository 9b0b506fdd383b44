// Deterministic, network-free harness for driving two iwarp::Qp objects
// directly: an in-memory StreamConn pair (FakeConn), a minimal host (MR table,
// PD, CQs, stats, a recording QpOwner) and a link that pumps both QPs.
//
// FakeConn is deliberately unfriendly to the receive path: rx_peek shows the
// pending bytes as a seeded random number of views of random sizes (single
// octets, mid-sized pieces, or everything coalesced across FPDUs), sometimes
// shows nothing at all, and copies every view into its own heap block that is
// freed on rx_consume, so ASan catches reads past a view or use after
// consume. tx_send checks the StreamConn contract (whole FPDUs, never more
// than tx_space or max_fpdu) and can refuse fitting sends (-EAGAIN) to drive
// the engine's rebuild path.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "stack/iwarp/cq.h"
#include "stack/iwarp/mem.h"
#include "stack/iwarp/mpa.h"
#include "stack/iwarp/qp.h"
#include "stack/net/transport.h"
#include "stack/verbs.h"

namespace softrdma::testing {

struct FakeConnConfig {
  size_t max_fpdu = 1448;      // what a 1500-octet MTU with TCP timestamps carries
  size_t tx_space = 1u << 20;  // unread bytes the peer may hold (its socket buffer)
  size_t max_views = 8;        // most views one rx_peek returns (the caller's max also caps)
  double stall = 0.0;          // chance rx_peek shows nothing although bytes wait
  double eagain = 0.0;         // chance tx_send refuses an FPDU that fits
};

class FakeConn : public net::StreamConn {
 public:
  FakeConn(const FakeConnConfig& cfg, uint64_t seed) : cfg_(cfg), rng_(seed) {}

  static void join(FakeConn& a, FakeConn& b) {
    a.peer_ = &b;
    b.peer_ = &a;
  }

  size_t rx_peek(net::RxView* views, size_t max) override {
    storage_.clear();  // a new peek supersedes the last one's views
    shown_ = 0;
    const size_t avail = in_.size() - head_;
    if (avail == 0 || max == 0) return 0;
    if (cfg_.stall > 0 && chance(cfg_.stall)) return 0;
    const size_t nv = 1 + rng_() % std::max<size_t>(1, std::min(max, cfg_.max_views));
    const int mode = static_cast<int>(rng_() % 3);
    size_t off = head_, n = 0;
    for (; n < nv && off < in_.size(); ++n) {
      const size_t left = in_.size() - off;
      size_t len;
      if (mode == 0) {
        len = 1 + rng_() % 8;  // octet by octet: headers, markers, CRCs split
      } else if (mode == 1) {
        len = 1 + rng_() % 2048;
      } else {
        len = n + 1 == nv ? left : 1 + rng_() % left;  // coalesced across FPDUs
      }
      len = std::min(len, left);
      storage_.emplace_back(in_.begin() + static_cast<long>(off),
                            in_.begin() + static_cast<long>(off + len));
      views[n] = {storage_.back().data(), len};
      off += len;
      shown_ += len;
    }
    return n;
  }

  void rx_consume(size_t n) override {
    EXPECT_LE(n, shown_) << "rx_consume beyond what rx_peek showed";
    n = std::min(n, shown_);
    head_ += n;
    consumed_ += n;
    shown_ = 0;
    storage_.clear();  // views die here; later use is a use-after-free
    if (head_ > (1u << 20) && head_ * 2 > in_.size()) {
      in_.erase(in_.begin(), in_.begin() + static_cast<long>(head_));
      head_ = 0;
    }
  }

  size_t tx_space() const override {
    if (closed_ || aborted_ || !peer_) return 0;
    const size_t held = peer_->pending();
    return held >= cfg_.tx_space ? 0 : cfg_.tx_space - held;
  }

  int tx_send(const iovec* iov, int cnt, size_t total) override {
    if (closed_ || aborted_) return -EPIPE;
    if (!peer_ || peer_->aborted_) return -ECONNRESET;
    size_t sum = 0;
    for (int i = 0; i < cnt; ++i) sum += iov[i].iov_len;
    EXPECT_EQ(sum, total) << "tx_send total disagrees with its gather list";
    if (total > tx_space()) return -EAGAIN;
    EXPECT_LE(total, cfg_.max_fpdu) << "FPDU larger than max_fpdu";
    if (total > cfg_.max_fpdu) ++oversize_;
    if (cfg_.eagain > 0 && chance(cfg_.eagain)) {
      ++refused_;
      return -EAGAIN;
    }
    for (int i = 0; i < cnt; ++i) {
      const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
      peer_->in_.insert(peer_->in_.end(), p, p + iov[i].iov_len);
    }
    sent_ += total;
    ++sends_;
    return 0;
  }

  void tx_flush() override { ++flushes_; }
  size_t max_segment() const override { return cfg_.max_fpdu; }
  void close() override { closed_ = true; }
  void abort() override { aborted_ = true; }
  sockaddr_in local_addr() const override { return addr(1); }
  sockaddr_in peer_addr() const override { return addr(2); }

  // --- test controls and observations ---
  FakeConnConfig& config() { return cfg_; }
  size_t pending() const { return in_.size() - head_; }
  // The unread inbound bytes, for a test that corrupts one in flight.
  uint8_t* pending_data() { return in_.data() + head_; }
  // Bytes as if the peer had sent them.
  void inject(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    in_.insert(in_.end(), b, b + n);
  }
  bool closed() const { return closed_; }
  bool aborted() const { return aborted_; }
  uint64_t bytes_sent() const { return sent_; }
  uint64_t bytes_consumed() const { return consumed_; }
  uint64_t sends() const { return sends_; }
  uint64_t refused() const { return refused_; }
  uint64_t oversize() const { return oversize_; }

 private:
  static sockaddr_in addr(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    return a;
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  FakeConnConfig cfg_;
  std::mt19937_64 rng_;
  FakeConn* peer_ = nullptr;
  std::vector<uint8_t> in_;  // bytes the peer sent, from head_ on unread
  size_t head_ = 0;
  size_t shown_ = 0;
  std::vector<std::vector<uint8_t>> storage_;  // the live views' private copies
  bool closed_ = false, aborted_ = false;
  uint64_t sent_ = 0, consumed_ = 0, sends_ = 0, refused_ = 0, flushes_ = 0, oversize_ = 0;
};

// Counts the QP's upcalls.
struct RecordingOwner : iwarp::QpOwner {
  int errors = 0;
  int ready = 0;
  void on_qp_error(iwarp::Qp*) override { ++errors; }
  void on_qp_ready(iwarp::Qp*) override { ++ready; }
};

// One side of a connection: what an Engine would own for one QP.
struct FakeHost {
  explicit FakeHost(uint32_t num, uint32_t depth = 256, uint32_t pd_id = 1) : pd{pd_id} {
    qp = std::make_unique<iwarp::Qp>(
        num, iwarp::QpInit{.pd = &pd, .send_cq = &send_cq, .recv_cq = &recv_cq,
                           .sq_depth = depth, .rq_depth = depth},
        &mrs, &stats, &owner);
  }
  // Registers and returns the STag (Mr pointers are not kept across regs).
  uint32_t reg(const void* p, size_t len, uint32_t access) {
    iwarp::Mr* mr = mrs.reg(&pd, p, len, access);
    EXPECT_NE(mr, nullptr);
    return mr ? mr->stag : 0;
  }
  static std::vector<Wc> drain(iwarp::Cq& cq) {
    std::vector<Wc> out;
    Wc buf[64];
    for (int n; (n = cq.poll(buf, 64)) > 0;) out.insert(out.end(), buf, buf + n);
    return out;
  }
  std::vector<Wc> poll_send() { return drain(send_cq); }
  std::vector<Wc> poll_recv() { return drain(recv_cq); }

  iwarp::MrTable mrs;
  iwarp::Pd pd;
  iwarp::Cq send_cq{4096};
  iwarp::Cq recv_cq{4096};
  iwarp::Stats stats;
  RecordingOwner owner;
  std::unique_ptr<iwarp::Qp> qp;
};

// The settings both ends would have after MPA, consistent by construction:
// what a sends with markers, b receives with markers, and each side's ORD
// never exceeds the other's IRD. a is the initiator.
inline std::pair<iwarp::MpaResult, iwarp::MpaResult> mpa_pair(bool crc, bool markers_ab,
                                                              bool markers_ba,
                                                              iwarp::Rtr rtr = iwarp::Rtr::kNone,
                                                              uint16_t ord_ab = 16,
                                                              uint16_t ord_ba = 16) {
  iwarp::MpaResult a{.rev = iwarp::kMpaRev2, .crc = crc, .tx_markers = markers_ab,
                     .rx_markers = markers_ba, .rtr = rtr, .ord = ord_ab, .ird = ord_ba};
  iwarp::MpaResult b{.rev = iwarp::kMpaRev2, .crc = crc, .tx_markers = markers_ba,
                     .rx_markers = markers_ab, .rtr = rtr, .ord = ord_ba, .ird = ord_ab};
  return {a, b};
}

// Two QPs joined by a FakeConn pair. Delivers stream closes the way the
// Engine does (remaining bytes first, then on_stream_closed, then detach).
class FakeLink {
 public:
  FakeLink(iwarp::Qp* qa, iwarp::Qp* qb, const FakeConnConfig& cfg_a, const FakeConnConfig& cfg_b,
           uint64_t seed)
      : a(cfg_a, seed * 2 + 1), b(cfg_b, seed * 2 + 2), qa_(qa), qb_(qb), order_(seed) {
    FakeConn::join(a, b);
  }
  FakeLink(iwarp::Qp* qa, iwarp::Qp* qb, const FakeConnConfig& cfg, uint64_t seed)
      : FakeLink(qa, qb, cfg, cfg, seed) {}

  // qa is the MPA initiator (sends the RTR, if any).
  void start(const iwarp::MpaResult& ma, const iwarp::MpaResult& mb) {
    qa_->start(&a, ma, true);
    qb_->start(&b, mb, false);
  }

  // One round: both QPs, in random order, read what is buffered and send
  // what they can. True if any byte moved or a close was delivered.
  bool step() {
    const uint64_t before = moved();
    const bool a_first = order_() & 1;
    run(a_first ? qa_ : qb_);
    run(a_first ? qb_ : qa_);
    bool closed = deliver_close(a, b, qb_, b_notified_);
    closed |= deliver_close(b, a, qa_, a_notified_);
    return closed || moved() != before;
  }

  // Steps until nothing is buffered, nothing waits to be sent and every
  // close has been delivered; false if that does not happen (a hang).
  bool pump(int max_still_rounds = 2000) {
    for (int still = 0; !idle();) {
      if (step()) {
        still = 0;
      } else if (++still > max_still_rounds) {
        return false;
      }
    }
    return true;
  }

  bool idle() const {
    return a.pending() == 0 && b.pending() == 0 && !sending(qa_) && !sending(qb_) &&
           !(close_due(a) && !b_notified_) && !(close_due(b) && !a_notified_);
  }

  FakeConn a, b;  // a is qa's end, b is qb's

 private:
  static void run(iwarp::Qp* q) {
    q->rx_progress();
    q->tx_progress();
  }
  static bool sending(const iwarp::Qp* q) {
    return q->conn() && q->state() == QpState::kRts && q->tx_pending();
  }
  static bool close_due(const FakeConn& c) { return c.closed() || c.aborted(); }
  // from was closed by its QP: the peer reads what is left, then learns.
  static bool deliver_close(FakeConn& from, FakeConn& to, iwarp::Qp* q, bool& notified) {
    if (notified || !close_due(from)) return false;
    const bool attached = q->conn() == &to;
    if (attached && !from.aborted() && to.pending() > 0) return false;  // graceful: drain first
    if (attached) {
      q->rx_progress();  // a Terminate may sit in the last bytes
      q->on_stream_closed(from.aborted() ? -ECONNRESET : 0);
      q->detach_conn();
    }
    notified = true;
    return true;
  }
  uint64_t moved() const {
    return a.bytes_sent() + b.bytes_sent() + a.bytes_consumed() + b.bytes_consumed();
  }

  iwarp::Qp* qa_;
  iwarp::Qp* qb_;
  std::mt19937_64 order_;
  bool a_notified_ = false, b_notified_ = false;
};

}  // namespace softrdma::testing
