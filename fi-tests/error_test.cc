// Remote access violations and other peer-detected errors: the initiator
// gets an error completion (fi_cq_readerr: err, prov_errno = the iWARP
// Terminate's cause, fi_cq_strerror text), both sides learn through their EQ
// that the connection is gone, and the process and its other connections
// keep working.
#include <cstring>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

constexpr size_t kLen = 1 << 16;

class Errors : public Connected {
 protected:
  void SetUp() override {
    Connected::SetUp();
    if (HasFatalFailure()) return;
    // A second, unrelated connection in the same fabric.
    f_->connect(&c2_, &s2_);
    if (HasFatalFailure()) return;
    for (auto* b : {&rw_, &ro_, &wo_}) b->assign(kLen, 0);
    rw_mr_.reset(f_->reg(rw_.data(), kLen, FI_REMOTE_READ | FI_REMOTE_WRITE));
    ro_mr_.reset(f_->reg(ro_.data(), kLen, FI_REMOTE_READ));
    wo_mr_.reset(f_->reg(wo_.data(), kLen, FI_REMOTE_WRITE));
    ASSERT_TRUE(rw_mr_ && ro_mr_ && wo_mr_);
    src_.assign(kLen, 0x11);
  }
  void TearDown() override {
    rw_mr_.reset();
    ro_mr_.reset();
    wo_mr_.reset();
  }
  static uint64_t va(std::vector<uint8_t>& v) { return reinterpret_cast<uint64_t>(v.data()); }

  // The first error completion on the client's transmit CQ among `ops`
  // posted operations (Writes complete when sent, so the error may land on
  // an operation posted after them): checked for sanity and returned.
  fi_cq_err_entry first_error(int ops) {
    fi_cq_err_entry first{};
    bool seen = false;
    for (int i = 0; i < ops; ++i) {
      fi_cq_data_entry e;
      fi_cq_err_entry err{};
      ssize_t rd = cq_wait(c_->tx, &e, &err);
      EXPECT_TRUE(rd == 1 || rd == -FI_EAVAIL) << rd;
      if (rd == -FI_EAVAIL && !seen) {
        first = err;
        seen = true;
      }
    }
    EXPECT_TRUE(seen) << "no error completion";
    return first;
  }

  // Error entries make sense: a libfabric code, the Terminate's cause in
  // prov_errno, and text for it.
  void expect_sane(const fi_cq_err_entry& err, int want) {
    EXPECT_EQ(err.err, want) << fi_strerror(err.err);
    EXPECT_NE(err.prov_errno, 0);
    char buf[256] = {};
    const char* s = fi_cq_strerror(c_->tx, err.prov_errno, err.err_data, buf, sizeof(buf));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::strlen(s), 5u);
    EXPECT_STRNE(s, "no Terminate");
    const char* s2 = fi_cq_strerror(c_->tx, err.prov_errno, err.err_data, nullptr, 0);
    ASSERT_NE(s2, nullptr);
    EXPECT_STREQ(s, s2);
  }

  // Both ends of the broken connection hear of it on their EQ; the other
  // connection still passes data both ways.
  void expect_contained() {
    for (Endpoint* e : {c_.get(), s_.get()}) {
      uint32_t event = 0;
      fi_eq_entry entry{};
      fi_eq_err_entry err{};
      ssize_t rd = eq_wait(e->eq, &event, &entry, sizeof(entry), &err);
      if (rd == -FI_EAVAIL) {
        EXPECT_NE(err.err, 0);
        EXPECT_EQ(err.fid, &e->ep->fid);
        char text[128];
        EXPECT_NE(fi_eq_strerror(e->eq, err.prov_errno, err.err_data, text, sizeof(text)), nullptr);
      } else {
        ASSERT_EQ(rd, static_cast<ssize_t>(sizeof(entry)))
            << "no EQ event for the broken connection";
        EXPECT_EQ(event, FI_SHUTDOWN);
      }
    }
    // Nothing more completes successfully on the broken connection.
    char x = 1;
    if (fi_send(c_->ep, &x, 1, nullptr, 0, nullptr) == 0) {
      fi_cq_data_entry e;
      EXPECT_EQ(cq_wait(c_->tx, &e), -FI_EAVAIL);
    }
    notify(*c2_, *s2_);
    notify(*s2_, *c2_);
    std::vector<uint8_t> big(1 << 20), in(1 << 20);
    fill(big.data(), big.size(), 3);
    ASSERT_EQ(fi_recv(s2_->ep, in.data(), in.size(), nullptr, 0, nullptr), 0);
    ASSERT_EQ(fi_send(c2_->ep, big.data(), big.size(), nullptr, 0, nullptr), 0);
    fi_cq_data_entry e;
    ASSERT_EQ(cq_wait(s2_->rx, &e), 1);
    EXPECT_TRUE(same(in.data(), in.size(), 3));
    ASSERT_EQ(cq_wait(c2_->tx, &e), 1);
    // And new connections can still be made.
    std::unique_ptr<Endpoint> c3, s3;
    f_->connect(&c3, &s3);
    ASSERT_FALSE(HasFatalFailure());
    notify(*c3, *s3);
  }

  // A Write that the peer refuses, followed by a harmless Read on which the
  // error is reported if the Write already completed.
  void bad_write(uint64_t addr, uint64_t key, size_t len) {
    char sink[8];
    ASSERT_EQ(fi_write(c_->ep, src_.data(), len, nullptr, 0, addr, key, &src_), 0);
    ASSERT_EQ(fi_read(c_->ep, sink, 8, nullptr, 0, va(rw_), fi_mr_key(rw_mr_.get()), sink), 0);
    expect_sane(first_error(2), FI_EACCES);
    expect_contained();
  }
  void bad_read(uint64_t addr, uint64_t key, size_t len) {
    std::vector<uint8_t> dst(len);
    ASSERT_EQ(fi_read(c_->ep, dst.data(), len, nullptr, 0, addr, key, &dst), 0);
    fi_cq_err_entry err = first_error(1);
    EXPECT_EQ(err.op_context, &dst);
    EXPECT_TRUE(err.flags & FI_READ);
    expect_sane(err, FI_EACCES);
    expect_contained();
  }

  std::unique_ptr<Endpoint> c2_, s2_;
  std::vector<uint8_t> rw_, ro_, wo_, src_;
  Fid<fid_mr> rw_mr_, ro_mr_, wo_mr_;
};

TEST_F(Errors, WriteBadKey) { bad_write(va(rw_), fi_mr_key(rw_mr_.get()) ^ 0x00ffff00, 100); }
TEST_F(Errors, ReadBadKey) { bad_read(va(rw_), fi_mr_key(rw_mr_.get()) ^ 0x00ffff00, 100); }
TEST_F(Errors, WriteOutOfBounds) { bad_write(va(rw_) + kLen - 10, fi_mr_key(rw_mr_.get()), 100); }
TEST_F(Errors, ReadOutOfBounds) { bad_read(va(rw_) - 1, fi_mr_key(rw_mr_.get()), 100); }
TEST_F(Errors, WriteWithoutRemoteWrite) { bad_write(va(ro_), fi_mr_key(ro_mr_.get()), 100); }
TEST_F(Errors, ReadWithoutRemoteRead) { bad_read(va(wo_), fi_mr_key(wo_mr_.get()), 100); }
TEST_F(Errors, ReadOfClosedRegion) {
  uint64_t key = fi_mr_key(rw_mr_.get());
  rw_mr_.reset();
  bad_read(va(rw_), key, 100);
}

// With FI_DELIVERY_COMPLETE a refused Write or Send reports the error on
// itself rather than on whatever was posted after it.
TEST_F(Errors, DeliveryCompleteWriteReportsItsOwnError) {
  iovec iov{src_.data(), 100};
  fi_rma_iov rma{va(ro_), 100, fi_mr_key(ro_mr_.get())};  // no FI_REMOTE_WRITE
  int ctx = 0;
  fi_msg_rma m{&iov, nullptr, 1, 0, &rma, 1, &ctx, 0};
  ASSERT_EQ(fi_writemsg(c_->ep, &m, FI_DELIVERY_COMPLETE), 0);
  fi_cq_err_entry err = first_error(1);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_TRUE(err.flags & FI_WRITE);
  expect_sane(err, FI_EACCES);
  expect_contained();
}

// No receive posted, and more than the peer holds for want of one
// (FI_SOFTRDMA_UNEXPECTED_BYTES, 256 KiB by default): the peer refuses it.
TEST_F(Errors, DeliveryCompleteSendReportsItsOwnError) {
  std::vector<uint8_t> big((256u << 10) + 4096, 0x22);
  iovec iov{big.data(), big.size()};
  int ctx = 0;
  fi_msg m{&iov, nullptr, 1, 0, &ctx, 0};
  ASSERT_EQ(fi_sendmsg(c_->ep, &m, FI_DELIVERY_COMPLETE), 0);
  fi_cq_err_entry err = first_error(1);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_TRUE(err.flags & FI_SEND);
  EXPECT_NE(err.err, 0);
  EXPECT_NE(err.prov_errno, 0);
  expect_contained();
}

TEST_F(Errors, AtomicWithoutRemoteWrite) {
  uint64_t one = 1, old = 0;
  ASSERT_EQ(fi_fetch_atomic(c_->ep, &one, 1, nullptr, &old, nullptr, 0, va(ro_),
                            fi_mr_key(ro_mr_.get()), FI_UINT64, FI_SUM, &old),
            0);
  fi_cq_err_entry err = first_error(1);
  EXPECT_EQ(err.op_context, &old);
  expect_sane(err, FI_EACCES);
  expect_contained();
}

TEST_F(Errors, MisalignedAtomicIsRefusedLocally) {
  uint64_t one = 1;
  EXPECT_NE(fi_atomic(c_->ep, &one, 1, nullptr, 0, va(rw_) + 3, fi_mr_key(rw_mr_.get()), FI_UINT64,
                      FI_SUM, nullptr),
            0);
  notify(*c_, *s_);  // the connection is unharmed
}

TEST_F(Errors, MessageLongerThanReceive) {
  std::vector<uint8_t> small(100);
  ASSERT_EQ(fi_recv(s_->ep, small.data(), small.size(), nullptr, 0, &small), 0);
  ASSERT_EQ(fi_send(c_->ep, src_.data(), 200, nullptr, 0, &src_), 0);
  fi_cq_data_entry e;
  fi_cq_err_entry err{};
  ASSERT_EQ(cq_wait(s_->rx, &e, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.op_context, &small);
  EXPECT_TRUE(err.flags & FI_RECV);
  ASSERT_NE(cq_wait(c_->tx, &e), -FI_EAGAIN);  // the Send: sent, or failed
  expect_contained();
}

// Held for want of a receive only up to FI_SOFTRDMA_UNEXPECTED_BYTES (256
// KiB by default; msg_test's SendsBeforeReceivesArePosted): a message
// beyond it ends the connection with a Terminate.
TEST_F(Errors, MessageWithoutReceiveBeyondTheHeldBound) {
  char sink[8];
  std::vector<uint8_t> big((256u << 10) + 4096, 0x33);
  ASSERT_EQ(fi_send(c_->ep, big.data(), big.size(), nullptr, 0, &big), 0);
  ASSERT_EQ(fi_read(c_->ep, sink, 8, nullptr, 0, va(rw_), fi_mr_key(rw_mr_.get()), sink), 0);
  fi_cq_err_entry err = first_error(2);
  EXPECT_NE(err.err, 0);
  EXPECT_NE(err.prov_errno, 0);
  expect_contained();
}

}  // namespace
}  // namespace fit
