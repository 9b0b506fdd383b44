// RMA and atomics on a connected FI_EP_MSG pair: read/write in every form and
// size, remote CQ data (FI_RX_CQ_DATA mode), 64-bit atomics.
#include <cstring>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

constexpr size_t kGuard = 4096;

// The server exposes one region of 64 MiB + guard for remote read/write.
class Rma : public Connected {
 protected:
  void SetUp() override {
    Connected::SetUp();
    if (HasFatalFailure()) return;
    region_.assign((64u << 20) + 2 * kGuard, 0x5a);
    mr_.reset(f_->reg(region_.data(), region_.size(), FI_REMOTE_READ | FI_REMOTE_WRITE));
    ASSERT_TRUE(mr_);
    key_ = fi_mr_key(mr_.get());
    base_ = reinterpret_cast<uint64_t>(region_.data()) + kGuard;  // FI_MR_VIRT_ADDR
  }
  void TearDown() override { mr_.reset(); }

  // Waits for the initiator's completion and checks its flags.
  void expect_done(fid_cq* cq, void* ctx, uint64_t flags) {
    fi_cq_data_entry e{};
    fi_cq_err_entry err{};
    ASSERT_EQ(cq_wait(cq, &e, &err), 1) << "err " << err.err << " " << fi_strerror(err.err);
    EXPECT_EQ(e.op_context, ctx);
    EXPECT_EQ(e.flags & flags, flags);
  }
  // The guard bytes around what was written are untouched.
  ::testing::AssertionResult guards_intact(size_t off, size_t len) {
    for (size_t i = 0; i < kGuard + off; ++i)
      if (region_[i] != 0x5a) return ::testing::AssertionFailure() << "before: byte " << i;
    for (size_t i = kGuard + off + len; i < region_.size(); ++i)
      if (region_[i] != 0x5a) return ::testing::AssertionFailure() << "after: byte " << i;
    return ::testing::AssertionSuccess();
  }
  uint8_t* at(size_t off) { return region_.data() + kGuard + off; }

  std::vector<uint8_t> region_;
  Fid<fid_mr> mr_;
  uint64_t key_ = 0, base_ = 0;
};

TEST_F(Rma, WriteEverySize) {
  uint64_t seed = 1;
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> src(size + 1);
    fill(src.data(), size, seed);
    std::fill(region_.begin(), region_.end(), 0x5a);
    ASSERT_EQ(fi_write(c_->ep, src.data(), size, nullptr, 0, base_, key_, &src), 0);
    expect_done(c_->tx, &src, FI_WRITE | FI_RMA);
    notify(*c_, *s_);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_TRUE(same(at(0), size, seed));
    EXPECT_TRUE(guards_intact(0, size));
    ++seed;
  }
}

// FI_DELIVERY_COMPLETE: when the Write completes, the data is in place at
// the target (no message needed to find out).
TEST_F(Rma, DeliveryCompleteWriteIsPlaced) {
  uint64_t seed = 30;
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> src(size + 1);
    fill(src.data(), size, seed);
    iovec iov{src.data(), size};
    fi_rma_iov rma{base_, size, key_};
    fi_msg_rma m{&iov, nullptr, 1, 0, &rma, 1, &src, 0};
    ASSERT_EQ(fi_writemsg(c_->ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION), 0);
    expect_done(c_->tx, &src, FI_WRITE | FI_RMA);
    EXPECT_TRUE(same(at(0), size, seed));
    ++seed;
  }
  // The same as the endpoint's default (FI_SETOPSFLAG), for fi_write.
  uint64_t flags = FI_TRANSMIT | FI_DELIVERY_COMPLETE;
  ASSERT_EQ(fi_control(&c_->ep->fid, FI_SETOPSFLAG, &flags), 0);
  std::vector<uint8_t> src(4096);
  fill(src.data(), src.size(), 99);
  ASSERT_EQ(fi_write(c_->ep, src.data(), src.size(), nullptr, 0, base_ + 8, key_, &src), 0);
  expect_done(c_->tx, &src, FI_WRITE);
  EXPECT_TRUE(same(at(8), src.size(), 99));
  EXPECT_TRUE(cq_quiet(c_->tx, 50));  // one completion per operation
}

TEST_F(Rma, ReadEverySize) {
  uint64_t seed = 50;
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    fill(at(0), size, seed);
    std::vector<uint8_t> dst(size + 64, 0xee);
    Fid<fid_mr> dmr(f_->reg(dst.data(), dst.size(), FI_READ));
    ASSERT_EQ(fi_read(c_->ep, dst.data(), size, fi_mr_desc(dmr.get()), 0, base_, key_, &dst), 0);
    expect_done(c_->tx, &dst, FI_READ | FI_RMA);
    EXPECT_TRUE(same(dst.data(), size, seed));
    for (size_t i = size; i < dst.size(); ++i) {
      ASSERT_EQ(dst[i], 0xee) << i;
    }
    ++seed;
  }
}

TEST_F(Rma, OffsetsAreVirtualAddresses) {
  std::vector<uint8_t> src(777);
  fill(src.data(), src.size(), 7);
  ASSERT_EQ(fi_write(c_->ep, src.data(), src.size(), nullptr, 0, base_ + 12345, key_, nullptr), 0);
  expect_done(c_->tx, nullptr, FI_WRITE);
  notify(*c_, *s_);
  EXPECT_TRUE(same(at(12345), src.size(), 7));
  EXPECT_TRUE(guards_intact(12345, src.size()));
  std::vector<uint8_t> back(500);
  ASSERT_EQ(fi_read(c_->ep, back.data(), 500, nullptr, 0, base_ + 12345 + 100, key_, nullptr), 0);
  expect_done(c_->tx, nullptr, FI_READ);
  EXPECT_EQ(std::memcmp(back.data(), src.data() + 100, 500), 0);
}

TEST_F(Rma, WritevReadv) {
  std::vector<uint8_t> all(10000);
  fill(all.data(), all.size(), 8);
  std::vector<uint8_t> a(all.begin(), all.begin() + 3000),
      b(all.begin() + 3000, all.begin() + 3001), c(all.begin() + 3001, all.end());
  iovec iov[3] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  ASSERT_EQ(fi_writev(c_->ep, iov, nullptr, 3, 0, base_, key_, iov), 0);
  expect_done(c_->tx, iov, FI_WRITE | FI_RMA);
  notify(*c_, *s_);
  EXPECT_EQ(std::memcmp(at(0), all.data(), all.size()), 0);
  EXPECT_TRUE(guards_intact(0, all.size()));
  // Scatter it back in 4 pieces.
  std::vector<uint8_t> r[4] = {std::vector<uint8_t>(1), std::vector<uint8_t>(4999),
                               std::vector<uint8_t>(0), std::vector<uint8_t>(5000)};
  iovec riov[4];
  for (int i = 0; i < 4; ++i) riov[i] = {r[i].data(), r[i].size()};
  ASSERT_EQ(fi_readv(c_->ep, riov, nullptr, 4, 0, base_, key_, riov), 0);
  expect_done(c_->tx, riov, FI_READ | FI_RMA);
  std::vector<uint8_t> joined;
  for (auto& v : r) joined.insert(joined.end(), v.begin(), v.end());
  EXPECT_EQ(joined, all);
}

TEST_F(Rma, WritemsgReadmsg) {
  std::vector<uint8_t> src(65536), dst(65536);
  fill(src.data(), src.size(), 9);
  iovec iov{src.data(), src.size()};
  fi_rma_iov rma{base_ + 8, src.size(), key_};
  int ctx = 0;
  fi_msg_rma m{&iov, nullptr, 1, 0, &rma, 1, &ctx, 0};
  ASSERT_EQ(fi_writemsg(c_->ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE), 0);
  expect_done(c_->tx, &ctx, FI_WRITE | FI_RMA);
  iovec riov{dst.data(), dst.size()};
  fi_msg_rma rm{&riov, nullptr, 1, 0, &rma, 1, &ctx, 0};
  ASSERT_EQ(fi_readmsg(c_->ep, &rm, FI_COMPLETION), 0);
  expect_done(c_->tx, &ctx, FI_READ | FI_RMA);
  EXPECT_EQ(src, dst);
  EXPECT_TRUE(guards_intact(8, src.size()));
}

TEST_F(Rma, InjectWrite) {
  const size_t max = f_->info()->tx_attr->inject_size;
  std::vector<uint8_t> src(max + 1);
  uint64_t seed = 60;
  for (size_t size : {size_t{0}, size_t{1}, max}) {
    SCOPED_TRACE(size);
    fill(src.data(), size, seed);
    ASSERT_EQ(fi_inject_write(c_->ep, src.data(), size, 0, base_ + 64, key_), 0);
    std::memset(src.data(), 0, src.size());  // free at once
    notify(*c_, *s_);
    EXPECT_TRUE(same(at(64), size, seed));
    ++seed;
  }
  EXPECT_TRUE(cq_quiet(c_->tx, 100));
  EXPECT_NE(fi_inject_write(c_->ep, src.data(), max + 1, 0, base_, key_), 0);
}

// Remote CQ data: the target's completion consumes a posted receive and
// carries the 64-bit value (FI_RX_CQ_DATA mode, cq_data_size 8).
TEST_F(Rma, WritedataDeliversRemoteCqData) {
  ASSERT_TRUE(f_->info()->mode & FI_RX_CQ_DATA);
  ASSERT_EQ(f_->info()->domain_attr->cq_data_size, 8u);
  int rctx[3];
  for (int& r : rctx) {
    ASSERT_EQ(fi_recv(s_->ep, nullptr, 0, nullptr, 0, &r), 0);
  }
  const uint64_t data[3] = {0x0123456789abcdefULL, 0, ~0ULL};
  std::vector<uint8_t> src(100000);
  fill(src.data(), src.size(), 10);
  ASSERT_EQ(fi_writedata(c_->ep, src.data(), src.size(), nullptr, data[0], 0, base_, key_, &src),
            0);
  expect_done(c_->tx, &src, FI_WRITE | FI_RMA);
  ASSERT_EQ(fi_inject_writedata(c_->ep, src.data(), 16, data[1], 0, base_ + 200000, key_), 0);
  iovec iov{src.data(), 300};
  fi_rma_iov rma{base_ + 300000, 300, key_};
  fi_msg_rma m{&iov, nullptr, 1, 0, &rma, 1, &src, data[2]};
  ASSERT_EQ(fi_writemsg(c_->ep, &m, FI_REMOTE_CQ_DATA), 0);
  expect_done(c_->tx, &src, FI_WRITE);
  for (int i = 0; i < 3; ++i) {
    fi_cq_data_entry e{};
    fi_cq_err_entry err{};
    ASSERT_EQ(cq_wait(s_->rx, &e, &err), 1) << err.err;
    EXPECT_EQ(e.flags & (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA), FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)
        << std::hex << e.flags;
    EXPECT_EQ(e.flags & FI_RECV, 0u);
    EXPECT_EQ(e.data, data[i]);
  }
  // The data is in place once the CQ data is seen.
  EXPECT_TRUE(same(at(0), src.size(), 10));
  EXPECT_EQ(std::memcmp(at(200000), src.data(), 16), 0);
  EXPECT_EQ(std::memcmp(at(300000), src.data(), 300), 0);
}

TEST_F(Rma, ReadAfterWriteSeesTheWrite) {
  // FI_ORDER_RAW: a Read posted after a Write returns the written data.
  std::vector<uint8_t> src(1 << 20), dst(1 << 20);
  fill(src.data(), src.size(), 11);
  ASSERT_EQ(fi_write(c_->ep, src.data(), src.size(), nullptr, 0, base_, key_, nullptr), 0);
  ASSERT_EQ(fi_read(c_->ep, dst.data(), dst.size(), nullptr, 0, base_, key_, nullptr), 0);
  expect_done(c_->tx, nullptr, FI_WRITE);
  expect_done(c_->tx, nullptr, FI_READ);
  EXPECT_EQ(src, dst);
}

// --- atomics ---

class Atomic : public Rma {
 protected:
  uint64_t& target() { return *reinterpret_cast<uint64_t*>(at(0)); }
  uint64_t fetch_add(uint64_t v) {
    uint64_t old = 0;
    EXPECT_EQ(fi_fetch_atomic(c_->ep, &v, 1, nullptr, &old, nullptr, 0, base_, key_, FI_UINT64,
                              FI_SUM, &old),
              0);
    expect_done(c_->tx, &old, FI_ATOMIC | FI_READ);
    return old;
  }
};

TEST_F(Atomic, Queries) {
  fi_atomic_attr attr{};
  ASSERT_EQ(fi_query_atomic(f_->domain(), FI_UINT64, FI_SUM, &attr, 0), 0);
  EXPECT_EQ(attr.size, 8u);
  EXPECT_GE(attr.count, 1u);
  EXPECT_EQ(fi_query_atomic(f_->domain(), FI_UINT64, FI_CSWAP, &attr, FI_COMPARE_ATOMIC), 0);
  EXPECT_EQ(fi_query_atomic(f_->domain(), FI_UINT64, FI_SUM, &attr, FI_FETCH_ATOMIC), 0);
  EXPECT_EQ(fi_query_atomic(f_->domain(), FI_FLOAT, FI_SUM, &attr, 0), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_query_atomic(f_->domain(), FI_UINT64, FI_MIN, &attr, 0), -FI_EOPNOTSUPP);
  // Every form of FI_SUM and FI_ATOMIC_WRITE, and FI_CSWAP, on 32 and 64 bits.
  for (fi_datatype dt : {FI_UINT32, FI_INT32, FI_UINT64, FI_INT64}) {
    const size_t size = dt == FI_UINT32 || dt == FI_INT32 ? 4 : 8;
    for (fi_op op : {FI_SUM, FI_ATOMIC_WRITE}) {
      for (uint64_t flags : {uint64_t{0}, uint64_t{FI_FETCH_ATOMIC}}) {
        attr = {};
        EXPECT_EQ(fi_query_atomic(f_->domain(), dt, op, &attr, flags), 0) << dt << " " << op;
        EXPECT_EQ(attr.size, size);
      }
      EXPECT_EQ(fi_query_atomic(f_->domain(), dt, op, &attr, FI_COMPARE_ATOMIC), -FI_EOPNOTSUPP);
    }
    EXPECT_EQ(fi_query_atomic(f_->domain(), dt, FI_CSWAP, &attr, FI_COMPARE_ATOMIC), 0);
    EXPECT_EQ(attr.size, size);
    EXPECT_EQ(fi_query_atomic(f_->domain(), dt, FI_CSWAP, &attr, 0), -FI_EOPNOTSUPP);
    EXPECT_EQ(fi_query_atomic(f_->domain(), dt, FI_ATOMIC_READ, &attr, FI_FETCH_ATOMIC),
              -FI_EOPNOTSUPP);
  }
  for (fi_datatype dt : {FI_UINT8, FI_INT16, FI_UINT128, FI_DOUBLE})
    EXPECT_EQ(fi_query_atomic(f_->domain(), dt, FI_SUM, &attr, 0), -FI_EOPNOTSUPP);
  size_t count = 0;
  EXPECT_EQ(fi_atomicvalid(c_->ep, FI_UINT64, FI_SUM, &count), 0);
  EXPECT_GE(count, 1u);
  EXPECT_EQ(fi_fetch_atomicvalid(c_->ep, FI_UINT64, FI_SUM, &count), 0);
  EXPECT_EQ(fi_compare_atomicvalid(c_->ep, FI_UINT64, FI_CSWAP, &count), 0);
  EXPECT_NE(fi_compare_atomicvalid(c_->ep, FI_UINT64, FI_SUM, &count), 0);
  EXPECT_EQ(fi_atomicvalid(c_->ep, FI_UINT32, FI_SUM, &count), 0);
  EXPECT_EQ(fi_fetch_atomicvalid(c_->ep, FI_INT32, FI_ATOMIC_WRITE, &count), 0);
  EXPECT_EQ(fi_compare_atomicvalid(c_->ep, FI_UINT32, FI_CSWAP, &count), 0);
  EXPECT_NE(fi_atomicvalid(c_->ep, FI_UINT16, FI_SUM, &count), 0);
  EXPECT_NE(fi_atomicvalid(c_->ep, FI_UINT64, FI_BXOR, &count), 0);
}

TEST_F(Atomic, SumFetchAddCompareSwap) {
  target() = 100;
  uint64_t five = 5;
  ASSERT_EQ(fi_atomic(c_->ep, &five, 1, nullptr, 0, base_, key_, FI_UINT64, FI_SUM, &five), 0);
  expect_done(c_->tx, &five, FI_ATOMIC | FI_WRITE);
  EXPECT_EQ(target(), 105u);  // RFC 7306: the response follows the execution

  EXPECT_EQ(fetch_add(7), 105u);
  EXPECT_EQ(target(), 112u);

  uint64_t cmp = 112, swap = 999, old = 0;
  ASSERT_EQ(fi_compare_atomic(c_->ep, &swap, 1, nullptr, &cmp, nullptr, &old, nullptr, 0, base_,
                              key_, FI_UINT64, FI_CSWAP, &old),
            0);
  expect_done(c_->tx, &old, FI_ATOMIC | FI_READ);
  EXPECT_EQ(old, 112u);
  EXPECT_EQ(target(), 999u);
  // A compare that fails leaves the target alone and still returns it.
  cmp = 1;
  swap = 2;
  ASSERT_EQ(fi_compare_atomic(c_->ep, &swap, 1, nullptr, &cmp, nullptr, &old, nullptr, 0, base_,
                              key_, FI_UINT64, FI_CSWAP, &old),
            0);
  expect_done(c_->tx, &old, FI_ATOMIC);
  EXPECT_EQ(old, 999u);
  EXPECT_EQ(target(), 999u);
}

TEST_F(Atomic, WrapsAndNegatives) {
  target() = 3;
  EXPECT_EQ(fetch_add(~0ULL), 3u);  // + (2^64 - 1) wraps to 2
  EXPECT_EQ(target(), 2u);
  int64_t minus = -10, old = 0;
  ASSERT_EQ(fi_fetch_atomic(c_->ep, &minus, 1, nullptr, &old, nullptr, 0, base_, key_, FI_INT64,
                            FI_SUM, nullptr),
            0);
  expect_done(c_->tx, nullptr, FI_ATOMIC);
  EXPECT_EQ(old, 2);
  EXPECT_EQ(static_cast<int64_t>(target()), -8);
}

TEST_F(Atomic, Swap) {
  target() = 5;
  uint64_t v = 0xFEEDFACECAFEBEEFull, old = 0;
  ASSERT_EQ(fi_atomic(c_->ep, &v, 1, nullptr, 0, base_, key_, FI_UINT64, FI_ATOMIC_WRITE, &v), 0);
  expect_done(c_->tx, &v, FI_ATOMIC | FI_WRITE);
  EXPECT_EQ(target(), 0xFEEDFACECAFEBEEFull);
  v = 7;
  ASSERT_EQ(fi_fetch_atomic(c_->ep, &v, 1, nullptr, &old, nullptr, 0, base_, key_, FI_UINT64,
                            FI_ATOMIC_WRITE, &old),
            0);
  expect_done(c_->tx, &old, FI_ATOMIC | FI_READ);
  EXPECT_EQ(old, 0xFEEDFACECAFEBEEFull);
  EXPECT_EQ(target(), 7u);
  EXPECT_TRUE(guards_intact(0, 8));
}

// A 32-bit element is half of an aligned 64-bit word: each operation
// changes its own half only, and hands back its own old value in 4 bytes.
TEST_F(Atomic, ThirtyTwoBitHalves) {
  ASSERT_EQ(base_ % 8, 0u);
  auto half = [&](int i) {
    uint32_t v;
    std::memcpy(&v, at(4 * static_cast<size_t>(i)), 4);
    return v;
  };
  auto set_half = [&](int i, uint32_t v) { std::memcpy(at(4 * static_cast<size_t>(i)), &v, 4); };
  set_half(0, 0xFFFFFFFF);
  set_half(1, 10);
  uint32_t res[3] = {0xAAAAAAAA, 0xAAAAAAAA, 0xAAAAAAAA};
  auto fetch = [&](int i, fi_datatype dt, fi_op op, const void* v) {
    ASSERT_EQ(fi_fetch_atomic(c_->ep, v, 1, nullptr, &res[1], nullptr, 0, base_ + 4 * i, key_, dt,
                              op, res),
              0);
    expect_done(c_->tx, res, FI_ATOMIC | FI_READ);
    EXPECT_EQ(res[0], 0xAAAAAAAAu);  // 4 bytes fetched, not 8
    EXPECT_EQ(res[2], 0xAAAAAAAAu);
  };
  // The low half wraps to 0 and carries nothing into the high half.
  uint32_t one = 1;
  fetch(0, FI_UINT32, FI_SUM, &one);
  EXPECT_EQ(res[1], 0xFFFFFFFFu);
  EXPECT_EQ(half(0), 0u);
  EXPECT_EQ(half(1), 10u);
  // Signed, in the high half.
  int32_t minus = -15;
  fetch(1, FI_INT32, FI_SUM, &minus);
  EXPECT_EQ(res[1], 10u);
  EXPECT_EQ(static_cast<int32_t>(half(1)), -5);
  EXPECT_EQ(half(0), 0u);
  // Swap of one half.
  uint32_t s = 0x12345678;
  fetch(0, FI_UINT32, FI_ATOMIC_WRITE, &s);
  EXPECT_EQ(res[1], 0u);
  EXPECT_EQ(half(0), 0x12345678u);
  EXPECT_EQ(static_cast<int32_t>(half(1)), -5);
  // Compare-swap compares its own half only: a hit, then a miss.
  uint32_t cmp = static_cast<uint32_t>(-5), swap = 99;
  ASSERT_EQ(fi_compare_atomic(c_->ep, &swap, 1, nullptr, &cmp, nullptr, &res[1], nullptr, 0,
                              base_ + 4, key_, FI_UINT32, FI_CSWAP, res),
            0);
  expect_done(c_->tx, res, FI_ATOMIC | FI_READ);
  EXPECT_EQ(res[1], static_cast<uint32_t>(-5));
  EXPECT_EQ(half(1), 99u);
  swap = 100;
  ASSERT_EQ(fi_compare_atomic(c_->ep, &swap, 1, nullptr, &cmp, nullptr, &res[1], nullptr, 0,
                              base_ + 4, key_, FI_UINT32, FI_CSWAP, res),
            0);
  expect_done(c_->tx, res, FI_ATOMIC | FI_READ);
  EXPECT_EQ(res[1], 99u);
  EXPECT_EQ(half(1), 99u);
  EXPECT_EQ(half(0), 0x12345678u);
  // Without fetch.
  uint32_t two = 2;
  ASSERT_EQ(fi_atomic(c_->ep, &two, 1, nullptr, 0, base_ + 4, key_, FI_UINT32, FI_SUM, res), 0);
  expect_done(c_->tx, res, FI_ATOMIC | FI_WRITE);
  EXPECT_EQ(half(1), 101u);
  EXPECT_EQ(half(0), 0x12345678u);
  EXPECT_TRUE(guards_intact(0, 8));
  // Not on a 4-byte boundary: refused here, the connection unharmed.
  EXPECT_EQ(fi_atomic(c_->ep, &two, 1, nullptr, 0, base_ + 2, key_, FI_UINT32, FI_SUM, res),
            -FI_EINVAL);
  fetch(1, FI_UINT32, FI_SUM, &two);
  EXPECT_EQ(res[1], 101u);
}

TEST_F(Atomic, InjectAndMessageForms) {
  target() = 0;
  uint64_t one = 1;
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(fi_inject_atomic(c_->ep, &one, 1, 0, base_, key_, FI_UINT64, FI_SUM), 0);
  // Ordered behind the injects on the same connection.
  EXPECT_EQ(fetch_add(0), 10u);
  EXPECT_TRUE(cq_quiet(c_->tx, 50));

  // fi_atomicmsg / fi_fetch_atomicmsg / fi_compare_atomicmsg, one element.
  uint64_t add = 5, res = 0, cmp = 15, swp = 40;
  fi_ioc ioc{&add, 1}, rioc{&res, 1}, cioc{&cmp, 1};
  fi_rma_ioc rma{base_, 1, key_};
  int ctx = 0;
  fi_msg_atomic m{&ioc, nullptr, 1, 0, &rma, 1, FI_UINT64, FI_SUM, &ctx, 0};
  ASSERT_EQ(fi_atomicmsg(c_->ep, &m, FI_COMPLETION), 0);
  expect_done(c_->tx, &ctx, FI_ATOMIC);
  ASSERT_EQ(fi_fetch_atomicmsg(c_->ep, &m, &rioc, nullptr, 1, FI_COMPLETION), 0);
  expect_done(c_->tx, &ctx, FI_ATOMIC | FI_READ);
  EXPECT_EQ(res, 15u);
  ioc.addr = &swp;
  m.op = FI_CSWAP;
  ASSERT_EQ(fi_compare_atomicmsg(c_->ep, &m, &cioc, nullptr, 1, &rioc, nullptr, 1, FI_COMPLETION),
            0);
  expect_done(c_->tx, &ctx, FI_ATOMIC | FI_READ);
  EXPECT_EQ(res, 20u);
  EXPECT_EQ(target(), 20u);  // compare 15 != 20: unchanged
  // Only one 64-bit element per operation.
  uint64_t two[2] = {1, 1};
  EXPECT_NE(fi_atomic(c_->ep, two, 2, nullptr, 0, base_, key_, FI_UINT64, FI_SUM, nullptr), 0);
}

TEST_F(Atomic, ResultIntoRegisteredMemory) {
  target() = 77;
  std::vector<uint64_t> res(4, 0);
  Fid<fid_mr> rmr(f_->reg(res.data(), res.size() * 8, FI_READ));
  uint64_t add = 1;
  ASSERT_EQ(fi_fetch_atomic(c_->ep, &add, 1, nullptr, &res[2], fi_mr_desc(rmr.get()), 0, base_,
                            key_, FI_UINT64, FI_SUM, nullptr),
            0);
  expect_done(c_->tx, nullptr, FI_ATOMIC);
  EXPECT_EQ(res[2], 77u);
  EXPECT_EQ(res[1], 0u);
  EXPECT_EQ(res[3], 0u);
}

}  // namespace
}  // namespace fit
