// One engine per process: every fi_fabric is a handle on it. Endpoints of
// two fabrics connect to each other, each EQ gets its own events, the
// engine's counters read the same through either fabric, closing one fabric
// leaves the other working, and after both close a new one starts afresh.
#include <poll.h>

#include <cstring>

#include "fi-tests/fi_test.h"
#include "prov/fi_ext_softrdma.h"

namespace fit {
namespace {

softrdma_counters counters(fid* f) {
  softrdma_counters c{};
  void* p = nullptr;
  EXPECT_EQ(fi_open_ops(f, FI_SOFTRDMA_COUNTERS_OPS, 0, &p, nullptr), 0);
  if (p) {
    EXPECT_EQ(static_cast<fi_softrdma_counters_ops*>(p)->read(f, &c, sizeof(c)), 0);
  }
  return c;
}

// len bytes from one endpoint to the other, and back with another seed.
void exchange(Endpoint& x, Endpoint& y, size_t len, uint64_t seed) {
  for (auto [from, to, s] : {std::tuple{&x, &y, seed}, std::tuple{&y, &x, seed + 1}}) {
    std::vector<uint8_t> src(len), dst(len);
    fill(src.data(), len, s);
    ASSERT_EQ(fi_recv(to->ep, dst.data(), len, nullptr, 0, dst.data()), 0);
    ASSERT_EQ(fi_send(from->ep, src.data(), len, nullptr, 0, src.data()), 0);
    fi_cq_data_entry e;
    ASSERT_EQ(cq_wait(to->rx, &e), 1);
    EXPECT_EQ(e.op_context, dst.data());
    EXPECT_EQ(e.len, len);
    ASSERT_EQ(cq_wait(from->tx, &e), 1);
    EXPECT_EQ(e.op_context, src.data());
    ASSERT_TRUE(same(dst.data(), len, s));
  }
}

bool eq_empty(fid_eq* eq) {
  uint32_t event;
  fi_eq_cm_entry e;
  return fi_eq_read(eq, &event, &e, sizeof(e), 0) == -FI_EAGAIN;
}

constexpr size_t kLen = 256 << 10;

// A passive endpoint on fabric A, an active one on fabric B: they connect,
// and each EQ sees only the events of its own endpoint.
TEST(SharedEngine, EndpointsOfTwoFabricsConnect) {
  Fabric a, b;
  ASSERT_NE(a.domain(), nullptr);
  ASSERT_NE(b.domain(), nullptr);
  a.listen();
  ASSERT_FALSE(HasFatalFailure());
  auto client = b.open_ep(b.info());
  const std::vector<uint8_t> cdata = {'b', '2', 'a'}, adata = {'a', '2', 'b'};
  ASSERT_EQ(fi_connect(client->ep, &a.addr(), cdata.data(), cdata.size()), 0);
  std::vector<uint8_t> got;
  Info req = wait_connreq(a.pep_eq(), &got);
  ASSERT_TRUE(req);
  EXPECT_EQ(got, cdata);
  auto server = a.open_ep(req.get());
  ASSERT_EQ(fi_accept(server->ep, adata.data(), adata.size()), 0);
  ASSERT_TRUE(wait_connected(client->eq, client->ep, &got));
  EXPECT_EQ(got, adata);
  ASSERT_TRUE(wait_connected(server->eq, server->ep));
  exchange(*client, *server, kLen, 1);
  EXPECT_TRUE(eq_empty(client->eq));
  EXPECT_TRUE(eq_empty(server->eq));
  EXPECT_TRUE(eq_empty(a.pep_eq()));

  // Both ends' QPs are in the one engine, whichever fabric is asked.
  const softrdma_counters ca = counters(&a.fabric()->fid), cb = counters(&b.fabric()->fid);
  EXPECT_EQ(ca.qps, 2u);
  EXPECT_EQ(cb.qps, 2u);
  EXPECT_EQ(counters(&b.domain()->fid).qps, 2u);
  EXPECT_EQ(ca.payload_tx, cb.payload_tx);
  EXPECT_EQ(ca.payload_tx, 2 * kLen);
  EXPECT_EQ(cb.payload_rx, 2 * kLen);

  // Each side's shutdown reaches the other's EQ, and only that.
  ASSERT_EQ(fi_shutdown(client->ep, 0), 0);
  uint32_t event = 0;
  fi_eq_cm_entry e{};
  ASSERT_EQ(eq_wait(server->eq, &event, &e, sizeof(e)), static_cast<ssize_t>(sizeof(e)));
  EXPECT_EQ(event, FI_SHUTDOWN);
  EXPECT_EQ(e.fid, &server->ep->fid);
  EXPECT_TRUE(eq_empty(a.pep_eq()));
}

// fi_trywait through one fabric on a CQ of the other: the engine arms the
// CQ's fd and the completion wakes the poller.
TEST(SharedEngine, TrywaitAcrossFabrics) {
  Fabric a, b;
  a.listen();
  ASSERT_FALSE(HasFatalFailure());
  EpOptions o;
  o.wait = FI_WAIT_FD;
  auto client = b.open_ep(b.info(), o);
  ASSERT_EQ(fi_connect(client->ep, &a.addr(), nullptr, 0), 0);
  Info req = wait_connreq(a.pep_eq());
  ASSERT_TRUE(req);
  auto server = a.open_ep(req.get(), o);
  ASSERT_EQ(fi_accept(server->ep, nullptr, 0), 0);
  ASSERT_TRUE(wait_connected(client->eq, client->ep));
  ASSERT_TRUE(wait_connected(server->eq, server->ep));
  int fd = -1;
  ASSERT_EQ(fi_control(&server->rx->fid, FI_GETWAIT, &fd), 0);
  fid* fids[1] = {&server->rx->fid};
  char buf[16] = {}, out[16] = "across";
  ASSERT_EQ(fi_recv(server->ep, buf, sizeof(buf), nullptr, 0, buf), 0);
  ASSERT_EQ(fi_send(client->ep, out, sizeof(out), nullptr, 0, out), 0);
  fi_cq_data_entry e;
  ssize_t rd = -FI_EAGAIN;
  ASSERT_TRUE(poll_until([&] {
    if (fi_trywait(b.fabric(), fids, 1) == FI_SUCCESS) {
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, 1000);
    }
    rd = fi_cq_read(server->rx, &e, 1);
    return rd != -FI_EAGAIN;
  }));
  ASSERT_EQ(rd, 1);
  EXPECT_EQ(e.op_context, buf);
  EXPECT_STREQ(buf, "across");
  ASSERT_EQ(cq_wait(client->tx, &e), 1);
}

// Fabric A closes (its endpoints, passive endpoint and domain first) while
// B has a connection: B's connection carries on, B makes new ones.
TEST(SharedEngine, ClosingOneFabricKeepsTheOther) {
  auto a = std::make_unique<Fabric>();
  Fabric b;
  std::unique_ptr<Endpoint> bc, bs;
  b.connect(&bc, &bs);
  ASSERT_FALSE(HasFatalFailure());
  {
    std::unique_ptr<Endpoint> ac, as;
    a->connect(&ac, &as);
    ASSERT_FALSE(HasFatalFailure());
    exchange(*ac, *as, kLen, 3);
    EXPECT_EQ(counters(&b.fabric()->fid).qps, 4u);
  }
  a.reset();
  EXPECT_EQ(counters(&b.fabric()->fid).qps, 2u);
  exchange(*bc, *bs, kLen, 5);
  std::unique_ptr<Endpoint> c2, s2;
  b.connect(&c2, &s2);
  ASSERT_FALSE(HasFatalFailure());
  exchange(*c2, *s2, kLen, 7);
  EXPECT_EQ(counters(&b.domain()->fid).qps, 4u);
}

// With every fabric closed the engine goes; the next fi_fabric starts a
// new one, whose counters start from zero.
TEST(SharedEngine, ReopenAfterAllClosed) {
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    auto a = std::make_unique<Fabric>();
    auto b = std::make_unique<Fabric>();
    std::unique_ptr<Endpoint> c, s;
    b->connect(&c, &s);
    ASSERT_FALSE(HasFatalFailure());
    exchange(*c, *s, kLen, 10 + round);
    const softrdma_counters n = counters(&a->fabric()->fid);
    EXPECT_EQ(n.payload_tx, 2 * kLen) << "a fresh engine counts this round only";
    EXPECT_EQ(n.qps, 2u);
    c.reset();
    s.reset();
    b.reset();
    a.reset();
  }
}

}  // namespace
}  // namespace fit
