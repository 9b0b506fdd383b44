// fi_getname and fi_getpeer give addresses the user can use: what the user
// named or connected to, never a transport's internal one (the DPDK mesh
// gives each process an address of its own that nothing outside the
// provider knows). Over both transports (fi_test runs every test twice).
#include <arpa/inet.h>
#include <ifaddrs.h>

#include <cstring>
#include <string>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

std::string str(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

sockaddr_in name_of(fid_t f) {
  sockaddr_in a{};
  size_t len = sizeof(a);
  EXPECT_EQ(fi_getname(f, &a, &len), 0);
  EXPECT_EQ(len, sizeof(a));
  return a;
}

sockaddr_in peer_of(fid_ep* ep) {
  sockaddr_in a{};
  size_t len = sizeof(a);
  EXPECT_EQ(fi_getpeer(ep, &a, &len), 0);
  EXPECT_EQ(len, sizeof(a));
  return a;
}

::testing::AssertionResult same_addr(const sockaddr_in& a, const sockaddr_in& b) {
  if (a.sin_family == b.sin_family && a.sin_addr.s_addr == b.sin_addr.s_addr &&
      a.sin_port == b.sin_port)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << str(a) << " is not " << str(b);
}

// This host's first non-loopback IPv4 address, or 0.
in_addr_t host_address() {
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return 0;
  in_addr_t found = 0;
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr_t a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    if ((ntohl(a) >> 24) != 127) found = a;
  }
  ::freeifaddrs(ifs);
  return found;
}

TEST(Names, ActiveEndpointNamesTheSourceItWasGiven) {
  // As hints, and as node and service with FI_SOURCE.
  const sockaddr_in want = loopback(9229);
  Info h = msg_hints();
  h->src_addr = std::malloc(sizeof(want));
  std::memcpy(h->src_addr, &want, sizeof(want));
  h->src_addrlen = sizeof(want);
  Info by_node;
  ASSERT_EQ(getinfo(msg_hints().get(), &by_node, "127.0.0.1", "9229", FI_SOURCE), 0);
  for (fi_info* hints : {h.get(), by_node.get()}) {
    Fabric f(Info(fi_dupinfo(hints)));
    ASSERT_NE(f.domain(), nullptr);
    auto ep = f.open_ep(f.info());
    ASSERT_NE(ep->ep, nullptr);
    EXPECT_TRUE(same_addr(name_of(&ep->ep->fid), want));
  }
}

// Listens at the address `at` names (port 0: any), connects to where the
// listener says it is, and checks every name on the way against the
// address the user gave.
void names_case(in_addr_t at) {
  Info h = msg_hints();
  const sockaddr_in named = [&] {
    sockaddr_in a = loopback(0);
    a.sin_addr.s_addr = at;
    return a;
  }();
  h->src_addr = std::malloc(sizeof(named));
  std::memcpy(h->src_addr, &named, sizeof(named));
  h->src_addrlen = sizeof(named);
  Fabric f(std::move(h));
  ASSERT_NE(f.domain(), nullptr);
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  // The listener: the address it was given, and the port it took.
  const sockaddr_in listener = name_of(&f.pep()->fid);
  EXPECT_EQ(listener.sin_addr.s_addr, at) << str(listener);
  ASSERT_NE(listener.sin_port, 0);

  auto c = f.open_ep(f.info());
  ASSERT_EQ(fi_connect(c->ep, &listener, nullptr, 0), 0);
  Info req = wait_connreq(f.pep_eq());
  ASSERT_TRUE(req);
  ASSERT_EQ(req->dest_addrlen, sizeof(sockaddr_in));
  const sockaddr_in requester = *static_cast<sockaddr_in*>(req->dest_addr);
  auto s = f.open_ep(req.get());
  ASSERT_EQ(fi_accept(s->ep, nullptr, 0), 0);
  ASSERT_TRUE(wait_connected(c->eq, c->ep));
  ASSERT_TRUE(wait_connected(s->eq, s->ep));

  // The client: on the route to the listener's address (an own address is
  // its own source), with its connection's port; its peer what it dialled.
  const sockaddr_in client = name_of(&c->ep->fid);
  EXPECT_EQ(client.sin_addr.s_addr, at) << str(client);
  EXPECT_NE(client.sin_port, 0);
  EXPECT_TRUE(same_addr(peer_of(c->ep), listener));
  // The accepted endpoint: the listener's address and port; its peer the
  // client as the client names itself, as the request named it.
  EXPECT_TRUE(same_addr(name_of(&s->ep->fid), listener));
  EXPECT_TRUE(same_addr(peer_of(s->ep), client));
  EXPECT_TRUE(same_addr(requester, client));

  // The accepted endpoint's name is an address to connect to.
  auto c2 = f.open_ep(f.info());
  const sockaddr_in again = name_of(&s->ep->fid);
  ASSERT_EQ(fi_connect(c2->ep, &again, nullptr, 0), 0);
  Info req2 = wait_connreq(f.pep_eq());
  ASSERT_TRUE(req2);
  EXPECT_EQ(fi_reject(f.pep(), req2->handle, nullptr, 0), 0);
}

TEST(Names, OverLoopback) { names_case(htonl(INADDR_LOOPBACK)); }

TEST(Names, OverTheHostsAddress) {
  const in_addr_t host = host_address();
  if (host == 0) GTEST_SKIP() << "no IPv4 address but loopback";
  names_case(host);
}

}  // namespace
}  // namespace fit
