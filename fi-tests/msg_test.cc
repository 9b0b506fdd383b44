// Messages on a connected FI_EP_MSG pair: every size from 0 B to 64 MiB,
// vectors, fi_sendmsg/fi_recvmsg, fi_inject, many outstanding, both ways.
#include <cstring>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

class Msg : public Connected {
 protected:
  void send_recv(Endpoint& from, Endpoint& to, size_t size, bool registered, uint64_t seed);
};

void Msg::send_recv(Endpoint& from, Endpoint& to, size_t size, bool registered, uint64_t seed) {
  constexpr size_t kGuard = 64;
  std::vector<uint8_t> src(size + 1), dst(size + kGuard, 0xee);
  fill(src.data(), size, seed);
  Fid<fid_mr> smr, dmr;
  void *sdesc = nullptr, *ddesc = nullptr;
  if (registered) {
    smr.reset(f_->reg(src.data(), src.size(), FI_SEND));
    dmr.reset(f_->reg(dst.data(), dst.size(), FI_RECV));
    ASSERT_TRUE(smr && dmr);
    sdesc = fi_mr_desc(smr.get());
    ddesc = fi_mr_desc(dmr.get());
  }
  ASSERT_EQ(fi_recv(to.ep, dst.data(), size, ddesc, 0, &dst), 0);
  ASSERT_EQ(fi_send(from.ep, src.data(), size, sdesc, 0, &src), 0);
  fi_cq_data_entry e{};
  fi_cq_err_entry err{};
  ASSERT_EQ(cq_wait(to.rx, &e, &err), 1) << "size " << size << " err " << err.err;
  EXPECT_EQ(e.op_context, &dst);
  EXPECT_EQ(e.len, size);
  EXPECT_EQ(e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
  EXPECT_EQ(e.flags & (FI_SEND | FI_REMOTE_CQ_DATA), 0u);
  ASSERT_EQ(cq_wait(from.tx, &e, &err), 1) << "size " << size << " err " << err.err;
  EXPECT_EQ(e.op_context, &src);
  EXPECT_EQ(e.flags & (FI_SEND | FI_MSG), FI_SEND | FI_MSG);
  EXPECT_TRUE(same(dst.data(), size, seed)) << "size " << size;
  for (size_t i = size; i < dst.size(); ++i) {
    ASSERT_EQ(dst[i], 0xee) << "overrun at " << i;
  }
}

TEST_F(Msg, EverySize) {
  uint64_t seed = 1;
  for (size_t size : kSizes) {
    SCOPED_TRACE(size);
    send_recv(*c_, *s_, size, false, seed++);
    send_recv(*s_, *c_, size, true, seed++);
    if (HasFatalFailure()) return;
  }
}

// Sends that arrive before any receive is posted are held (within
// FI_SOFTRDMA_UNEXPECTED_BYTES, 256 KiB by default) and delivered, in
// order, once the receiver posts its receives a second later; the
// connection lives on.
TEST_F(Msg, SendsBeforeReceivesArePosted) {
  const std::vector<size_t> sizes = {0, 8, 65536, (128u << 10) + 13};
  std::vector<std::vector<uint8_t>> src, dst;
  src.reserve(sizes.size());  // &src[i], &dst[i] are the contexts: they must not move
  dst.reserve(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.emplace_back(sizes[i] + 1);
    dst.emplace_back(sizes[i] + 64, 0xee);
    fill(src[i].data(), sizes[i], 40 + i);
    ASSERT_EQ(fi_send(c_->ep, src[i].data(), sizes[i], nullptr, 0, &src[i]), 0);
  }
  fi_cq_data_entry e{};
  fi_cq_err_entry err{};
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_EQ(cq_wait(c_->tx, &e, &err), 1) << "send " << i << " err " << err.err;
    EXPECT_EQ(e.op_context, &src[i]);
  }
  EXPECT_TRUE(cq_quiet(s_->rx, 1000)) << "a completion with no receive posted";
  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_EQ(fi_recv(s_->ep, dst[i].data(), dst[i].size(), nullptr, 0, &dst[i]), 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_EQ(cq_wait(s_->rx, &e, &err), 1) << "receive " << i << " err " << err.err;
    EXPECT_EQ(e.op_context, &dst[i]) << "out of order";
    EXPECT_EQ(e.len, sizes[i]);
    EXPECT_EQ(e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
    EXPECT_TRUE(same(dst[i].data(), sizes[i], 40 + i)) << "size " << sizes[i];
    EXPECT_EQ(dst[i][sizes[i]], 0xee) << "overrun";
  }
  send_recv(*c_, *s_, 4096, false, 50);  // and the connection goes on
  send_recv(*s_, *c_, 4096, true, 51);
}

TEST_F(Msg, ShortMessageIntoLargeBuffer) {
  std::vector<uint8_t> dst(4096), src(100);
  fill(src.data(), src.size(), 9);
  ASSERT_EQ(fi_recv(s_->ep, dst.data(), dst.size(), nullptr, 0, nullptr), 0);
  ASSERT_EQ(fi_send(c_->ep, src.data(), src.size(), nullptr, 0, nullptr), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.len, 100u);
  EXPECT_TRUE(same(dst.data(), 100, 9));
}

TEST_F(Msg, Vectors) {
  // 3 send pieces (one empty) gathered into 2 receive pieces.
  std::vector<uint8_t> a(1000), b(0), c(5000), all(6000);
  fill(all.data(), all.size(), 11);
  std::memcpy(a.data(), all.data(), 1000);
  std::memcpy(c.data(), all.data() + 1000, 5000);
  iovec siov[3] = {{a.data(), a.size()}, {b.data(), 0}, {c.data(), c.size()}};
  std::vector<uint8_t> r1(2500), r2(4000);
  iovec riov[2] = {{r1.data(), r1.size()}, {r2.data(), r2.size()}};
  ASSERT_EQ(fi_recvv(s_->ep, riov, nullptr, 2, 0, riov), 0);
  ASSERT_EQ(fi_sendv(c_->ep, siov, nullptr, 3, 0, siov), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.len, 6000u);
  EXPECT_EQ(e.op_context, riov);
  EXPECT_EQ(std::memcmp(r1.data(), all.data(), 2500), 0);
  EXPECT_EQ(std::memcmp(r2.data(), all.data() + 2500, 3500), 0);
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  EXPECT_EQ(e.op_context, siov);
  // More pieces than iov_limit are refused.
  size_t limit = f_->info()->tx_attr->iov_limit;
  std::vector<iovec> many(limit + 1, iovec{a.data(), 1});
  EXPECT_NE(fi_sendv(c_->ep, many.data(), nullptr, many.size(), 0, nullptr), 0);
}

TEST_F(Msg, SendmsgRecvmsg) {
  std::vector<uint8_t> src(3000), dst(3000);
  fill(src.data(), src.size(), 12);
  iovec riov{dst.data(), dst.size()};
  int rctx = 0, sctx = 0;
  fi_msg rm{&riov, nullptr, 1, 0, &rctx, 0};
  ASSERT_EQ(fi_recvmsg(s_->ep, &rm, FI_COMPLETION), 0);
  iovec siov{src.data(), src.size()};
  fi_msg sm{&siov, nullptr, 1, 0, &sctx, 0};
  ASSERT_EQ(fi_sendmsg(c_->ep, &sm, FI_COMPLETION | FI_TRANSMIT_COMPLETE), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, src.size());
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  EXPECT_EQ(e.op_context, &sctx);
  EXPECT_TRUE(same(dst.data(), dst.size(), 12));
  // FI_INJECT on sendmsg: the buffer is free on return, the completion still
  // comes.
  ASSERT_EQ(fi_recvmsg(s_->ep, &rm, 0), 0);
  siov.iov_len = 64;
  ASSERT_EQ(fi_sendmsg(c_->ep, &sm, FI_INJECT | FI_COMPLETION), 0);
  std::memset(src.data(), 0, 64);
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.len, 64u);
  EXPECT_TRUE(same(dst.data(), 64, 12));
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  EXPECT_EQ(e.op_context, &sctx);
}

TEST_F(Msg, Inject) {
  const size_t max = f_->info()->tx_attr->inject_size;
  ASSERT_GT(max, 0u);
  std::vector<uint8_t> src(max + 1), dst(max + 1);
  uint64_t seed = 20;
  for (size_t size : {size_t{0}, size_t{1}, max / 2, max}) {
    SCOPED_TRACE(size);
    fill(src.data(), size, seed);
    ASSERT_EQ(fi_recv(s_->ep, dst.data(), dst.size(), nullptr, 0, &dst), 0);
    ASSERT_EQ(fi_inject(c_->ep, src.data(), size, 0), 0);
    std::memset(src.data(), 0xab, src.size());  // the caller's buffer is free at once
    fi_cq_data_entry e;
    ASSERT_EQ(cq_wait(s_->rx, &e), 1);
    EXPECT_EQ(e.len, size);
    EXPECT_TRUE(same(dst.data(), size, seed));
    ++seed;
  }
  EXPECT_TRUE(cq_quiet(c_->tx, 100));  // fi_inject never completes to the CQ
  EXPECT_NE(fi_inject(c_->ep, src.data(), max + 1, 0), 0);
}

TEST_F(Msg, ManyOutstandingInOrder) {
  constexpr int kN = 200;
  constexpr size_t kLen = 1024;
  std::vector<std::vector<uint8_t>> src(kN, std::vector<uint8_t>(kLen)),
      dst(kN, std::vector<uint8_t>(kLen));
  for (int i = 0; i < kN; ++i) {
    fill(src[i].data(), kLen, 100 + i);
    ASSERT_EQ(fi_recv(s_->ep, dst[i].data(), kLen, nullptr, 0, &dst[i]), 0);
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(fi_send(c_->ep, src[i].data(), kLen, nullptr, 0, &src[i]), 0);
  }
  for (int i = 0; i < kN; ++i) {
    fi_cq_data_entry e;
    ASSERT_EQ(cq_wait(s_->rx, &e), 1);
    EXPECT_EQ(e.op_context, &dst[i]);  // FI_ORDER_SAS: in posting order
    EXPECT_TRUE(same(dst[i].data(), kLen, 100 + i));
  }
  // Several completions per fi_cq_read.
  int got = 0;
  ASSERT_TRUE(poll_until([&] {
    fi_cq_data_entry e[16];
    ssize_t n = fi_cq_read(c_->tx, e, 16);
    if (n > 0) {
      for (ssize_t k = 0; k < n; ++k) {
        EXPECT_EQ(e[k].op_context, &src[got + k]);
      }
      got += static_cast<int>(n);
    }
    return got == kN;
  }));
}

TEST_F(Msg, BothWaysAtOnce) {
  constexpr size_t kLen = 4 << 20;
  std::vector<uint8_t> a(kLen), b(kLen), ra(kLen), rb(kLen);
  fill(a.data(), kLen, 31);
  fill(b.data(), kLen, 32);
  ASSERT_EQ(fi_recv(s_->ep, ra.data(), kLen, nullptr, 0, nullptr), 0);
  ASSERT_EQ(fi_recv(c_->ep, rb.data(), kLen, nullptr, 0, nullptr), 0);
  ASSERT_EQ(fi_send(c_->ep, a.data(), kLen, nullptr, 0, nullptr), 0);
  ASSERT_EQ(fi_send(s_->ep, b.data(), kLen, nullptr, 0, nullptr), 0);
  fi_cq_data_entry e;
  for (fid_cq* cq : {s_->rx, c_->rx, c_->tx, s_->tx}) {
    ASSERT_EQ(cq_wait(cq, &e), 1);
  }
  EXPECT_TRUE(same(ra.data(), kLen, 31));
  EXPECT_TRUE(same(rb.data(), kLen, 32));
}

// --- remote CQ data with messages (fi_senddata, fi_injectdata) ---

// data arrives with the receive it consumes, whether the receive buffer is
// exactly the payload (the 8 bytes then travel past it), larger, or split.
TEST_F(Msg, SenddataCarriesRemoteCqData) {
  ASSERT_EQ(f_->info()->domain_attr->cq_data_size, 8u);
  uint64_t data = 0x1122334455667788ULL;
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{65536}, size_t{1} << 20}) {
    for (size_t extra : {size_t{0}, size_t{3}, size_t{64}}) {
      SCOPED_TRACE(::testing::Message() << size << " + " << extra);
      std::vector<uint8_t> src(size + 1), dst(size + extra + 1);
      fill(src.data(), size, size + extra);
      ASSERT_EQ(fi_recv(s_->ep, dst.data(), size + extra, nullptr, 0, &dst), 0);
      ASSERT_EQ(fi_senddata(c_->ep, src.data(), size, nullptr, ++data, 0, &src), 0);
      fi_cq_data_entry e{};
      fi_cq_err_entry err{};
      ASSERT_EQ(cq_wait(s_->rx, &e, &err), 1) << err.err;
      EXPECT_EQ(e.op_context, &dst);
      EXPECT_EQ(e.len, size);
      EXPECT_EQ(e.flags & (FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA),
                FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
      EXPECT_EQ(e.data, data);
      EXPECT_TRUE(same(dst.data(), size, size + extra));
      ASSERT_EQ(cq_wait(c_->tx, &e), 1);
      EXPECT_EQ(e.op_context, &src);
      EXPECT_EQ(e.flags & FI_REMOTE_CQ_DATA, 0u);
      if (HasFatalFailure()) return;
    }
  }
  // A plain message after them carries no data.
  char in[8], out[8] = "plain";
  ASSERT_EQ(fi_recv(s_->ep, in, sizeof(in), nullptr, 0, in), 0);
  ASSERT_EQ(fi_send(c_->ep, out, sizeof(out), nullptr, 0, out), 0);
  fi_cq_data_entry e{};
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.flags & FI_REMOTE_CQ_DATA, 0u);
  EXPECT_EQ(e.len, sizeof(out));
  EXPECT_STREQ(in, "plain");
}

TEST_F(Msg, InjectdataAndSendmsgWithData) {
  char in[64] = {}, out[32] = "injected";
  ASSERT_EQ(fi_recv(s_->ep, in, sizeof(in), nullptr, 0, in), 0);
  ASSERT_EQ(fi_injectdata(c_->ep, out, 9, 0xabcdef, 0), 0);
  std::memset(out, 0, sizeof(out));  // free at once
  fi_cq_data_entry e{};
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.data, 0xabcdefu);
  EXPECT_EQ(e.len, 9u);
  EXPECT_STREQ(in, "injected");
  EXPECT_TRUE(cq_quiet(c_->tx, 50));
  // Three pieces sent, two received: the 8 bytes straddle the caller's last
  // buffer and the provider's slot.
  std::vector<uint8_t> all(5000);
  fill(all.data(), all.size(), 44);
  iovec siov[3] = {{all.data(), 1000}, {all.data() + 1000, 0}, {all.data() + 1000, 4000}};
  std::vector<uint8_t> r1(3000), r2(2004);
  iovec riov[2] = {{r1.data(), r1.size()}, {r2.data(), r2.size()}};
  ASSERT_EQ(fi_recvv(s_->ep, riov, nullptr, 2, 0, riov), 0);
  int ctx = 0;
  fi_msg m{siov, nullptr, 3, 0, &ctx, 0x5555aaaa5555aaaaULL};
  ASSERT_EQ(fi_sendmsg(c_->ep, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION), 0);
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.op_context, riov);
  EXPECT_EQ(e.len, 5000u);
  EXPECT_EQ(e.data, 0x5555aaaa5555aaaaULL);
  EXPECT_TRUE(e.flags & FI_REMOTE_CQ_DATA);
  EXPECT_EQ(std::memcmp(r1.data(), all.data(), 3000), 0);
  EXPECT_EQ(std::memcmp(r2.data(), all.data() + 3000, 2000), 0);
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  EXPECT_EQ(e.op_context, &ctx);
}

// Up to 8 bytes too long reach only the provider's slot: truncated, and
// the connection lives on (longer ones are refused by iWARP itself).
TEST_F(Msg, SlightlyTooLongIsTruncated) {
  std::vector<uint8_t> in(100), out(104);
  ASSERT_EQ(fi_recv(s_->ep, in.data(), in.size(), nullptr, 0, &in), 0);
  ASSERT_EQ(fi_send(c_->ep, out.data(), out.size(), nullptr, 0, &out), 0);
  fi_cq_data_entry e;
  fi_cq_err_entry err{};
  ASSERT_EQ(cq_wait(s_->rx, &e, &err), -FI_EAVAIL);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.op_context, &in);
  EXPECT_EQ(err.len, 100u);
  EXPECT_EQ(err.olen, 4u);
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  notify(*c_, *s_);
}

TEST(MsgNoCqData, SenddataNeedsRemoteCqData) {
  Info h = msg_hints();
  h->mode = FI_CONTEXT;  // no FI_RX_CQ_DATA: no remote CQ data at all
  Fabric f(std::move(h));
  ASSERT_EQ(f.info()->domain_attr->cq_data_size, 0u);
  std::unique_ptr<Endpoint> c, s;
  f.connect(&c, &s);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  char x = 0;
  EXPECT_EQ(fi_senddata(c->ep, &x, 1, nullptr, 1, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_injectdata(c->ep, &x, 1, 1, 0), -FI_EINVAL);
}

// Completions in every CQ format carry what the format has room for.
TEST_F(Msg, CqFormats) {
  for (fi_cq_format fmt :
       {FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED}) {
    Fabric f;
    f.listen();
    ASSERT_FALSE(HasFatalFailure());
    fid_cq* cq = nullptr;
    fi_cq_attr ca{};
    ca.format = fmt;
    ASSERT_EQ(fi_cq_open(f.domain(), &ca, &cq, nullptr), 0);
    Fid<fid_cq> own(cq);
    // The server side binds the CQ under test for both directions.
    auto c2 = f.open_ep(f.info());
    ASSERT_EQ(fi_connect(c2->ep, &f.addr(), nullptr, 0), 0);
    Info req = wait_connreq(f.pep_eq());
    ASSERT_TRUE(req);
    fid_ep* ep = nullptr;
    fid_eq* eq = nullptr;
    fi_eq_attr ea{};
    ASSERT_EQ(fi_eq_open(f.fabric(), &ea, &eq, nullptr), 0);
    Fid<fid_eq> own_eq(eq);
    ASSERT_EQ(fi_endpoint(f.domain(), req.get(), &ep, nullptr), 0);
    Fid<fid_ep> own_ep(ep);
    ASSERT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep), 0);
    char buf[32];
    ASSERT_EQ(fi_recv(ep, buf, sizeof(buf), nullptr, 0, buf), 0);
    ASSERT_EQ(fi_accept(ep, nullptr, 0), 0);
    ASSERT_TRUE(wait_connected(c2->eq, c2->ep));
    ASSERT_TRUE(wait_connected(eq, ep));
    ASSERT_EQ(fi_send(c2->ep, "0123456789", 10, nullptr, 0, nullptr), 0);
    fi_cq_tagged_entry e{};
    ssize_t n = -FI_EAGAIN;
    ASSERT_TRUE(poll_until([&] { return (n = fi_cq_read(cq, &e, 1)) != -FI_EAGAIN; }));
    ASSERT_EQ(n, 1);
    EXPECT_EQ(e.op_context, buf);
    if (fmt != FI_CQ_FORMAT_CONTEXT) {
      EXPECT_EQ(e.len, 10u);
      EXPECT_TRUE(e.flags & FI_RECV);
    }
    EXPECT_EQ(std::memcmp(buf, "0123456789", 10), 0);
    own_ep.reset();
  }
}

}  // namespace
}  // namespace fit
