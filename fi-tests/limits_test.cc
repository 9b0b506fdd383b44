// Resource limits through the public API (issue 6): a full transmit or
// receive queue is -FI_EAGAIN and recovers, a CQ smaller than the
// completions loses none, and connecting beyond the transport's room fails
// clearly while the established connections go on. Every byte checked.
#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>

#include "fi-tests/fi_test.h"
#include "stack/tests/fd_limit.h"

namespace fit {
namespace {

constexpr size_t kSlots = 64;  // data cycles over this many slots

// kSlots slots of `slot` bytes; slot i holds fill(seed i + 1) (a source) or
// zeros (a sink). Operations on slot i % kSlots move identical bytes, so
// however many run, a sink ends equal to its source.
struct Slots {
  std::vector<uint8_t> buf;
  size_t slot;
  Fid<fid_mr> mr;
  Slots(Fabric& f, size_t slot_len, bool source, uint64_t access)
      : buf(kSlots * slot_len, 0), slot(slot_len), mr(f.reg(buf.data(), buf.size(), access)) {
    for (size_t i = 0; source && i < kSlots; ++i) fill(at(i), slot, i + 1);
  }
  uint8_t* at(size_t i) { return buf.data() + (i % kSlots) * slot; }
  void* desc() { return fi_mr_desc(mr.get()); }
  // Slots [0, used) (or all, when more operations than slots ran) hold
  // their source's bytes.
  ::testing::AssertionResult holds(size_t used) {
    for (size_t i = 0; i < std::min(used, kSlots); ++i)
      if (auto r = same(at(i), slot, i + 1); !r) return r << " (slot " << i << ")";
    return ::testing::AssertionSuccess();
  }
};

// Reads n completions from cq; each context (i + 1 for operation i of
// [first, first + n)) must come exactly once, successfully.
::testing::AssertionResult reap_once(fid_cq* cq, size_t first, size_t n, bool then_quiet = true) {
  std::multiset<uintptr_t> seen;
  for (size_t k = 0; k < n; ++k) {
    fi_cq_data_entry e{};
    fi_cq_err_entry err{};
    ssize_t rc = cq_wait(cq, &e, &err);
    if (rc != 1)
      return ::testing::AssertionFailure() << "completion " << k << " of " << n << ": "
                                           << fi_strerror(static_cast<int>(-rc)) << " err " << err.err;
    seen.insert(reinterpret_cast<uintptr_t>(e.op_context));
  }
  for (size_t i = first; i < first + n; ++i)
    if (seen.count(i + 1) != 1)
      return ::testing::AssertionFailure() << "operation " << i << " completed " << seen.count(i + 1)
                                           << " times";
  if (then_quiet && !cq_quiet(cq, 20))
    return ::testing::AssertionFailure() << "more completions than operations";
  return ::testing::AssertionSuccess();
}

void* ctx(size_t i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1)); }

// A connected pair (Connected's c_ and s_) whose queue sizes each test
// chooses: open() instead of SetUp.
class Limits : public Connected {
 protected:
  void SetUp() override {}
  void open(size_t tx_size, size_t rx_size, size_t cq_size = 0) {
    Info h = msg_hints();
    h->tx_attr->size = tx_size;
    h->rx_attr->size = rx_size;
    f_ = std::make_unique<Fabric>(std::move(h));
    ASSERT_NE(f_->domain(), nullptr);
    ASSERT_EQ(f_->info()->tx_attr->size, tx_size);
    ASSERT_EQ(f_->info()->rx_attr->size, rx_size);
    f_->connect(&c_, &s_, {}, {}, EpOptions{.cq_size = cq_size});
  }
  // Posts op(i) for i = first, first + 1, ... until it returns -FI_EAGAIN;
  // returns how many it accepted (at most `bound`).
  size_t post_until_full(size_t first, size_t bound, const std::function<ssize_t(size_t)>& op) {
    for (size_t i = first; i < first + bound; ++i) {
      ssize_t rc = op(i);
      if (rc == -FI_EAGAIN) return i - first;
      EXPECT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc)) << " at " << i;
      if (rc != 0) return i - first;
    }
    return bound;
  }
};

// tx size 16, fi_write of 256 KiB: writes go out until the transport's
// buffers are full, then queue; once 16 are queued fi_write says
// -FI_EAGAIN. Every accepted write completes once, the target holds the
// data, and a full queue's worth is accepted again afterwards.
TEST_F(Limits, WriteBeyondTxSize) {
  constexpr size_t kTx = 16, kLen = 256 << 10, kBound = 4096;
  ASSERT_NO_FATAL_FAILURE(open(kTx, 64));
  Slots src(*f_, kLen, true, FI_WRITE), dst(*f_, kLen, false, FI_REMOTE_WRITE);
  const uint64_t key = fi_mr_key(dst.mr.get());
  auto write = [&](size_t i) {
    return fi_write(c_->ep, src.at(i), kLen, src.desc(), 0, reinterpret_cast<uint64_t>(dst.at(i)),
                    key, ctx(i));
  };
  const size_t n = post_until_full(0, kBound, write);
  std::printf("[ limits ] fi_write: tx size %zu, -FI_EAGAIN after %zu accepted\n", kTx, n);
  ASSERT_LT(n, kBound) << "the transmit queue never filled";
  ASSERT_GE(n, kTx) << "refused before the queue was full";
  ASSERT_TRUE(reap_once(c_->tx, 0, n));
  ASSERT_EQ(post_until_full(n, kTx, write), kTx) << "an empty queue takes tx size again";
  ASSERT_TRUE(reap_once(c_->tx, n, kTx));
  notify(*c_, *s_);  // every Write before it is placed
  EXPECT_TRUE(dst.holds(n + kTx));
}

// tx size 16, fi_send of 64 KiB into receives posted in advance: the same
// as for writes, with the receiver checking every message.
TEST_F(Limits, SendBeyondTxSize) {
  constexpr size_t kTx = 16, kRx = 2048, kLen = 64 << 10;
  ASSERT_NO_FATAL_FAILURE(open(kTx, kRx));
  Slots src(*f_, kLen, true, FI_SEND), dst(*f_, kLen, false, FI_RECV);
  for (size_t i = 0; i < kRx; ++i)
    ASSERT_EQ(fi_recv(s_->ep, dst.at(i), kLen, dst.desc(), 0, ctx(i)), 0) << i;
  auto send = [&](size_t i) { return fi_send(c_->ep, src.at(i), kLen, src.desc(), 0, ctx(i)); };
  const size_t n = post_until_full(0, kRx - kTx, send);
  std::printf("[ limits ] fi_send: tx size %zu, -FI_EAGAIN after %zu accepted\n", kTx, n);
  ASSERT_LT(n, kRx - kTx) << "the transmit queue never filled";
  ASSERT_GE(n, kTx) << "refused before the queue was full";
  ASSERT_TRUE(reap_once(c_->tx, 0, n));
  ASSERT_EQ(post_until_full(n, kTx, send), kTx);
  ASSERT_TRUE(reap_once(c_->tx, n, kTx));
  ASSERT_TRUE(reap_once(s_->rx, 0, n + kTx));
  EXPECT_TRUE(dst.holds(n + kTx));
}

// rx size 16: the 17th fi_recv is -FI_EAGAIN; 16 sends fill the 16
// receives with the right data, then 16 receives fit again.
TEST_F(Limits, RecvBeyondRxSize) {
  constexpr size_t kRx = 16, kLen = 4096;
  ASSERT_NO_FATAL_FAILURE(open(64, kRx));
  Slots src(*f_, kLen, true, FI_SEND), dst(*f_, kLen, false, FI_RECV);
  auto recv = [&](size_t i) { return fi_recv(s_->ep, dst.at(i), kLen, dst.desc(), 0, ctx(i)); };
  for (size_t round = 0; round < 2; ++round) {
    const size_t first = round * kRx;
    ASSERT_EQ(post_until_full(first, kRx + 1, recv), kRx) << "round " << round;
    for (size_t i = first; i < first + kRx; ++i)
      ASSERT_EQ(fi_send(c_->ep, src.at(i), kLen, src.desc(), 0, ctx(i)), 0);
    ASSERT_TRUE(reap_once(c_->tx, first, kRx));
    ASSERT_TRUE(reap_once(s_->rx, first, kRx));
  }
  EXPECT_TRUE(dst.holds(2 * kRx));
  EXPECT_TRUE(std::all_of(dst.at(2 * kRx), dst.at(kSlots - 1) + kLen, [](uint8_t b) { return b == 0; }))
      << "a refused receive's buffer was written";
}

// CQs of size 4 (fi_cq_attr.size) and 200 messages before anyone reads:
// every completion is still there, once, with its data, and the overrun is
// reported after them.
TEST_F(Limits, TinyCqLosesNothing) {
  constexpr size_t kMsgs = 200, kLen = 1000;
  ASSERT_NO_FATAL_FAILURE(open(256, 256, 4));
  Slots src(*f_, kLen, true, FI_SEND), dst(*f_, kLen, false, FI_RECV);
  for (size_t i = 0; i < kMsgs; ++i) {
    ASSERT_EQ(fi_recv(s_->ep, dst.at(i), kLen, dst.desc(), 0, ctx(i)), 0);
    ASSERT_EQ(fi_send(c_->ep, src.at(i), kLen, src.desc(), 0, ctx(i)), 0);
  }
  // Let every completion happen before the first read.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // fi_cq(3): an overrun CQ still hands out every valid completion, then
  // reports FI_EOVERRUN on every read after.
  for (fid_cq* cq : {c_->tx, s_->rx}) {
    ASSERT_TRUE(reap_once(cq, 0, kMsgs, false));
    fi_cq_data_entry e{};
    for (int again = 0; again < 2; ++again) {
      ASSERT_EQ(fi_cq_read(cq, &e, 1), -FI_EAVAIL);
      fi_cq_err_entry err{};
      ASSERT_EQ(fi_cq_readerr(cq, &err, 0), 1);
      EXPECT_EQ(err.err, FI_EOVERRUN);
    }
  }
  EXPECT_TRUE(dst.holds(kMsgs));
}

using softrdma::testing::FdLimit;

// Endpoints until the transport has no room for another connection:
// over kernel TCP with descriptors capped at 32 connections' worth (a
// socket at each end, both in this process), over the DPDK path lwIP's 16384
// PCBs (two per connection). fi_connect beyond says so at once
// (-FI_EMFILE / -FI_ENOMEM), every established connection still carries a
// checked message, and closing one makes room again. All endpoints share
// one EQ and CQ per side, so a connection costs only its sockets.
TEST(LimitsConnections, BeyondTheTransport) {
  const char* t = std::getenv("FI_SOFTRDMA_TRANSPORT");
  const bool kernel = t && std::strcmp(t, "kernel") == 0;
  constexpr size_t kKernelConns = 32, kLen = 512;
  Fabric f;
  ASSERT_NE(f.domain(), nullptr);
  f.listen();
  fid_eq* eq = nullptr;
  fid_cq *ctx_cq = nullptr, *stx_cq = nullptr, *crx = nullptr, *srx = nullptr;
  fi_eq_attr ea{};
  ASSERT_EQ(fi_eq_open(f.fabric(), &ea, &eq, nullptr), 0);
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_DATA;
  ca.size = 16384;  // a completion per connection, past the default size
  for (fid_cq** cq : {&ctx_cq, &stx_cq, &crx, &srx}) ASSERT_EQ(fi_cq_open(f.domain(), &ca, cq, nullptr), 0);
  Fid<fid_eq> eq_owner(eq);
  Fid<fid_cq> o1(ctx_cq), o2(stx_cq), o3(crx), o4(srx);
  auto open_ep = [&](fi_info* info, fid_eq* q, fid_cq* tx, fid_cq* rx) {
    fid_ep* ep = nullptr;
    EXPECT_EQ(fi_endpoint(f.domain(), info, &ep, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep, &q->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep, &tx->fid, FI_TRANSMIT), 0);
    EXPECT_EQ(fi_ep_bind(ep, &rx->fid, FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep), 0);
    return ep;
  };
  std::vector<std::pair<fid_ep*, fid_ep*>> up;
  auto close_all = [&] {
    for (auto& [c, s] : up) {
      fi_close(&c->fid);
      fi_close(&s->fid);
    }
    up.clear();
  };
  // One connection: 0, or fi_connect's error.
  auto connect_one = [&]() -> int {
    fid_ep* c = open_ep(f.info(), eq, ctx_cq, crx);
    const sockaddr_in& a = f.addr();
    if (int rc = fi_connect(c, &a, nullptr, 0); rc != 0) {
      fi_close(&c->fid);
      return rc;
    }
    Info req = wait_connreq(f.pep_eq());
    EXPECT_TRUE(req);
    if (!req) return -FI_EOTHER;
    fid_ep* s = open_ep(req.get(), f.pep_eq(), stx_cq, srx);
    EXPECT_EQ(fi_accept(s, nullptr, 0), 0);
    EXPECT_TRUE(wait_connected(eq, c));
    EXPECT_TRUE(wait_connected(f.pep_eq(), s));
    up.emplace_back(c, s);
    return 0;
  };

  int err = 0;
  {
    std::unique_ptr<FdLimit> cap;
    if (kernel) cap = std::make_unique<FdLimit>(2 * kKernelConns);
    while (up.size() <= 8192 && (err = connect_one()) == 0 && !::testing::Test::HasFailure()) {
    }
    std::printf("[ limits ] %s: %zu connections up, fi_connect beyond: %s\n",
                kernel ? "kernel" : "dpdk", up.size(), fi_strerror(-err));
    if (kernel) {
      EXPECT_EQ(up.size(), kKernelConns);
      EXPECT_EQ(err, -FI_EMFILE);
    } else {
      EXPECT_EQ(up.size(), 8192u);  // 16384 lwIP PCBs, two per in-process connection
      EXPECT_EQ(err, -FI_ENOMEM);
    }

    // Every connection still carries data, in both directions.
    std::vector<uint8_t> src(kLen), dst(up.size() * 2 * kLen, 0);
    for (size_t i = 0; i < up.size(); ++i) {
      fill(src.data(), kLen, i + 1);
      ASSERT_EQ(fi_recv(up[i].second, dst.data() + 2 * i * kLen, kLen, nullptr, 0, ctx(i)), 0);
      ASSERT_EQ(fi_recv(up[i].first, dst.data() + (2 * i + 1) * kLen, kLen, nullptr, 0, ctx(i)), 0);
      ASSERT_EQ(fi_inject(up[i].first, src.data(), kLen, 0), 0) << i;
      ASSERT_EQ(fi_inject(up[i].second, src.data(), kLen, 0), 0) << i;
    }
    ASSERT_TRUE(reap_once(srx, 0, up.size()));
    ASSERT_TRUE(reap_once(crx, 0, up.size()));
    for (size_t i = 0; i < 2 * up.size(); ++i)
      ASSERT_TRUE(same(dst.data() + i * kLen, kLen, i / 2 + 1)) << "message " << i;

    // Room again once one closes (under the same cap).
    fi_close(&up.back().first->fid);
    fi_close(&up.back().second->fid);
    up.pop_back();
    EXPECT_EQ(connect_one(), 0) << "no room after a close";
  }
  close_all();
}

}  // namespace
}  // namespace fit
