// Messages on the native FI_EP_RDM endpoint (provider "softrdma", FI_MSG |
// FI_TAGGED): every size from 0 B to 64 MiB both ways at once, eager and
// rendezvous, each byte checked in the receive buffer with the sender's
// address (FI_SOURCE); messages that arrive before their receive; tag
// matching with ignore bits and directed receives; peek, claim and discard;
// remote CQ data and inject; truncation; a sender far faster than its
// receiver; 64 senders to one endpoint; a peer that breaks the protocol
// loses its connection and nobody else is harmed.
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "fi-tests/rdm_peers.h"

namespace fit {
namespace {

constexpr uint64_t kCaps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE;

class RdmMsg : public RdmFixture {
 protected:
  RdmMsg() : RdmFixture(kCaps) {}
  // One completion or error, and its sender.
  struct Entry {
    fi_cq_tagged_entry e{};
    fi_cq_err_entry err{};
    fi_addr_t src = FI_ADDR_NOTAVAIL;
  };
  // Runs every peer's progress once (the provider's progress is manual);
  // what the reads find waits in the peer's stash for reap.
  void progress() {
    for (auto& p : peers_) {
      Entry x;
      ssize_t n = fi_cq_readfrom(p->cq(), &x.e, 1, &x.src);
      if (n == -FI_EAVAIL) n = fi_cq_readerr(p->cq(), &x.err, 0);
      if (n == 1) stash_[p.get()].push_back(x);
    }
  }
  // Posts a tagged send, retrying while the receiver has no room.
  void tsend(Peer& from, const void* buf, size_t len, Peer& to, uint64_t tag, void* ctx) {
    ssize_t rc;
    ASSERT_TRUE(poll_until([&] {
      rc = fi_tsend(from.ep(), buf, len, nullptr, to.addr(), tag, ctx);
      if (rc == -FI_EAGAIN) progress();
      return rc != -FI_EAGAIN;
    }));
    ASSERT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc));
  }
  // The next completion at p (its stash first); false if none comes.
  bool next(Peer& p, Entry* out) {
    auto& q = stash_[&p];
    if (q.empty() && !poll_until([&] {
          progress();
          return !q.empty();
        }))
      return false;
    *out = q.front();
    q.pop_front();
    return true;
  }
  // The completions of n operations (any order), by context; fails on errors.
  std::map<void*, fi_cq_tagged_entry> reap(Peer& p, size_t n,
                                           std::map<void*, fi_addr_t>* src = nullptr) {
    std::map<void*, fi_cq_tagged_entry> got;
    while (got.size() < n) {
      Entry x;
      if (!next(p, &x)) {
        ADD_FAILURE() << "no completion after " << got.size() << " of " << n;
        break;
      }
      if (x.err.err) {
        ADD_FAILURE() << "error completion: " << fi_strerror(x.err.err);
        break;
      }
      got[x.e.op_context] = x.e;
      if (src) (*src)[x.e.op_context] = x.src;
    }
    return got;
  }

  // One tagged message of 8 bytes, both completions reaped, the bytes checked.
  void one_message(Peer& from, Peer& to, uint64_t value) {
    uint64_t in = 0;
    ASSERT_EQ(fi_trecv(to.ep(), &in, sizeof(in), nullptr, FI_ADDR_UNSPEC, value, 0, &in), 0);
    tsend(from, &value, sizeof(value), to, value, &value);
    reap(to, 1);
    reap(from, 1);
    EXPECT_EQ(in, value);
  }

  std::map<Peer*, std::deque<Entry>> stash_;
};

TEST_F(RdmMsg, GetinfoOffersMessages) {
  const fi_info* i = d_->info();
  EXPECT_EQ(i->caps & kCaps, kCaps);
  EXPECT_EQ(i->domain_attr->cq_data_size, 8u);
  EXPECT_GE(i->tx_attr->inject_size, 64u);
  // Tagged messages are FI_EP_RDM's only.
  Info h = msg_hints(FI_TAGGED);
  Info list;
  EXPECT_EQ(getinfo(h.get(), &list), -FI_ENODATA);
}

TEST_F(RdmMsg, EverySizeBothWaysAtOnce) {
  Peer& a = add();
  Peer& b = add();
  for (size_t len : kSizes) {
    std::vector<uint8_t> out_a(len), out_b(len), in_a(len + 1, 0), in_b(len + 1, 0);
    fill(out_a.data(), len, len);
    fill(out_b.data(), len, len + 1);
    ASSERT_EQ(fi_trecv(a.ep(), in_a.data(), len, nullptr, FI_ADDR_UNSPEC, len, 0, &in_a), 0);
    ASSERT_EQ(fi_trecv(b.ep(), in_b.data(), len, nullptr, FI_ADDR_UNSPEC, len, 0, &in_b), 0);
    tsend(a, out_a.data(), len, b, len, &out_a);
    tsend(b, out_b.data(), len, a, len, &out_b);
    std::map<void*, fi_addr_t> src_a, src_b;
    auto ga = reap(a, 2, &src_a);
    auto gb = reap(b, 2, &src_b);
    ASSERT_EQ(ga.count(&in_a), 1u);
    ASSERT_EQ(gb.count(&in_b), 1u);
    EXPECT_EQ(ga[&in_a].len, len);
    EXPECT_EQ(ga[&in_a].tag, len);
    EXPECT_EQ(ga[&in_a].flags, FI_RECV | FI_TAGGED);
    EXPECT_EQ(src_a[&in_a], b.addr());
    EXPECT_EQ(src_b[&in_b], a.addr());
    EXPECT_EQ(gb[&out_b].flags, FI_SEND | FI_TAGGED);
    EXPECT_EQ(std::memcmp(in_a.data(), out_b.data(), len), 0) << len;
    EXPECT_EQ(std::memcmp(in_b.data(), out_a.data(), len), 0) << len;
    EXPECT_EQ(in_a[len], 0) << "past the message";
  }
  // Long messages went by RDMA Read.
  EXPECT_GT(d_->counters().read_requests_tx, 0u);
}

TEST_F(RdmMsg, UnexpectedMessagesWaitForTheirReceives) {
  Peer& a = add();
  Peer& b = add();
  // More messages than the receiver has buffers for, eager and rendezvous,
  // all sent before any receive is posted (within the bytes a connection
  // keeps for them, FI_SOFTRDMA_UNEXPECTED_BYTES).
  constexpr size_t kCount = 150;
  std::vector<std::vector<uint8_t>> out(kCount), in(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    const size_t len = i % 7 == 0 ? 100000 + i : 1 + (i * 37) % 2048;
    out[i].resize(len);
    in[i].resize(len);
    fill(out[i].data(), len, i);
    ASSERT_NO_FATAL_FAILURE(tsend(a, out[i].data(), len, b, i, &out[i]));
  }
  // Received newest first: each finds its message among those kept.
  for (size_t i = kCount; i-- > 0;)
    ASSERT_EQ(fi_trecv(b.ep(), in[i].data(), in[i].size(), nullptr, FI_ADDR_UNSPEC, i, 0, &in[i]),
              0);
  auto got = reap(b, kCount);
  reap(a, kCount);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(got[&in[i]].tag, i);
    ASSERT_EQ(in[i], out[i]) << i;
  }
}

TEST_F(RdmMsg, TagsIgnoreBitsAndDirectedReceives) {
  Peer& a = add();
  Peer& b = add();
  Peer& t = add();
  uint64_t from_b = 0, any = 0, untagged = 0;
  // A directed receive takes only b's message; a wildcard one takes a's.
  ASSERT_EQ(fi_trecv(t.ep(), &from_b, 8, nullptr, b.addr(), 0x1200, 0xff, &from_b), 0);
  ASSERT_EQ(fi_trecv(t.ep(), &any, 8, nullptr, FI_ADDR_UNSPEC, 0x1200, 0xff, &any), 0);
  ASSERT_EQ(fi_recv(t.ep(), &untagged, 8, nullptr, FI_ADDR_UNSPEC, &untagged), 0);
  uint64_t va = 0xaaaa, vb = 0xbbbb, vu = 0xcccc, vx = 0xdddd;
  tsend(a, &va, 8, t, 0x1234, &va);
  // A tag outside the ignore bits waits for its own receive.
  tsend(a, &vx, 8, t, 0x9934, &vx);
  tsend(b, &vb, 8, t, 0x12ff, &vb);
  ssize_t rc;
  ASSERT_TRUE(poll_until([&] {
    rc = fi_send(a.ep(), &vu, 8, nullptr, t.addr(), &vu);
    if (rc == -FI_EAGAIN) progress();
    return rc != -FI_EAGAIN;
  }));
  ASSERT_EQ(rc, 0);
  auto got = reap(t, 3);
  EXPECT_EQ(any, va);
  EXPECT_EQ(got[&any].tag, 0x1234u);
  EXPECT_EQ(from_b, vb);
  EXPECT_EQ(got[&from_b].tag, 0x12ffu);
  EXPECT_EQ(untagged, vu);
  EXPECT_EQ(got[&untagged].flags, FI_RECV | FI_MSG);
  uint64_t x = 0;
  ASSERT_EQ(fi_trecv(t.ep(), &x, 8, nullptr, FI_ADDR_UNSPEC, 0x9934, 0, &x), 0);
  reap(t, 1);
  EXPECT_EQ(x, vx);
}

TEST_F(RdmMsg, PeekClaimDiscard) {
  Peer& a = add();
  Peer& b = add();
  auto tmsg = [&](void* buf, size_t len, uint64_t tag, uint64_t flags, void* ctx) {
    iovec v{buf, len};
    fi_msg_tagged m{};
    m.msg_iov = &v;
    m.iov_count = 1;
    m.addr = FI_ADDR_UNSPEC;
    m.tag = tag;
    m.context = ctx;
    return fi_trecvmsg(b.ep(), &m, flags);
  };
  Entry x;
  fi_cq_tagged_entry& e = x.e;
  fi_cq_err_entry& err = x.err;
  // Nothing there: FI_ENOMSG.
  fi_context ctx1{};
  ASSERT_EQ(tmsg(nullptr, 0, 7, FI_PEEK, &ctx1), 0);
  ASSERT_TRUE(next(b, &x));
  EXPECT_EQ(err.err, FI_ENOMSG);
  EXPECT_EQ(err.op_context, &ctx1);
  char m7[] = "seven", m8[] = "eight";
  tsend(a, m7, sizeof(m7), b, 7, m7);
  tsend(a, m8, sizeof(m8), b, 8, m8);
  // Peek until the message is there; it stays.
  fi_context ctx2{};
  ASSERT_TRUE(poll_until([&] {
    EXPECT_EQ(tmsg(nullptr, 0, 7, FI_PEEK | FI_CLAIM, &ctx2), 0);
    EXPECT_TRUE(next(b, &x));
    return err.err == 0;
  }));
  EXPECT_EQ(e.len, sizeof(m7));
  EXPECT_EQ(e.tag, 7u);
  // Claimed: a plain receive does not take it, FI_CLAIM with the context does.
  char other[16] = {};
  ASSERT_EQ(fi_trecv(b.ep(), other, sizeof(other), nullptr, FI_ADDR_UNSPEC, 7, 0, other), 0);
  char got[16] = {};
  ASSERT_EQ(tmsg(got, sizeof(got), 7, FI_CLAIM, &ctx2), 0);
  ASSERT_TRUE(next(b, &x));
  ASSERT_EQ(err.err, 0);
  EXPECT_EQ(e.op_context, &ctx2);
  EXPECT_STREQ(got, m7);
  // Discarded: gone, and a later receive for its tag waits.
  fi_context ctx3{};
  ASSERT_EQ(tmsg(nullptr, 0, 8, FI_PEEK | FI_DISCARD, &ctx3), 0);
  ASSERT_TRUE(next(b, &x));
  ASSERT_EQ(err.err, 0);
  fi_context ctx4{};
  ASSERT_EQ(tmsg(nullptr, 0, 8, FI_PEEK, &ctx4), 0);
  ASSERT_TRUE(next(b, &x));
  EXPECT_EQ(err.err, FI_ENOMSG);
  reap(a, 2);  // delivery-complete: once claimed and taken, or discarded
  // The plain receive for tag 7 takes the next such message.
  tsend(a, m8, sizeof(m8), b, 7, m8);
  auto r = reap(b, 1);
  EXPECT_EQ(r.count(other), 1u);
  EXPECT_STREQ(other, m8);
  reap(a, 1);
}

TEST_F(RdmMsg, CancelAReceive) {
  Peer& a = add();
  Peer& b = add();
  uint64_t x = 0, y = 0, v = 42;
  ASSERT_EQ(fi_trecv(b.ep(), &x, 8, nullptr, FI_ADDR_UNSPEC, 5, 0, &x), 0);
  ASSERT_EQ(fi_trecv(b.ep(), &y, 8, nullptr, FI_ADDR_UNSPEC, 5, 0, &y), 0);
  ASSERT_EQ(fi_cancel(&b.ep()->fid, &x), 0);
  EXPECT_EQ(fi_cancel(&b.ep()->fid, &x), -FI_ENOENT);
  Entry e;
  ASSERT_TRUE(next(b, &e));
  EXPECT_EQ(e.err.err, FI_ECANCELED);
  EXPECT_EQ(e.err.op_context, &x);
  // The message goes to the receive still posted.
  tsend(a, &v, 8, b, 5, &v);
  auto got = reap(b, 1);
  EXPECT_EQ(got.count(&y), 1u);
  EXPECT_EQ(y, 42u);
  EXPECT_EQ(x, 0u);
}

TEST_F(RdmMsg, RemoteCqDataInjectAndTruncation) {
  Peer& a = add();
  Peer& b = add();
  uint64_t in[8] = {};
  ASSERT_EQ(fi_trecv(b.ep(), in, sizeof(in), nullptr, FI_ADDR_UNSPEC, 1, 0, in), 0);
  uint64_t out[8];
  fill(out, sizeof(out), 5);
  const uint64_t want[8] = {out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7]};
  ssize_t rc;
  ASSERT_TRUE(poll_until([&] {
    rc = fi_tinjectdata(a.ep(), out, sizeof(out), 0xfeedULL, b.addr(), 1);
    progress();
    return rc != -FI_EAGAIN;
  }));
  ASSERT_EQ(rc, 0);
  std::memset(out, 0, sizeof(out));  // inject: the buffer is free at once
  auto got = reap(b, 1);
  EXPECT_EQ(got[in].flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
  EXPECT_EQ(got[in].data, 0xfeedu);
  EXPECT_EQ(std::memcmp(in, want, sizeof(in)), 0);
  progress();
  EXPECT_TRUE(stash_[&a].empty() && cq_quiet(a.cq(), 200)) << "inject completed to the CQ";
  // Longer than the receive, eager and rendezvous: FI_ETRUNC with the excess.
  for (size_t len : {size_t{100}, size_t{200000}}) {
    std::vector<uint8_t> big(len), small(10);
    fill(big.data(), len, len);
    ASSERT_EQ(fi_trecv(b.ep(), small.data(), small.size(), nullptr, FI_ADDR_UNSPEC, 2, 0, &small),
              0);
    tsend(a, big.data(), len, b, 2, &big);
    Entry x;
    ASSERT_TRUE(next(b, &x));
    EXPECT_EQ(x.err.err, FI_ETRUNC);
    EXPECT_EQ(x.err.olen, len - 10);
    EXPECT_EQ(std::memcmp(small.data(), big.data(), 10), 0);
    reap(a, 1);
  }
}

TEST_F(RdmMsg, FastSenderSlowReceiver) {
  Peer& a = add();
  Peer& b = add();
  // 20,000 messages, the receiver posting 50 at a time between naps: the
  // sender runs ahead, the messages wait for their receives, none is lost
  // and the connection stays.
  constexpr size_t kCount = 20000, kBatch = 50;
  std::vector<uint32_t> in(kCount, 0);
  size_t sent = 0, posted = 0, received = 0, sends_done = 0;
  uint32_t v = 0;
  while (received < kCount) {
    while (sent < kCount) {
      v = static_cast<uint32_t>(sent);
      ssize_t rc = fi_tinject(a.ep(), &v, sizeof(v), b.addr(), sent);
      if (rc == -FI_EAGAIN) break;
      ASSERT_EQ(rc, 0);
      ++sent;
    }
    if (posted == received && posted < kCount) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (size_t i = 0; i < kBatch && posted < kCount; ++i, ++posted)
        ASSERT_EQ(fi_trecv(b.ep(), &in[posted], 4, nullptr, FI_ADDR_UNSPEC, posted, 0,
                           &in[posted]),
                  0);
    }
    fi_cq_tagged_entry e[16];
    ssize_t n = fi_cq_read(b.cq(), e, 16);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(b.cq(), &err, 0);
      FAIL() << "receiver error " << fi_strerror(err.err);
    }
    received += n > 0 ? static_cast<size_t>(n) : 0;
    n = fi_cq_read(a.cq(), e, 16);
    ASSERT_NE(n, -FI_EAVAIL) << "sender error";
    sends_done += n > 0 ? static_cast<size_t>(n) : 0;
  }
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(in[i], i);
  EXPECT_EQ(sends_done, 0u) << "injects report nothing";
}

// The endpoint's own work (its buffers, credits, control messages) takes no
// room in the application's CQ: a CQ of 8 entries, one of them unread,
// while 64 more messages arrive (Open MPI's MTL opens CQs of 100).
TEST_F(RdmMsg, SmallCqs) {
  Peer& a = add(8);
  Peer& b = add(8);
  constexpr size_t kCount = 64;
  uint64_t first = 0, one = 1;
  ASSERT_EQ(fi_trecv(b.ep(), &first, 8, nullptr, FI_ADDR_UNSPEC, 100, 0, &first), 0);
  std::vector<uint64_t> out(kCount), in(kCount, 0);
  // Only a's CQ is read: the process's one engine progresses, b's entry waits.
  auto send = [&](const uint64_t* v, uint64_t tag) {
    fi_cq_tagged_entry e;
    ssize_t rc;
    while ((rc = fi_tsend(a.ep(), v, 8, nullptr, b.addr(), tag, nullptr)) == -FI_EAGAIN)
      ASSERT_NE(fi_cq_read(a.cq(), &e, 1), -FI_EAVAIL);
    ASSERT_EQ(rc, 0);
    ASSERT_NE(fi_cq_read(a.cq(), &e, 1), -FI_EAVAIL);
  };
  ASSERT_NO_FATAL_FAILURE(send(&one, 100));
  for (size_t i = 0; i < kCount; ++i) {
    out[i] = i * 3;
    ASSERT_NO_FATAL_FAILURE(send(&out[i], 200 + i));
  }
  fi_cq_tagged_entry e;
  for (int i = 0; i < 100; ++i) fi_cq_read(a.cq(), &e, 1);
  for (size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(fi_trecv(b.ep(), &in[i], 8, nullptr, FI_ADDR_UNSPEC, 200 + i, 0, &in[i]), 0);
  auto got = reap(b, kCount + 1);
  ASSERT_EQ(got.size(), kCount + 1);
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(in, out);
}

TEST_F(RdmMsg, SixtyFourSendersToOneEndpoint) {
  Peer& t = add();
  constexpr size_t kPeers = 64, kLen = 20000;  // rendezvous
  for (size_t i = 0; i < kPeers; ++i) add();
  std::vector<std::vector<uint8_t>> in(kPeers, std::vector<uint8_t>(kLen)),
      out(kPeers, std::vector<uint8_t>(kLen));
  for (size_t i = 0; i < kPeers; ++i) {
    ASSERT_EQ(fi_recv(t.ep(), in[i].data(), kLen, nullptr, peers_[1 + i]->addr(), &in[i]), 0);
  }
  for (size_t i = 0; i < kPeers; ++i) {
    fill(out[i].data(), kLen, i);
    Peer& p = *peers_[1 + i];
    ssize_t rc;
    ASSERT_TRUE(poll_until([&] {
      rc = fi_send(p.ep(), out[i].data(), kLen, nullptr, t.addr(), &out[i]);
      if (rc == -FI_EAGAIN) progress();
      return rc != -FI_EAGAIN;
    }));
    ASSERT_EQ(rc, 0);
  }
  std::map<void*, fi_addr_t> src;
  auto got = reap(t, kPeers, &src);
  for (size_t i = 0; i < kPeers; ++i) {
    EXPECT_EQ(src[&in[i]], peers_[1 + i]->addr());
    EXPECT_EQ(in[i], out[i]) << i;
  }
  for (size_t i = 0; i < kPeers; ++i) reap(*peers_[1 + i], 1);
}

// fi_writedata: the target's CQ reports each write's CQ data and sender once
// the data is placed, more writes than the target has buffers (credits come
// back), and a message after them still matches its receive.
class RdmWriteData : public RdmMsg {
 protected:
  RdmWriteData() { caps_ = kCaps | FI_RMA; }
};

TEST_F(RdmWriteData, TheTargetSeesDataAndSenderOncePlaced) {
  Peer& a = add();
  Peer& b = add();
  constexpr size_t kWrites = 200, kLen = 64;
  std::vector<uint8_t> src(kWrites * kLen);
  fill(src.data(), src.size(), 11);
  for (size_t i = 0; i < kWrites; ++i) {
    ssize_t rc;
    ASSERT_TRUE(poll_until([&] {
      rc = fi_writedata(a.ep(), &src[i * kLen], kLen, nullptr, 0x1000 + i, b.addr(),
                        b.base() + i * kLen, b.key(), &src[i * kLen]);
      if (rc == -FI_EAGAIN) progress();
      return rc != -FI_EAGAIN;
    }));
    ASSERT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc));
  }
  std::set<uint64_t> seen;
  for (size_t i = 0; i < kWrites; ++i) {
    Entry x;
    ASSERT_TRUE(next(b, &x)) << "after " << i;
    ASSERT_EQ(x.err.err, 0) << fi_strerror(x.err.err);
    EXPECT_EQ(x.e.flags, FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA);
    EXPECT_EQ(x.src, a.addr());
    const uint64_t k = x.e.data - 0x1000;
    ASSERT_LT(k, kWrites);
    EXPECT_TRUE(seen.insert(k).second) << "twice: " << k;
    EXPECT_EQ(std::memcmp(b.at(k * kLen), &src[k * kLen], kLen), 0) << "not placed: " << k;
  }
  reap(a, kWrites);
  one_message(a, b, 77);
}

// FI_DELIVERY_COMPLETE (the hints' op_flags): a send completes once its
// message is in the receive it matched, eager or rendezvous, not when the
// receiving endpoint has it; a discarded one completes too.
TEST_F(RdmMsg, DeliveryCompleteWaitsForTheReceive) {
  Peer& a = add();
  Peer& b = add();
  for (size_t len : {size_t{8}, size_t{100000}}) {
    std::vector<uint8_t> out(len), in(len);
    fill(out.data(), len, len);
    tsend(a, out.data(), len, b, 5, &out);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < until) progress();
    EXPECT_TRUE(stash_[&a].empty()) << len << " B: completed before a receive took it";
    ASSERT_EQ(fi_trecv(b.ep(), in.data(), len, nullptr, FI_ADDR_UNSPEC, 5, 0, &in), 0);
    reap(b, 1);
    reap(a, 1);
    EXPECT_EQ(in, out);
  }
  uint64_t v = 3;
  tsend(a, &v, sizeof(v), b, 6, &v);
  fi_msg_tagged m{};
  m.addr = FI_ADDR_UNSPEC;
  m.tag = 6;
  m.context = &m;
  ASSERT_TRUE(poll_until([&] {  // the message is there to be discarded
    progress();
    return fi_trecvmsg(b.ep(), &m, FI_PEEK | FI_DISCARD) == 0 && [&] {
      Entry x;
      return next(b, &x) && x.err.err == 0;
    }();
  }));
  reap(a, 1);
}

// Open MPI puts a peer in its AV when it first talks to it: a message can
// arrive before its sender is in the receiver's AV. A directed receive
// posted once it is takes the message, which names its sender.
TEST_F(RdmMsg, AMessageFromASenderNotYetInTheAv) {
  Peer& a = add();
  Domain other(kCaps);  // b's own AV, where a is not yet
  Peer b(other);
  sockaddr_in name{};
  size_t len = sizeof(name);
  fi_addr_t b_at_a = FI_ADDR_NOTAVAIL, a_at_b = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_getname(&b.ep()->fid, &name, &len), 0);
  ASSERT_EQ(fi_av_insert(d_->av(), &name, 1, &b_at_a, 0, nullptr), 1);
  uint64_t out = 0x1234, in = 0;
  fi_cq_tagged_entry e{};
  fi_addr_t src = FI_ADDR_NOTAVAIL;
  ssize_t rc;
  ASSERT_TRUE(poll_until([&] {
    rc = fi_tsend(a.ep(), &out, sizeof(out), nullptr, b_at_a, 9, &out);
    fi_cq_read(b.cq(), &e, 1);
    progress();
    return rc != -FI_EAGAIN;
  }));
  ASSERT_EQ(rc, 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {  // b takes the message in
    fi_cq_read(b.cq(), &e, 1);
    progress();
  }
  len = sizeof(name);
  ASSERT_EQ(fi_getname(&a.ep()->fid, &name, &len), 0);
  ASSERT_EQ(fi_av_insert(other.av(), &name, 1, &a_at_b, 0, nullptr), 1);
  ASSERT_EQ(fi_trecv(b.ep(), &in, sizeof(in), nullptr, a_at_b, 9, 0, &in), 0);
  ASSERT_TRUE(poll_until([&] { return fi_cq_readfrom(b.cq(), &e, 1, &src) == 1; }));
  EXPECT_EQ(e.op_context, &in);
  EXPECT_EQ(src, a_at_b);
  EXPECT_EQ(in, out);
  reap(a, 1);
}

// FI_MULTI_RECV: one buffer takes message after message, eager and
// rendezvous, some sent before it was posted, each completing at its own
// place in the buffer with its bytes; the message that leaves less than
// FI_OPT_MIN_MULTI_RECV retires the buffer, the last completion says
// FI_MULTI_RECV, and the next message goes to the next receive.
class RdmMultiRecv : public RdmMsg {
 protected:
  RdmMultiRecv() { caps_ = kCaps | FI_MULTI_RECV; }
  void send(Peer& from, const void* buf, size_t len, Peer& to, void* ctx) {
    ssize_t rc;
    ASSERT_TRUE(poll_until([&] {
      rc = fi_send(from.ep(), buf, len, nullptr, to.addr(), ctx);
      if (rc == -FI_EAGAIN) progress();
      return rc != -FI_EAGAIN;
    }));
    ASSERT_EQ(rc, 0) << fi_strerror(static_cast<int>(-rc));
  }
};

TEST_F(RdmMultiRecv, OneBufferManyMessages) {
  Peer& a = add();
  Peer& b = add();
  size_t min = 4096, got = 0, len = sizeof(got);
  ASSERT_EQ(fi_setopt(&b.ep()->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)), 0);
  ASSERT_EQ(fi_getopt(&b.ep()->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &len), 0);
  EXPECT_EQ(got, min);
  // 36150 bytes in all: 3850 of the 40000 are left after the last.
  const std::vector<size_t> sizes = {100, 0, 3000, 20000, 50, 7000, 6000};
  std::vector<std::vector<uint8_t>> out;
  std::map<std::pair<size_t, size_t>, size_t> at;  // (offset in the buffer, length) -> message
  size_t off = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.emplace_back(sizes[i]);
    fill(out[i].data(), sizes[i], 40 + i);
    at[{off, sizes[i]}] = i;
    off += sizes[i];
  }
  std::vector<uint8_t> buf(40000), after(64);
  send(a, out[0].data(), sizes[0], b, &out[0]);  // before the buffer is posted
  send(a, out[1].data(), sizes[1], b, &out[1]);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) progress();  // both arrive
  iovec v{buf.data(), buf.size()};
  fi_msg m{};
  m.msg_iov = &v;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.context = &buf;
  ASSERT_EQ(fi_recvmsg(b.ep(), &m, FI_MULTI_RECV), 0);
  for (size_t i = 2; i < sizes.size(); ++i) send(a, out[i].data(), sizes[i], b, &out[i]);
  std::set<size_t> seen;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Entry x;
    ASSERT_TRUE(next(b, &x)) << "after " << k;
    ASSERT_EQ(x.err.err, 0) << fi_strerror(x.err.err);
    EXPECT_EQ(x.e.op_context, &buf);
    const size_t o = static_cast<uint8_t*>(x.e.buf) - buf.data();
    ASSERT_TRUE(at.count({o, x.e.len})) << "a completion at offset " << o << ", " << x.e.len;
    const size_t i = at[{o, x.e.len}];
    EXPECT_TRUE(seen.insert(i).second) << "twice: " << i;
    EXPECT_EQ(std::memcmp(buf.data() + o, out[i].data(), sizes[i]), 0) << "message " << i;
    const bool last = k + 1 == sizes.size();
    EXPECT_EQ(x.e.flags, FI_RECV | FI_MSG | (last ? FI_MULTI_RECV : 0)) << k;
  }
  reap(a, sizes.size());
  ASSERT_EQ(fi_recv(b.ep(), after.data(), after.size(), nullptr, FI_ADDR_UNSPEC, &after), 0);
  send(a, out[0].data(), sizes[0] / 2, b, &out[0]);
  auto last = reap(b, 1);
  EXPECT_EQ(last[&after].len, sizes[0] / 2);
  EXPECT_EQ(std::memcmp(after.data(), out[0].data(), sizes[0] / 2), 0);
  reap(a, 1);
}

// With FI_OPT_MIN_MULTI_RECV 0 a buffer is retired once it is full.
TEST_F(RdmMultiRecv, MinimumZeroRetiresAFullBuffer) {
  Peer& a = add();
  Peer& b = add();
  size_t min = 0;
  ASSERT_EQ(fi_setopt(&b.ep()->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)), 0);
  uint64_t buf[2] = {}, out[2] = {11, 22};
  iovec v{buf, sizeof(buf)};
  fi_msg m{};
  m.msg_iov = &v;
  m.iov_count = 1;
  m.addr = FI_ADDR_UNSPEC;
  m.context = buf;
  ASSERT_EQ(fi_recvmsg(b.ep(), &m, FI_MULTI_RECV), 0);
  send(a, &out[0], 8, b, &out[0]);
  send(a, &out[1], 8, b, &out[1]);
  for (int k = 0; k < 2; ++k) {
    Entry x;
    ASSERT_TRUE(next(b, &x));
    ASSERT_EQ(x.err.err, 0);
    EXPECT_EQ(x.e.flags, FI_RECV | FI_MSG | (k == 1 ? FI_MULTI_RECV : 0)) << k;
  }
  EXPECT_EQ(buf[0], 11u);
  EXPECT_EQ(buf[1], 22u);
  reap(a, 2);
}

// The protocol's bytes (prov/rdm_wire.h) as a peer that breaks it writes
// them: a hello naming 127.0.0.1:port, and a 40-byte message header.
std::vector<uint8_t> hello(uint16_t port, uint32_t credits) {
  std::vector<uint8_t> h = {'S', 'R', 'D', 'M', 1, 0, uint8_t(port >> 8), uint8_t(port), 127, 0,
                            0, 1};
  for (int i = 3; i >= 0; --i) h.push_back(uint8_t(credits >> (8 * i)));
  return h;
}
std::vector<uint8_t> header(uint8_t op, uint32_t credits, uint64_t msg_id) {
  std::vector<uint8_t> m(40, 0);
  m[0] = 1;
  m[1] = op;
  for (int i = 0; i < 4; ++i) m[4 + i] = uint8_t(credits >> (8 * (3 - i)));
  for (int i = 0; i < 8; ++i) m[24 + i] = uint8_t(msg_id >> (8 * (7 - i)));
  return m;
}

// A peer that connects with a valid hello and then sends what the protocol
// forbids is disconnected (it sees FI_SHUTDOWN); the endpoint goes on
// serving its other peers.
TEST_F(RdmMsg, APeerThatBreaksTheProtocolIsDisconnected) {
  Peer& t = add();
  Peer& other = add();
  sockaddr_in name{};
  size_t len = sizeof(name);
  ASSERT_EQ(fi_getname(&t.ep()->fid, &name, &len), 0);
  const std::vector<std::pair<const char*, std::vector<uint8_t>>> broken = {
      {"unknown op", header(9, 0, 0)},
      {"shorter than its header", {1, 5, 0}},
      {"more credits than it could have given", header(5, 33, 0)},
      {"a finish for a message it was not sent", header(3, 0, 12345)},
  };
  Fabric f;
  ASSERT_NE(f.domain(), nullptr);
  for (const auto& [what, bytes] : broken) {
    SCOPED_TRACE(what);
    auto raw = f.open_ep(f.info());
    const auto h = hello(1, 0);
    ASSERT_EQ(fi_connect(raw->ep, &name, h.data(), h.size()), 0);
    uint32_t event = 0;
    fi_eq_cm_entry cm{};
    ASSERT_TRUE(poll_until([&] {
      progress();
      return fi_eq_read(raw->eq, &event, &cm, sizeof(cm), 0) > 0;
    }));
    ASSERT_EQ(event, FI_CONNECTED);
    ASSERT_EQ(fi_send(raw->ep, bytes.data(), bytes.size(), nullptr, 0, nullptr), 0);
    EXPECT_TRUE(poll_until([&] {
      progress();
      fi_cq_data_entry e;
      fi_cq_read(raw->tx, &e, 1);
      return fi_eq_read(raw->eq, &event, &cm, sizeof(cm), 0) > 0;
    }));
    EXPECT_EQ(event, FI_SHUTDOWN);
  }
  one_message(other, t, 0x5A5A);  // the others are unharmed
}

}  // namespace
}  // namespace fit
