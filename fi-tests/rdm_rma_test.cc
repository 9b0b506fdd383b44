// The native FI_EP_RDM endpoint (provider "softrdma", FI_RMA | FI_ATOMIC):
// connections made at the first operation to an AV entry, both directions
// at once, to itself, to 64 peers; every byte and atomic result checked at
// the target; errors for bad keys, unknown addresses and dead peers, with
// the endpoint's other peers unharmed and the failed one reachable again.
#include <algorithm>
#include <cstring>
#include <set>

#include "fi-tests/rdm_peers.h"

namespace fit {
namespace {

class RdmRma : public RdmFixture {
 protected:
  RdmRma() : RdmFixture(FI_RMA | FI_ATOMIC) {}
  // len bytes (seeded) from a into b's window at off; then read back into a fresh buffer.
  void write_and_read(Peer& a, Peer& b, size_t off, size_t len, uint64_t seed) {
    std::vector<uint8_t> src(len), back(len);
    fill(src.data(), len, seed);
    ASSERT_EQ(fi_write(a.ep(), src.data(), len, nullptr, b.addr(), b.base() + off, b.key(), &src),
              0);
    ASSERT_TRUE(a.ok(&src));
    // FI_DELIVERY_COMPLETE (the hints' op_flags): placed once completed.
    ASSERT_EQ(std::memcmp(b.at(off), src.data(), len), 0) << "write of " << len;
    ASSERT_EQ(fi_read(a.ep(), back.data(), len, nullptr, b.addr(), b.base() + off, b.key(), &back),
              0);
    ASSERT_TRUE(a.ok(&back));
    ASSERT_EQ(back, src) << "read of " << len;
  }
};

TEST_F(RdmRma, GetinfoOffersWhatIsAskedFor) {
  const fi_info* i = d_->info();
  EXPECT_STREQ(i->fabric_attr->prov_name, kProv);
  EXPECT_EQ(i->ep_attr->type, FI_EP_RDM);
  EXPECT_EQ(i->caps & (FI_RMA | FI_ATOMIC), FI_RMA | FI_ATOMIC);
  EXPECT_EQ(i->caps & (FI_MSG | FI_TAGGED), 0u);
  EXPECT_EQ(i->domain_attr->cq_data_size, 0u);
  EXPECT_TRUE(i->tx_attr->op_flags & FI_DELIVERY_COMPLETE);
  // Messages too: offered, with 8 bytes of remote CQ data; ofi_rxm's
  // endpoint is still there.
  Info h = native_rdm_hints(FI_MSG | FI_RMA);
  Info list;
  ASSERT_EQ(getinfo(h.get(), &list), 0);
  const fi_info* n = native(list.get());
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->caps & (FI_MSG | FI_RMA | FI_TAGGED), FI_MSG | FI_RMA);
  EXPECT_EQ(n->domain_attr->cq_data_size, 8u);
  bool rxm = false;
  for (const fi_info* x = list.get(); x; x = x->next)
    rxm |= std::strcmp(x->fabric_attr->prov_name, kRxmProv) == 0;
  EXPECT_TRUE(rxm);
}

TEST_F(RdmRma, WriteReadEverySizeBothWaysAtOnce) {
  Peer& a = add();
  Peer& b = add();
  // Both start a connection before either makes progress.
  uint64_t x = 0x1111, y = 0x2222;
  ASSERT_EQ(fi_write(a.ep(), &x, 8, nullptr, b.addr(), b.base(), b.key(), &x), 0);
  ASSERT_EQ(fi_write(b.ep(), &y, 8, nullptr, a.addr(), a.base(), a.key(), &y), 0);
  ASSERT_TRUE(a.ok(&x));
  ASSERT_TRUE(b.ok(&y));
  EXPECT_EQ(b.word(0), 0x1111u);
  EXPECT_EQ(a.word(0), 0x2222u);
  uint64_t seed = 1;
  const softrdma_counters before = d_->counters();
  const std::vector<size_t> sizes = {0, 1, 4095, 65536, kWindow - 64};
  for (size_t len : sizes) {
    write_and_read(a, b, 64, len, seed++);
    write_and_read(b, a, 64, len, seed++);
  }
  // On the wire as RDMA Writes and Read Requests, no Sends; each Write
  // with FI_DELIVERY_COMPLETE is followed by a zero-length Read.
  const softrdma_counters after = d_->counters();
  const uint64_t ops = 2 * sizes.size();
  EXPECT_EQ(after.writes_tx - before.writes_tx, ops);
  EXPECT_EQ(after.read_requests_tx - before.read_requests_tx, 2 * ops);
  EXPECT_EQ(after.sends_tx - before.sends_tx, 0u);
}

TEST_F(RdmRma, ToItself) {
  Peer& a = add();
  write_and_read(a, a, 128, 100000, 7);
  uint64_t add1 = 5, old = 0;
  ASSERT_EQ(fi_fetch_atomic(a.ep(), &add1, 1, nullptr, &old, nullptr, a.addr(), a.base(), a.key(),
                            FI_UINT64, FI_SUM, &old),
            0);
  ASSERT_TRUE(a.ok(&old));
  EXPECT_EQ(a.word(0), old + 5);
}

TEST_F(RdmRma, EveryAtomicWithContention) {
  constexpr int kInitiators = 6, kEach = 50;
  Peer& t = add();
  for (int i = 0; i < kInitiators; ++i) add();
  // Fetch-adds from every initiator, interleaved: each old value is seen once.
  std::set<uint64_t> seen;
  std::vector<uint64_t> olds(kInitiators);
  const softrdma_counters before = d_->counters();
  for (int k = 0; k < kEach; ++k) {
    for (int i = 0; i < kInitiators; ++i) {
      Peer& p = *peers_[1 + i];
      uint64_t one = 1;
      ASSERT_EQ(fi_fetch_atomic(p.ep(), &one, 1, nullptr, &olds[i], nullptr, t.addr(), t.base(),
                                t.key(), FI_UINT64, FI_SUM, &olds[i]),
                0);
    }
    for (int i = 0; i < kInitiators; ++i) {
      ASSERT_TRUE(peers_[1 + i]->ok(&olds[i]));
      seen.insert(olds[i]);
    }
  }
  EXPECT_EQ(t.word(0), uint64_t{kInitiators * kEach});
  EXPECT_EQ(seen.size(), size_t{kInitiators * kEach});
  EXPECT_EQ(*seen.rbegin(), uint64_t{kInitiators * kEach - 1});
  EXPECT_EQ(d_->counters().atomic_requests_tx - before.atomic_requests_tx,
            uint64_t{kInitiators * kEach});

  // Every form on both widths, one initiator after another on one word.
  Peer& a = *peers_[1];
  Peer& b = *peers_[2];
  uint64_t v64 = 10, r64 = 0, c64 = 0;
  ASSERT_EQ(fi_atomic(a.ep(), &v64, 1, nullptr, t.addr(), t.base() + 8, t.key(), FI_UINT64,
                      FI_ATOMIC_WRITE, &v64),
            0);
  ASSERT_TRUE(a.ok(&v64));
  EXPECT_EQ(t.word(8), 10u);
  c64 = 10;
  v64 = 11;
  ASSERT_EQ(fi_compare_atomic(b.ep(), &v64, 1, nullptr, &c64, nullptr, &r64, nullptr, t.addr(),
                              t.base() + 8, t.key(), FI_UINT64, FI_CSWAP, &r64),
            0);
  ASSERT_TRUE(b.ok(&r64));
  EXPECT_EQ(r64, 10u);
  EXPECT_EQ(t.word(8), 11u);
  uint32_t v32 = 0xFFFFFFFF, r32 = 0;
  ASSERT_EQ(fi_fetch_atomic(a.ep(), &v32, 1, nullptr, &r32, nullptr, t.addr(), t.base() + 16,
                            t.key(), FI_UINT32, FI_ATOMIC_WRITE, &r32),
            0);
  ASSERT_TRUE(a.ok(&r32));
  v32 = 2;
  ASSERT_EQ(fi_fetch_atomic(b.ep(), &v32, 1, nullptr, &r32, nullptr, t.addr(), t.base() + 16,
                            t.key(), FI_UINT32, FI_SUM, &r32),
            0);
  ASSERT_TRUE(b.ok(&r32));
  EXPECT_EQ(r32, 0xFFFFFFFFu);
  EXPECT_EQ(t.word(16), 1u);  // wrapped within its half: the high half stays 0
  uint32_t c32 = 1;
  v32 = 77;
  ASSERT_EQ(fi_compare_atomic(a.ep(), &v32, 1, nullptr, &c32, nullptr, &r32, nullptr, t.addr(),
                              t.base() + 20, t.key(), FI_UINT32, FI_CSWAP, &r32),
            0);
  ASSERT_TRUE(a.ok(&r32));
  EXPECT_EQ(r32, 0u);           // the high half was 0: no match
  EXPECT_EQ(t.word(16), 1u);
}

TEST_F(RdmRma, SixtyFourPeers) {
  constexpr int kPeers = 64;
  Peer& t = add();
  for (int i = 0; i < kPeers; ++i) add();
  // Each peer writes 1 KiB into its own slot of t's window, and t writes
  // into each peer's window: 128 connections at the target's endpoint.
  std::vector<std::vector<uint8_t>> src(kPeers, std::vector<uint8_t>(1024));
  std::vector<std::vector<uint8_t>> back(kPeers, std::vector<uint8_t>(1024));
  for (int i = 0; i < kPeers; ++i) {
    Peer& p = *peers_[1 + i];
    fill(src[i].data(), 1024, 100 + i);
    fill(back[i].data(), 1024, 500 + i);
    ASSERT_EQ(fi_write(p.ep(), src[i].data(), 1024, nullptr, t.addr(), t.base() + 1024 * i,
                       t.key(), &src[i]),
              0);
    ASSERT_EQ(fi_write(t.ep(), back[i].data(), 1024, nullptr, p.addr(), p.base(), p.key(),
                       &back[i]),
              0);
  }
  for (int i = 0; i < kPeers; ++i) ASSERT_TRUE(peers_[1 + i]->ok(&src[i]));
  std::set<void*> done;
  for (int i = 0; i < kPeers; ++i) {
    void* ctx = nullptr;
    ASSERT_TRUE(t.done(&ctx));
    done.insert(ctx);
  }
  EXPECT_EQ(done.size(), size_t{kPeers});
  for (int i = 0; i < kPeers; ++i) {
    EXPECT_EQ(std::memcmp(t.at(1024 * i), src[i].data(), 1024), 0) << "peer " << i;
    EXPECT_EQ(std::memcmp(peers_[1 + i]->at(0), back[i].data(), 1024), 0) << "peer " << i;
  }
}

TEST_F(RdmRma, BadKeyFailsThatOperationOnly) {
  Peer& a = add();
  Peer& b = add();
  Peer& c = add();
  write_and_read(a, b, 0, 100, 1);
  write_and_read(a, c, 0, 100, 2);
  // A key b never gave: b ends that connection with a Terminate, a gets an
  // error completion for the write.
  uint64_t x = 5;
  ASSERT_EQ(fi_write(a.ep(), &x, 8, nullptr, b.addr(), b.base(), b.key() + 1000, &x), 0);
  void* ctx = nullptr;
  fi_cq_err_entry err{};
  ASSERT_TRUE(a.done(&ctx, &err));
  EXPECT_NE(err.err, 0);
  EXPECT_EQ(ctx, &x);
  // Outside the window, with a good key: refused the same way.
  ASSERT_EQ(fi_write(a.ep(), &x, 8, nullptr, c.addr(), c.base() + kWindow, c.key(), &x), 0);
  err = {};
  ASSERT_TRUE(a.done(&ctx, &err));
  EXPECT_NE(err.err, 0);
  // The peers are unharmed, and both are reached again over new connections.
  write_and_read(b, c, 0, 4096, 3);
  write_and_read(a, b, 0, 4096, 4);
  write_and_read(a, c, 0, 4096, 5);
}

TEST_F(RdmRma, UnknownAddressesAndDeadPeers) {
  Peer& a = add();
  uint64_t x = 1;
  EXPECT_EQ(fi_write(a.ep(), &x, 8, nullptr, 12345, a.base(), a.key(), &x), -FI_EINVAL);
  EXPECT_EQ(fi_write(a.ep(), &x, 8, nullptr, FI_ADDR_NOTAVAIL, a.base(), a.key(), &x),
            -FI_EINVAL);
  // Nobody listens at this name: the operation fails, now or as an error
  // completion, and never hangs.
  sockaddr_in dead = loopback(dead_port());
  fi_addr_t gone = FI_ADDR_NOTAVAIL;
  ASSERT_EQ(fi_av_insert(d_->av(), &dead, 1, &gone, 0, nullptr), 1);
  ssize_t rc = fi_write(a.ep(), &x, 8, nullptr, gone, a.base(), a.key(), &x);
  if (rc == 0) {
    void* ctx = nullptr;
    fi_cq_err_entry err{};
    ASSERT_TRUE(a.done(&ctx, &err));
    EXPECT_NE(err.err, 0);
  } else {
    EXPECT_NE(rc, -FI_EAGAIN);
  }
  write_and_read(a, a, 0, 64, 9);  // the endpoint still works
  // The AV stays while an endpoint uses it.
  EXPECT_EQ(fi_close(&d_->av()->fid), -FI_EBUSY);
  // Messages are not this endpoint's.
  EXPECT_NE(fi_send(a.ep(), &x, 8, nullptr, a.addr(), &x), 0);
}

}  // namespace
}  // namespace fit
