// Connection management on FI_EP_MSG: private data both ways, reject with
// private data, shutdown, unreachable peers, names, EQ semantics.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  fill(v.data(), n, seed);
  return v;
}

size_t cm_data_size(fid_t f) {
  size_t v = 0, len = sizeof(v);
  EXPECT_EQ(fi_getopt(f, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, &len), 0);
  return v;
}

TEST(Cm, PrivateDataBothWays) {
  Fabric f;
  std::unique_ptr<Endpoint> c, s;
  f.connect(&c, &s, bytes(56, 1), bytes(40, 2));
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  // The connection carries data both ways.
  char in[16] = {}, out[16] = "ping";
  ASSERT_EQ(fi_recv(s->ep, in, sizeof(in), nullptr, 0, in), 0);
  ASSERT_EQ(fi_send(c->ep, out, sizeof(out), nullptr, 0, out), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(cq_wait(s->rx, &e), 1);
  EXPECT_STREQ(in, "ping");
  ASSERT_EQ(cq_wait(c->tx, &e), 1);
}

TEST(Cm, LargestPrivateData) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const size_t max = cm_data_size(&f.pep()->fid);
  EXPECT_GE(max, 24u);  // ofi_rxm's connect message
  std::unique_ptr<Endpoint> c, s;
  f.connect(&c, &s, bytes(max, 3), bytes(max, 4));
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  EXPECT_EQ(cm_data_size(&c->ep->fid), max);
  // One byte more is refused up front, on both sides.
  auto c2 = f.open_ep(f.info());
  std::vector<uint8_t> big = bytes(max + 1, 5);
  EXPECT_EQ(fi_connect(c2->ep, &f.addr(), big.data(), big.size()), -FI_EINVAL);
}

TEST(Cm, ConnreqNamesThePeer) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  auto c = f.open_ep(f.info());
  ASSERT_EQ(fi_connect(c->ep, &f.addr(), nullptr, 0), 0);
  Info req = wait_connreq(f.pep_eq());
  ASSERT_TRUE(req);
  ASSERT_NE(req->handle, nullptr);
  EXPECT_EQ(req->handle->fclass, static_cast<size_t>(FI_CLASS_CONNREQ));
  EXPECT_EQ(req->ep_attr->type, FI_EP_MSG);
  ASSERT_EQ(req->dest_addrlen, sizeof(sockaddr_in));
  const sockaddr_in peer = *static_cast<sockaddr_in*>(req->dest_addr);
  EXPECT_EQ(peer.sin_family, AF_INET);
  auto s = f.open_ep(req.get());
  ASSERT_EQ(fi_accept(s->ep, nullptr, 0), 0);
  ASSERT_TRUE(wait_connected(c->eq, c->ep));
  ASSERT_TRUE(wait_connected(s->eq, s->ep));
  // Names: the client's peer is the listener; the client's name is what the
  // request named and what the server's endpoint has as its peer.
  sockaddr_in a{}, b{};
  size_t len = sizeof(a);
  ASSERT_EQ(fi_getpeer(c->ep, &a, &len), 0);
  EXPECT_EQ(a.sin_port, f.addr().sin_port);
  EXPECT_EQ(a.sin_addr.s_addr, f.addr().sin_addr.s_addr);
  len = sizeof(a);
  ASSERT_EQ(fi_getname(&c->ep->fid, &a, &len), 0);
  EXPECT_EQ(a.sin_port, peer.sin_port);
  EXPECT_EQ(a.sin_addr.s_addr, peer.sin_addr.s_addr);
  len = sizeof(b);
  ASSERT_EQ(fi_getpeer(s->ep, &b, &len), 0);
  EXPECT_EQ(b.sin_port, peer.sin_port);
  EXPECT_EQ(b.sin_addr.s_addr, peer.sin_addr.s_addr);
  // A name buffer that is too small says how much is needed.
  len = 4;
  EXPECT_EQ(fi_getname(&c->ep->fid, &a, &len), -FI_ETOOSMALL);
  EXPECT_EQ(len, sizeof(sockaddr_in));
}

// fi_reject's private data reaches the connecting side as an FI_ECONNREFUSED
// error entry with err_data, in the caller's buffer or the provider's.
void reject_case(bool user_buffer) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  auto c = f.open_ep(f.info());
  ASSERT_EQ(fi_connect(c->ep, &f.addr(), "hello", 5), 0);
  Info req = wait_connreq(f.pep_eq());
  ASSERT_TRUE(req);
  std::vector<uint8_t> why = bytes(32, 6);
  ASSERT_EQ(fi_reject(f.pep(), req->handle, why.data(), why.size()), 0);
  uint32_t event;
  fi_eq_cm_entry entry;
  std::vector<uint8_t> mine(64);
  fi_eq_err_entry err{};
  if (user_buffer) {
    err.err_data = mine.data();
    err.err_data_size = mine.size();
  }
  ssize_t rd = eq_wait(c->eq, &event, &entry, sizeof(entry), nullptr);
  ASSERT_EQ(rd, -FI_EAVAIL);
  ASSERT_EQ(fi_eq_readerr(c->eq, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  EXPECT_EQ(err.fid, &c->ep->fid);
  EXPECT_EQ(err.context, c.get());  // fid's context: the Endpoint
  ASSERT_EQ(err.err_data_size, why.size());
  ASSERT_NE(err.err_data, nullptr);
  if (user_buffer) {
    EXPECT_EQ(err.err_data, mine.data());
  }
  EXPECT_EQ(std::memcmp(err.err_data, why.data(), why.size()), 0);
  char text[128];
  EXPECT_NE(fi_eq_strerror(c->eq, err.prov_errno, err.err_data, text, sizeof(text)), nullptr);
  // Nothing else is pending, and the listener still accepts others.
  EXPECT_EQ(fi_eq_read(c->eq, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
  std::unique_ptr<Endpoint> c2, s2;
  f.connect(&c2, &s2);
}

TEST(Cm, RejectWithPrivateDataProviderBuffer) { reject_case(false); }
TEST(Cm, RejectWithPrivateDataUserBuffer) { reject_case(true); }

void shutdown_case(bool client_closes) {
  Fabric f;
  std::unique_ptr<Endpoint> c, s;
  f.connect(&c, &s);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  Endpoint& closer = client_closes ? *c : *s;
  Endpoint& peer = client_closes ? *s : *c;
  char buf[2][64];
  ASSERT_EQ(fi_recv(peer.ep, buf[0], 64, nullptr, 0, buf[0]), 0);
  ASSERT_EQ(fi_recv(peer.ep, buf[1], 64, nullptr, 0, buf[1]), 0);
  ASSERT_EQ(fi_shutdown(closer.ep, 0), 0);
  uint32_t event = 0;
  fi_eq_cm_entry entry{};
  ssize_t rd = eq_wait(peer.eq, &event, &entry, sizeof(entry));
  ASSERT_EQ(rd, static_cast<ssize_t>(sizeof(entry))) << fi_strerror(static_cast<int>(-rd));
  EXPECT_EQ(event, FI_SHUTDOWN);
  EXPECT_EQ(entry.fid, &peer.ep->fid);
  EXPECT_EQ(entry.info, nullptr);
  // The peer's posted receives are flushed as canceled.
  for (int i = 0; i < 2; ++i) {
    fi_cq_data_entry e;
    fi_cq_err_entry err{};
    ASSERT_EQ(cq_wait(peer.rx, &e, &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_ECANCELED);
    EXPECT_EQ(err.op_context, buf[i]);
    EXPECT_TRUE(err.flags & FI_RECV);
  }
  // Posting on the closed connection fails or completes in error; it never
  // succeeds.
  char x = 0;
  ssize_t rc = fi_send(closer.ep, &x, 1, nullptr, 0, &x);
  if (rc == 0) {
    fi_cq_data_entry e;
    EXPECT_EQ(cq_wait(closer.tx, &e), -FI_EAVAIL);
  }
}

TEST(Cm, ClientShutdownGivesPeerFiShutdown) { shutdown_case(true); }
TEST(Cm, ServerShutdownGivesPeerFiShutdown) { shutdown_case(false); }

// fi_eq(3): FI_CONNECTED and FI_SHUTDOWN are struct fi_eq_cm_entry, so a
// buffer of exactly that size takes them, through fi_eq_read and fi_eq_sread.
ssize_t read_cm_entry(fid_eq* eq, bool blocking, uint32_t* event, fi_eq_cm_entry* e) {
  if (blocking) return fi_eq_sread(eq, event, e, sizeof(*e), kWaitMs, 0);
  return eq_wait(eq, event, e, sizeof(*e));
}

void expect_cm_entry(fid_eq* eq, bool blocking, uint32_t want, fid_ep* ep) {
  uint32_t event = 0;
  fi_eq_cm_entry e{};
  e.info = reinterpret_cast<fi_info*>(0x1);  // must be overwritten
  const ssize_t rd = read_cm_entry(eq, blocking, &event, &e);
  ASSERT_EQ(rd, static_cast<ssize_t>(sizeof(e)))
      << (blocking ? "fi_eq_sread: " : "fi_eq_read: ") << fi_strerror(static_cast<int>(-rd));
  EXPECT_EQ(event, want);
  EXPECT_EQ(e.fid, &ep->fid);
  EXPECT_EQ(e.info, nullptr);
}

void cm_entry_case(bool blocking) {
  Fabric f;
  std::unique_ptr<Endpoint> c, s;
  f.connect_unread(&c, &s);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  expect_cm_entry(c->eq, blocking, FI_CONNECTED, c->ep);
  expect_cm_entry(s->eq, blocking, FI_CONNECTED, s->ep);
  ASSERT_EQ(fi_shutdown(c->ep, 0), 0);
  expect_cm_entry(s->eq, blocking, FI_SHUTDOWN, s->ep);
}

TEST(Cm, ConnectedAndShutdownFitACmEntryRead) { cm_entry_case(false); }
TEST(Cm, ConnectedAndShutdownFitACmEntrySread) { cm_entry_case(true); }

// The other events' entries are struct fi_eq_entry, larger than a CM entry.
TEST(Cm, EventSizesFollowTheirType) {
  Fabric f;
  fid_eq* eq = nullptr;
  fi_eq_attr ea{};
  ASSERT_EQ(fi_eq_open(f.fabric(), &ea, &eq, nullptr), 0);
  Fid<fid_eq> guard(eq);
  for (uint32_t ev : {FI_MR_COMPLETE, FI_AV_COMPLETE, FI_JOIN_COMPLETE}) {
    fi_eq_entry in{nullptr, nullptr, ev};
    ASSERT_EQ(fi_eq_write(eq, ev, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
    uint32_t event = 0;
    fi_eq_cm_entry small{};
    EXPECT_EQ(fi_eq_read(eq, &event, &small, sizeof(small), 0), -FI_ETOOSMALL) << ev;
    fi_eq_entry out{};
    ASSERT_EQ(fi_eq_sread(eq, &event, &out, sizeof(out), 0, 0), static_cast<ssize_t>(sizeof(out)));
    EXPECT_EQ(event, ev);
    EXPECT_EQ(out.data, ev);
  }
  fi_eq_cm_entry cm{nullptr, nullptr};
  ASSERT_EQ(fi_eq_write(eq, FI_SHUTDOWN, &cm, sizeof(cm), 0), static_cast<ssize_t>(sizeof(cm)));
  uint32_t event = 0;
  EXPECT_EQ(fi_eq_read(eq, &event, &cm, sizeof(cm), 0), static_cast<ssize_t>(sizeof(cm)));
  EXPECT_EQ(event, FI_SHUTDOWN);
}

TEST(Cm, NoListenerGivesErrorEvent) {
  Fabric f;
  auto c = f.open_ep(f.info());
  sockaddr_in dead = loopback(dead_port());
  int rc = fi_connect(c->ep, &dead, "x", 1);
  if (rc == 0) {  // the refusal may also come asynchronously
    uint32_t event;
    fi_eq_cm_entry entry;
    fi_eq_err_entry err{};
    ASSERT_EQ(eq_wait(c->eq, &event, &entry, sizeof(entry), &err), -FI_EAVAIL);
    EXPECT_EQ(err.err, FI_ECONNREFUSED);
    EXPECT_EQ(err.fid, &c->ep->fid);
  } else {
    EXPECT_EQ(rc, -FI_ECONNREFUSED);
  }
}

TEST(Cm, ClientClosesBeforeAccept) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  auto c = f.open_ep(f.info());
  ASSERT_EQ(fi_connect(c->ep, &f.addr(), nullptr, 0), 0);
  Info req = wait_connreq(f.pep_eq());
  ASSERT_TRUE(req);
  c.reset();
  auto s = f.open_ep(req.get());
  int rc = fi_accept(s->ep, nullptr, 0);
  if (rc == 0) {
    // The server learns that the connection is gone, one way or another.
    bool ended = poll_until([&] {
      uint32_t event;
      fi_eq_cm_entry entry;
      ssize_t rd = fi_eq_read(s->eq, &event, &entry, sizeof(entry), 0);
      if (rd == -FI_EAVAIL) {
        fi_eq_err_entry err{};
        fi_eq_readerr(s->eq, &err, 0);
        return true;
      }
      return rd > 0 && event == FI_SHUTDOWN;
    });
    EXPECT_TRUE(ended);
  }
  // The listener is fine.
  std::unique_ptr<Endpoint> c2, s2;
  f.connect(&c2, &s2);
}

TEST(Cm, RejectAfterClientClosed) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  for (int i = 0; i < 3; ++i) {
    auto c = f.open_ep(f.info());  // closed unconnected
  }
  auto c = f.open_ep(f.info());
  ASSERT_EQ(fi_connect(c->ep, &f.addr(), nullptr, 0), 0);
  Info req = wait_connreq(f.pep_eq());
  ASSERT_TRUE(req);
  c.reset();
  fi_reject(f.pep(), req->handle, "no", 2);  // may fail; must not crash
  std::unique_ptr<Endpoint> c2, s2;
  f.connect(&c2, &s2);
}

TEST(Cm, AcceptAndConnectNeedAnEnabledEndpoint) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  fid_ep* ep = nullptr;
  ASSERT_EQ(fi_endpoint(f.domain(), f.info(), &ep, nullptr), 0);
  EXPECT_NE(fi_connect(ep, &f.addr(), nullptr, 0), 0);
  EXPECT_EQ(fi_close(&ep->fid), 0);
}

TEST(Cm, ListenerPortInUse) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  fid_pep* pep2 = nullptr;
  ASSERT_EQ(fi_passive_ep(f.fabric(), f.info(), &pep2, nullptr), 0);
  ASSERT_EQ(fi_setname(&pep2->fid, const_cast<sockaddr_in*>(&f.addr()), sizeof(sockaddr_in)), 0);
  ASSERT_EQ(fi_pep_bind(pep2, &f.pep_eq()->fid, 0), 0);
  EXPECT_EQ(fi_listen(pep2), -FI_EADDRINUSE);
  EXPECT_EQ(fi_close(&pep2->fid), 0);
}

// A kernel TCP socket with SO_REUSEADDR, as servers make them, on 127.0.0.1:port.
int reuse_socket(uint16_t port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  EXPECT_EQ(::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)), 0);
  sockaddr_in a = loopback(port);
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

// Kernel TCP connections on a port end, the server's side closing first:
// they sit in TIME-WAIT on that port for a minute. The port is free for a
// listener all the same, as it is for any kernel server with SO_REUSEADDR.
TEST(Cm, ListenOnAPortInTimeWait) {
  int ls = reuse_socket(0);
  ASSERT_GE(ls, 0);
  ASSERT_EQ(::listen(ls, 8), 0);
  sockaddr_in addr{};
  socklen_t alen = sizeof(addr);
  ASSERT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &alen), 0);
  for (int i = 0; i < 3; ++i) {
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    int a = ::accept(ls, nullptr, nullptr);
    ASSERT_GE(a, 0);
    ::close(a);  // the server closes first: its end, on the port, waits
    char b;
    EXPECT_EQ(::read(c, &b, 1), 0);  // the FIN arrived
    ::close(c);
  }
  ::close(ls);
  // The port is held by TIME-WAIT only: a plain bind is refused.
  int plain = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_NE(::bind(plain, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(errno, EADDRINUSE);
  ::close(plain);

  Fabric f;
  ASSERT_NE(f.fabric(), nullptr);
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_UNSPEC;
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(f.fabric(), &ea, &eq, nullptr), 0);
  Fid<fid_eq> eq_guard(eq);
  fid_pep* pep = nullptr;
  ASSERT_EQ(fi_passive_ep(f.fabric(), f.info(), &pep, nullptr), 0);
  Fid<fid_pep> pep_guard(pep);
  ASSERT_EQ(fi_setname(&pep->fid, &addr, sizeof(addr)), 0);
  ASSERT_EQ(fi_pep_bind(pep, &eq->fid, 0), 0);
  ASSERT_EQ(fi_listen(pep), 0);
  // The port is the listener's alone now: no kernel server takes it.
  int other = reuse_socket(ntohs(addr.sin_port));
  EXPECT_LT(other, 0) << "a SO_REUSEADDR socket bound the listening port";
  if (other >= 0) ::close(other);
  // And a connection to it works.
  auto c = f.open_ep(f.info());
  ASSERT_EQ(fi_connect(c->ep, &addr, nullptr, 0), 0);
  Info req = wait_connreq(eq);
  ASSERT_TRUE(req);
  auto s = f.open_ep(req.get());
  ASSERT_EQ(fi_accept(s->ep, nullptr, 0), 0);
  EXPECT_TRUE(wait_connected(c->eq, c->ep));
  EXPECT_TRUE(wait_connected(s->eq, s->ep));
}

TEST(Cm, EqWritePeekAndTooSmall) {
  Fabric f;
  fid_eq* eq = nullptr;
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_UNSPEC;
  ASSERT_EQ(fi_eq_open(f.fabric(), &ea, &eq, nullptr), 0);
  fi_eq_entry in{nullptr, reinterpret_cast<void*>(0x1234), 77};
  ASSERT_EQ(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0), static_cast<ssize_t>(sizeof(in)));
  uint32_t event = 0;
  fi_eq_entry out{};
  ASSERT_EQ(fi_eq_read(eq, &event, &out, sizeof(out), FI_PEEK), static_cast<ssize_t>(sizeof(out)));
  EXPECT_EQ(event, FI_NOTIFY);
  ASSERT_EQ(fi_eq_sread(eq, &event, &out, sizeof(out), 1000, 0), static_cast<ssize_t>(sizeof(out)));
  EXPECT_EQ(out.context, in.context);
  EXPECT_EQ(out.data, 77u);
  EXPECT_EQ(fi_eq_read(eq, &event, &out, sizeof(out), 0), -FI_EAGAIN);
  EXPECT_EQ(fi_eq_sread(eq, &event, &out, sizeof(out), 50, 0), -FI_EAGAIN);
  EXPECT_EQ(fi_close(&eq->fid), 0);

  // A CONNREQ does not fit a bare fi_eq_entry.
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  auto c = f.open_ep(f.info());
  ASSERT_EQ(fi_connect(c->ep, &f.addr(), nullptr, 0), 0);
  char small[8];
  ssize_t rd = -FI_EAGAIN;
  ASSERT_TRUE(poll_until([&] {
    rd = fi_eq_read(f.pep_eq(), &event, small, sizeof(small), 0);
    return rd != -FI_EAGAIN;
  }));
  EXPECT_EQ(rd, -FI_ETOOSMALL);
  Info req = wait_connreq(f.pep_eq());  // still there
  ASSERT_TRUE(req);
  fi_reject(f.pep(), req->handle, nullptr, 0);
}

}  // namespace
}  // namespace fit
