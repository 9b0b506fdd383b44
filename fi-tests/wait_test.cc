// Waiting and counting: fi_cq_sread with timeouts, the FI_GETWAIT fd with
// fi_trywait + poll, counters for send/recv/read/write, selective completion.
#include <poll.h>

#include <cstring>
#include <thread>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

using Clock = std::chrono::steady_clock;

int elapsed_ms(Clock::time_point t0) {
  return static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
}

class Waits : public Connected {
 protected:
  EpOptions options() override {
    EpOptions o;
    o.wait = FI_WAIT_FD;
    return o;
  }
};

TEST_F(Waits, SreadTimesOutThenDelivers) {
  fi_cq_data_entry e;
  auto t0 = Clock::now();
  EXPECT_EQ(fi_cq_sread(s_->rx, &e, 1, nullptr, 300), -FI_EAGAIN);
  int ms = elapsed_ms(t0);
  EXPECT_GE(ms, 290);
  EXPECT_LT(ms, 5000);
  t0 = Clock::now();
  EXPECT_EQ(fi_cq_sread(s_->rx, &e, 1, nullptr, 0), -FI_EAGAIN);
  EXPECT_LT(elapsed_ms(t0), 1000);

  char buf[8], out[8] = "abc";
  ASSERT_EQ(fi_recv(s_->ep, buf, sizeof(buf), nullptr, 0, buf), 0);
  ASSERT_EQ(fi_send(c_->ep, out, sizeof(out), nullptr, 0, out), 0);
  t0 = Clock::now();
  ASSERT_EQ(fi_cq_sread(s_->rx, &e, 1, nullptr, 10000), 1);
  EXPECT_LT(elapsed_ms(t0), 5000);
  EXPECT_EQ(e.op_context, buf);
  EXPECT_STREQ(buf, "abc");
  // Infinite timeout returns as soon as there is something.
  ASSERT_EQ(fi_cq_sread(c_->tx, &e, 1, nullptr, -1), 1);
  EXPECT_EQ(e.op_context, out);
  // fi_cq_sreadfrom too; source addresses are not available on MSG.
  ASSERT_EQ(fi_recv(s_->ep, buf, sizeof(buf), nullptr, 0, buf), 0);
  ASSERT_EQ(fi_send(c_->ep, out, sizeof(out), nullptr, 0, out), 0);
  fi_addr_t src = 0;
  ASSERT_EQ(fi_cq_sreadfrom(s_->rx, &e, 1, &src, nullptr, 10000), 1);
  EXPECT_EQ(src, FI_ADDR_NOTAVAIL);
}

TEST_F(Waits, SreadIsWokenBySignal) {
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(fi_cq_signal(s_->rx), 0);
  });
  fi_cq_data_entry e;
  auto t0 = Clock::now();
  ssize_t rd = fi_cq_sread(s_->rx, &e, 1, nullptr, 20000);
  t.join();
  EXPECT_EQ(rd, -FI_EAGAIN);
  EXPECT_LT(elapsed_ms(t0), 10000);
}

TEST_F(Waits, SreadReportsErrors) {
  ASSERT_EQ(fi_shutdown(c_->ep, 0), 0);
  char buf[8];
  ssize_t rc = fi_recv(c_->ep, buf, sizeof(buf), nullptr, 0, buf);
  if (rc == 0) {  // accepted, then flushed: sread reports the error entry
    fi_cq_data_entry e;
    ASSERT_EQ(fi_cq_sread(c_->rx, &e, 1, nullptr, 5000), -FI_EAVAIL);
    fi_cq_err_entry err{};
    ASSERT_EQ(fi_cq_readerr(c_->rx, &err, 0), 1);
    EXPECT_EQ(err.err, FI_ECANCELED);
    EXPECT_EQ(err.op_context, buf);
  } else {
    EXPECT_LT(rc, 0);
  }
}

// The wait fd protocol: fi_trywait says whether it is safe to block, poll()
// blocks on the fd, fi_cq_read then makes progress.
TEST_F(Waits, GetwaitFdWithTrywaitAndPoll) {
  int fd = -1;
  ASSERT_EQ(fi_control(&s_->rx->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fi_wait_obj obj = FI_WAIT_NONE;
  ASSERT_EQ(fi_control(&s_->rx->fid, FI_GETWAITOBJ, &obj), 0);
  EXPECT_EQ(obj, FI_WAIT_FD);

  fid* fids[1] = {&s_->rx->fid};
  // Nothing to do: trywait allows blocking and poll times out; or, on a
  // busy-polled transport with manual progress, it says to keep reading.
  int rc = fi_trywait(f_->fabric(), fids, 1);
  ASSERT_TRUE(rc == FI_SUCCESS || rc == -FI_EAGAIN) << rc;
  pollfd p{fd, POLLIN, 0};
  if (rc == FI_SUCCESS) {
    EXPECT_EQ(::poll(&p, 1, 100), 0);
  }

  char buf[16], out[16] = "wake";
  ASSERT_EQ(fi_recv(s_->ep, buf, sizeof(buf), nullptr, 0, buf), 0);
  ASSERT_EQ(fi_send(c_->ep, out, sizeof(out), nullptr, 0, out), 0);
  fi_cq_data_entry e;
  ssize_t rd = -FI_EAGAIN;
  auto t0 = Clock::now();
  int wakeups = 0;
  while (rd == -FI_EAGAIN && elapsed_ms(t0) < kWaitMs) {
    if (fi_trywait(f_->fabric(), fids, 1) == FI_SUCCESS) {
      p.revents = 0;
      if (::poll(&p, 1, 5000) > 0) ++wakeups;
    }
    rd = fi_cq_read(s_->rx, &e, 1);
  }
  ASSERT_EQ(rd, 1);
  EXPECT_EQ(e.op_context, buf);
  EXPECT_STREQ(buf, "wake");
  EXPECT_LT(elapsed_ms(t0), 5000);  // woken by the fd, not by poll's timeout
  // With a completion queued, trywait refuses.
  ASSERT_EQ(fi_recv(s_->ep, buf, sizeof(buf), nullptr, 0, buf), 0);
  ASSERT_EQ(fi_send(c_->ep, out, sizeof(out), nullptr, 0, out), 0);
  ASSERT_TRUE(poll_until([&] { return fi_trywait(f_->fabric(), fids, 1) == -FI_EAGAIN; }));
  ASSERT_EQ(fi_cq_read(s_->rx, &e, 1), 1);
}

TEST_F(Waits, EqWaitFd) {
  int fd = -1;
  ASSERT_EQ(fi_control(&f_->pep_eq()->fid, FI_GETWAIT, &fd), 0);
  ASSERT_GE(fd, 0);
  fid* fids[1] = {&f_->pep_eq()->fid};
  auto c = f_->open_ep(f_->info());
  ASSERT_EQ(fi_connect(c->ep, &f_->addr(), nullptr, 0), 0);
  uint32_t event;
  std::vector<uint8_t> buf(sizeof(fi_eq_cm_entry) + 256);
  ssize_t rd = -FI_EAGAIN;
  auto t0 = Clock::now();
  while (rd == -FI_EAGAIN && elapsed_ms(t0) < kWaitMs) {
    if (fi_trywait(f_->fabric(), fids, 1) == FI_SUCCESS) {
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, 5000);
    }
    rd = fi_eq_read(f_->pep_eq(), &event, buf.data(), buf.size(), 0);
  }
  ASSERT_GE(rd, static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  EXPECT_EQ(event, FI_CONNREQ);
  EXPECT_LT(elapsed_ms(t0), 5000);
  auto* e = reinterpret_cast<fi_eq_cm_entry*>(buf.data());
  EXPECT_EQ(fi_reject(f_->pep(), e->info->handle, nullptr, 0), 0);
  fi_freeinfo(e->info);
}

// --- FI_PROGRESS_AUTO: the provider progresses without being called ---

class AutoProgress : public Waits {
 protected:
  Info hints() override {
    Info h = msg_hints();
    h->domain_attr->control_progress = FI_PROGRESS_AUTO;
    h->domain_attr->data_progress = FI_PROGRESS_AUTO;
    return h;
  }
  // Blocks in poll() alone (no libfabric call) until fid's wait fd is
  // ready, unless fi_trywait already finds fid ready. Under auto progress
  // trywait never refuses for lack of a wakeup source.
  bool wait_fd_ready(fid_t f, int ms) {
    int fd = -1;
    EXPECT_EQ(fi_control(f, FI_GETWAIT, &fd), 0);
    fid* fids[1] = {f};
    int rc = fi_trywait(f_->fabric(), fids, 1);
    if (rc == -FI_EAGAIN) return true;  // something is there already
    EXPECT_EQ(rc, FI_SUCCESS);
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1;
  }
};

TEST_F(AutoProgress, ReportedAndHonoured) {
  EXPECT_EQ(f_->info()->domain_attr->data_progress, FI_PROGRESS_AUTO);
  EXPECT_EQ(f_->info()->domain_attr->control_progress, FI_PROGRESS_AUTO);
}

TEST_F(AutoProgress, CompletionsArriveWhileTheApplicationSleeps) {
  std::vector<uint8_t> in(8 << 20), out(8 << 20);
  fill(out.data(), out.size(), 77);
  ASSERT_EQ(fi_recv(s_->ep, in.data(), in.size(), nullptr, 0, in.data()), 0);
  fid* fids[1] = {&s_->rx->fid};
  ASSERT_EQ(fi_trywait(f_->fabric(), fids, 1), FI_SUCCESS);  // nothing there yet
  ASSERT_EQ(fi_send(c_->ep, out.data(), out.size(), nullptr, 0, out.data()), 0);
  // Nobody calls into libfabric: only the provider's thread moves 8 MiB.
  ASSERT_TRUE(wait_fd_ready(&s_->rx->fid, 20000));
  fi_cq_data_entry e;
  ASSERT_EQ(fi_cq_read(s_->rx, &e, 1), 1);
  EXPECT_EQ(e.len, out.size());
  EXPECT_TRUE(same(in.data(), in.size(), 77));
  ASSERT_TRUE(wait_fd_ready(&c_->tx->fid, 20000));
  ASSERT_EQ(fi_cq_read(c_->tx, &e, 1), 1);
}

TEST_F(AutoProgress, ConnectionRequestsArriveWhileTheApplicationSleeps) {
  auto c = f_->open_ep(f_->info());
  ASSERT_EQ(fi_connect(c->ep, &f_->addr(), nullptr, 0), 0);
  ASSERT_TRUE(wait_fd_ready(&f_->pep_eq()->fid, 20000));
  Info req = wait_connreq(f_->pep_eq());
  ASSERT_TRUE(req);
  auto s = f_->open_ep(req.get());
  ASSERT_EQ(fi_accept(s->ep, nullptr, 0), 0);
  ASSERT_TRUE(wait_fd_ready(&c->eq->fid, 20000));
  ASSERT_TRUE(wait_connected(c->eq, c->ep));
}

TEST_F(AutoProgress, SreadAndCountersFromAnotherThread) {
  char buf[64], out[64] = "threaded";
  ASSERT_EQ(fi_recv(s_->ep, buf, sizeof(buf), nullptr, 0, buf), 0);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(fi_send(c_->ep, out, sizeof(out), nullptr, 0, out), 0);
  });
  fi_cq_data_entry e;
  EXPECT_EQ(fi_cq_sread(s_->rx, &e, 1, nullptr, 10000), 1);
  t.join();
  EXPECT_STREQ(buf, "threaded");
  EXPECT_EQ(fi_cq_sread(c_->tx, &e, 1, nullptr, 10000), 1);
}

// --- counters ---

class Counters : public Connected {
 protected:
  fid_cntr* open_cntr() {
    fid_cntr* c = nullptr;
    fi_cntr_attr a{};
    a.events = FI_CNTR_EVENTS_COMP;
    EXPECT_EQ(fi_cntr_open(f_->domain(), &a, &c, nullptr), 0);
    return c;
  }
};

TEST_F(Counters, CountEveryKindOfOperation) {
  // Counters are bound before enable: a fresh pair whose endpoints have them.
  Fid<fid_cntr> send(open_cntr()), recv(open_cntr()), read(open_cntr()), write(open_cntr());
  auto c = f_->open_ep(f_->info());  // enabled already: binding must now fail
  EXPECT_NE(fi_ep_bind(c->ep, &send->fid, FI_SEND), 0);

  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(f_->domain(), f_->info(), &ep, nullptr), 0);
  Fid<fid_ep> own(ep);
  fid_cq* cq = nullptr;
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_DATA;
  ASSERT_EQ(fi_cq_open(f_->domain(), &ca, &cq, nullptr), 0);
  Fid<fid_cq> own_cq(cq);
  fid_eq* eq = nullptr;
  fi_eq_attr ea{};
  ASSERT_EQ(fi_eq_open(f_->fabric(), &ea, &eq, nullptr), 0);
  Fid<fid_eq> own_eq(eq);
  ASSERT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
  ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
  // No FI_RMA_EVENT is offered, so nothing counts remote accesses
  // (fi_endpoint(3)): such a binding is refused.
  EXPECT_EQ(fi_ep_bind(ep, &write->fid, FI_REMOTE_WRITE), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &read->fid, FI_REMOTE_READ), -FI_EINVAL);
  EXPECT_EQ(fi_ep_bind(ep, &send->fid, FI_SEND | FI_REMOTE_WRITE), -FI_EINVAL);
  ASSERT_EQ(fi_ep_bind(ep, &send->fid, FI_SEND), 0);
  ASSERT_EQ(fi_ep_bind(ep, &recv->fid, FI_RECV), 0);
  ASSERT_EQ(fi_ep_bind(ep, &read->fid, FI_READ), 0);
  ASSERT_EQ(fi_ep_bind(ep, &write->fid, FI_WRITE), 0);
  ASSERT_EQ(fi_enable(ep), 0);
  ASSERT_EQ(fi_connect(ep, &f_->addr(), nullptr, 0), 0);
  Info req = wait_connreq(f_->pep_eq());
  ASSERT_TRUE(req);
  auto peer = f_->open_ep(req.get());
  ASSERT_EQ(fi_accept(peer->ep, nullptr, 0), 0);
  ASSERT_TRUE(wait_connected(eq, ep));
  ASSERT_TRUE(wait_connected(peer->eq, peer->ep));

  std::vector<uint8_t> region(4096), buf(4096);
  Fid<fid_mr> mr(f_->reg(region.data(), region.size(), FI_REMOTE_READ | FI_REMOTE_WRITE));
  const uint64_t va = reinterpret_cast<uint64_t>(region.data()), key = fi_mr_key(mr.get());
  constexpr int kN = 5;
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(fi_recv(peer->ep, buf.data(), 64, nullptr, 0, nullptr), 0);
    ASSERT_EQ(fi_recv(ep, buf.data(), 64, nullptr, 0, nullptr), 0);
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(fi_send(ep, buf.data(), 10, nullptr, 0, nullptr), 0);
    ASSERT_EQ(fi_write(ep, buf.data(), 100, nullptr, 0, va, key, nullptr), 0);
    ASSERT_EQ(fi_read(ep, buf.data(), 100, nullptr, 0, va, key, nullptr), 0);
    ASSERT_EQ(fi_send(peer->ep, buf.data(), 10, nullptr, 0, nullptr), 0);
  }
  EXPECT_EQ(fi_cntr_wait(send.get(), kN, 10000), 0);
  EXPECT_EQ(fi_cntr_wait(write.get(), kN, 10000), 0);
  EXPECT_EQ(fi_cntr_wait(read.get(), kN, 10000), 0);
  EXPECT_EQ(fi_cntr_wait(recv.get(), kN, 10000), 0);
  EXPECT_EQ(fi_cntr_read(send.get()), uint64_t{kN});
  EXPECT_EQ(fi_cntr_read(write.get()), uint64_t{kN});
  EXPECT_EQ(fi_cntr_read(read.get()), uint64_t{kN});
  EXPECT_EQ(fi_cntr_read(recv.get()), uint64_t{kN});
  for (fid_cntr* c2 : {send.get(), recv.get(), read.get(), write.get()})
    EXPECT_EQ(fi_cntr_readerr(c2), 0u);
  // The CQ got all of them too (no selective completion).
  int n = 0;
  fi_cq_data_entry e;
  while (fi_cq_read(cq, &e, 1) == 1) ++n;
  EXPECT_EQ(n, 4 * kN);

  // A threshold never reached times out; add/set work.
  auto t0 = Clock::now();
  EXPECT_EQ(fi_cntr_wait(send.get(), kN + 1, 200), -FI_ETIMEDOUT);
  EXPECT_GE(elapsed_ms(t0), 190);
  EXPECT_EQ(fi_cntr_add(send.get(), 10), 0);
  EXPECT_EQ(fi_cntr_read(send.get()), uint64_t{kN + 10});
  EXPECT_EQ(fi_cntr_set(send.get(), 1), 0);
  EXPECT_EQ(fi_cntr_read(send.get()), 1u);

  // A failing operation bumps the error count; a wait it interrupts says so.
  ASSERT_EQ(fi_read(ep, buf.data(), 100, nullptr, 0, va, key ^ 0xffff00, nullptr), 0);
  EXPECT_EQ(fi_cntr_wait(read.get(), kN + 5, 10000), -FI_EAVAIL);
  EXPECT_EQ(fi_cntr_readerr(read.get()), 1u);
  EXPECT_EQ(fi_cntr_read(read.get()), uint64_t{kN});
  mr.reset();
  peer.reset();
  own.reset();
}

// --- selective completion ---

class Selective : public Connected {
 protected:
  EpOptions options() override {
    EpOptions o;
    o.tx_bind = FI_TRANSMIT | FI_SELECTIVE_COMPLETION;
    o.rx_bind = FI_RECV | FI_SELECTIVE_COMPLETION;
    return o;
  }
};

TEST_F(Selective, OnlyFiCompletionOperationsReport) {
  char buf[4][16], out[16] = "x";
  int ctx_a = 0, ctx_b = 0;
  // Receive side: fi_recv reports nothing, fi_recvmsg(FI_COMPLETION) does.
  ASSERT_EQ(fi_recv(s_->ep, buf[0], 16, nullptr, 0, buf[0]), 0);
  iovec riov{buf[1], 16};
  fi_msg rm{&riov, nullptr, 1, 0, &ctx_a, 0};
  ASSERT_EQ(fi_recvmsg(s_->ep, &rm, FI_COMPLETION), 0);
  // Send side: fi_send reports nothing, fi_sendmsg(FI_COMPLETION) does.
  ASSERT_EQ(fi_send(c_->ep, out, 16, nullptr, 0, out), 0);
  iovec siov{out, 16};
  fi_msg sm{&siov, nullptr, 1, 0, &ctx_b, 0};
  ASSERT_EQ(fi_sendmsg(c_->ep, &sm, FI_COMPLETION), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_a);
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_b);
  EXPECT_TRUE(cq_quiet(s_->rx, 100));
  EXPECT_TRUE(cq_quiet(c_->tx, 100));
  // RMA follows the same rule.
  std::vector<uint8_t> region(64);
  Fid<fid_mr> mr(f_->reg(region.data(), region.size(), FI_REMOTE_WRITE | FI_REMOTE_READ));
  const uint64_t va = reinterpret_cast<uint64_t>(region.data());
  ASSERT_EQ(fi_write(c_->ep, out, 8, nullptr, 0, va, fi_mr_key(mr.get()), nullptr), 0);
  iovec wiov{out, 8};
  fi_rma_iov rma{va, 8, fi_mr_key(mr.get())};
  fi_msg_rma wm{&wiov, nullptr, 1, 0, &rma, 1, &ctx_a, 0};
  ASSERT_EQ(fi_readmsg(c_->ep, &wm, FI_COMPLETION), 0);
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_a);
  EXPECT_TRUE(e.flags & FI_READ);
  EXPECT_TRUE(cq_quiet(c_->tx, 100));
}

TEST_F(Selective, ErrorsAlwaysReport) {
  std::vector<uint8_t> region(64);
  Fid<fid_mr> mr(f_->reg(region.data(), region.size(), FI_REMOTE_WRITE));
  char sink[8];
  // Unreported on success, but this Read fails (no FI_REMOTE_READ).
  ASSERT_EQ(fi_read(c_->ep, sink, 8, nullptr, 0, reinterpret_cast<uint64_t>(region.data()),
                    fi_mr_key(mr.get()), sink),
            0);
  fi_cq_data_entry e;
  fi_cq_err_entry err{};
  ASSERT_EQ(cq_wait(c_->tx, &e, &err), -FI_EAVAIL);
  EXPECT_EQ(err.op_context, sink);
  EXPECT_EQ(err.err, FI_EACCES);
}

TEST_F(Selective, OpFlagsDefaultCanTurnCompletionsOn) {
  uint64_t flags = FI_TRANSMIT | FI_COMPLETION;
  ASSERT_EQ(fi_control(&c_->ep->fid, FI_SETOPSFLAG, &flags), 0);
  flags = FI_TRANSMIT;
  ASSERT_EQ(fi_control(&c_->ep->fid, FI_GETOPSFLAG, &flags), 0);
  EXPECT_TRUE(flags & FI_COMPLETION);
  char buf[8], out[8] = "y";
  iovec riov{buf, 8};
  int ctx = 0;
  fi_msg rm{&riov, nullptr, 1, 0, &ctx, 0};
  ASSERT_EQ(fi_recvmsg(s_->ep, &rm, FI_COMPLETION), 0);
  ASSERT_EQ(fi_send(c_->ep, out, 8, nullptr, 0, out), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(cq_wait(c_->tx, &e), 1);
  EXPECT_EQ(e.op_context, out);
  ASSERT_EQ(cq_wait(s_->rx, &e), 1);
}

}  // namespace
}  // namespace fit
