// A connect that cannot succeed says why, as kernel TCP's connect(2) would:
// FI_ECONNREFUSED only when nobody listens on a reachable address, an
// unreachable error when there is no way to the address, each as an EQ
// error entry on the endpoint (fi_connect itself succeeds) whose
// fi_eq_strerror text names the cause, and at once, not after the connect
// timeout. Over both transports. The test runs in a network namespace of
// its own with only lo up, so no address but loopback has a route and no
// frame leaves the host.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

bool over_mesh() {
  const char* t = std::getenv("FI_SOFTRDMA_TRANSPORT");
  return t == nullptr || std::string(t) == "dpdk";
}

sockaddr_in addr_of(uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  return a;
}

// What a connect to a came to: fi_connect's code, then the EQ's error
// entry (err, fi_eq_strerror text) and how long it took to come.
struct Outcome {
  int connect_rc = 0;
  ssize_t eq_rc = 0;
  int err = 0;
  std::string text;
  bool names_ep = false;
  std::chrono::steady_clock::duration took{};
};

Outcome connect_outcome(const sockaddr_in& a) {
  Outcome o;
  Fabric f;
  auto c = f.open_ep(f.info());
  const auto t0 = std::chrono::steady_clock::now();
  o.connect_rc = fi_connect(c->ep, &a, nullptr, 0);
  uint32_t event = 0;
  fi_eq_cm_entry entry{};
  fi_eq_err_entry err{};
  o.eq_rc = eq_wait(c->eq, &event, &entry, sizeof(entry), &err);
  o.took = std::chrono::steady_clock::now() - t0;
  o.err = err.err;
  o.names_ep = err.fid == &c->ep->fid;
  o.text = fi_eq_strerror(c->eq, err.prov_errno, err.err_data, nullptr, 0);
  return o;
}

// The veth pair of AnOnLinkAddressNobodyHasIsUnreachable: 10.77.0.0/24 is
// on srdma-a, whose peer srdma-b has no address, so nobody answers ARP.
constexpr const char* kLinkDev = "srdma-a";
constexpr uint32_t kLinkNet = 0x0a4d0000;  // 10.77.0.0/24

// A port-mode client (FI_SOFTRDMA_DEVARGS on srdma-a) in a process of its
// own: an absent neighbour, then a network with no route. Sends back
// "<err> <text>" for each.
int port_client(int fd) {
  for (uint32_t ip : {kLinkNet + 9, 0x0a580001u /* 10.88.0.1 */}) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(ip);
    a.sin_port = htons(7471);
    const Outcome o = connect_outcome(a);
    if (o.connect_rc != 0 || o.eq_rc != -FI_EAVAIL || !o.names_ep) return 2;
    const std::string msg = std::to_string(o.err) + " " + o.text;
    if (!send_blob(fd, msg.data(), msg.size())) return 3;
  }
  return 0;
}
FIT_CHILD(port_client, port_client);

class ConnectError : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::getuid() != 0 || ::unshare(CLONE_NEWNET) != 0) return;
    isolated_ = std::system("ip link set lo up") == 0;
  }
  void SetUp() override {
    if (!isolated_) GTEST_SKIP() << "needs root for a network namespace of its own";
  }

  // The EQ error entry a connect to a must produce, at once: its err, with
  // the fi_eq_strerror text in *text.
  int connect_error(const sockaddr_in& a, std::string* text) {
    const Outcome o = connect_outcome(a);
    EXPECT_EQ(o.connect_rc, 0);
    EXPECT_EQ(o.eq_rc, -FI_EAVAIL) << "no error entry";
    EXPECT_TRUE(o.names_ep);
    EXPECT_LT(o.took, std::chrono::seconds(5));
    *text = o.text;
    return o.err;
  }

  static inline bool isolated_ = false;
};

TEST_F(ConnectError, NobodyListeningOnLoopbackIsRefused) {
  std::string text;
  EXPECT_EQ(connect_error(loopback(dead_port()), &text), FI_ECONNREFUSED) << text;
  EXPECT_NE(text.find("Connection refused"), std::string::npos) << text;
}

// TEST-NET-1: no route to it here (the namespace has only lo).
TEST_F(ConnectError, AnAddressWithNoRouteIsUnreachable) {
  std::string text;
  EXPECT_EQ(connect_error(addr_of(0xc000024d, 7471), &text), FI_ENETUNREACH) << text;
  EXPECT_NE(text.find("Network is unreachable"), std::string::npos) << text;
}

// The mesh's address of a process that has exited: a host that is not
// there (over kernel TCP the mesh's network has no route at all).
TEST_F(ConnectError, AGoneProcessOnTheMeshIsUnreachable) {
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  int st = 0;
  ASSERT_EQ(::waitpid(gone, &st, 0), gone);
  std::string text;
  const int err = connect_error(addr_of(0x0a800000u + static_cast<uint32_t>(gone), 7471), &text);
  if (over_mesh()) {
    EXPECT_EQ(err, FI_EHOSTUNREACH) << text;
    EXPECT_NE(text.find("No route to host"), std::string::npos) << text;
  } else {
    EXPECT_EQ(err, FI_ENETUNREACH) << text;
    EXPECT_NE(text.find("Network is unreachable"), std::string::npos) << text;
  }
}

// On a link, an address nobody answers ARP for: "No route to host" once
// the SYNs give up (the kernel's neighbour, lwIP's SYN retries: seconds).
// Over DPDK the stack runs in port mode on the link (af_packet), where the
// user's own settings route: the errors name them (a peer outside
// FI_SOFTRDMA_ADDR's network is a setting to fix, not a network fault).
TEST_F(ConnectError, AnOnLinkAddressNobodyHasIsUnreachable) {
  ASSERT_EQ(std::system((std::string("ip link add ") + kLinkDev +
                         " type veth peer name srdma-b && ip link set " + kLinkDev +
                         " up && ip link set srdma-b up").c_str()),
            0);
  std::vector<std::string> got;
  if (over_mesh()) {
    ::setenv("FI_SOFTRDMA_DEVARGS", (std::string("net_af_packet0,iface=") + kLinkDev).c_str(), 1);
    ::setenv("FI_SOFTRDMA_ADDR", "10.77.0.1/24", 1);
    int fd = -1;
    const pid_t child = spawn("port_client", &fd);
    ::unsetenv("FI_SOFTRDMA_DEVARGS");
    ::unsetenv("FI_SOFTRDMA_ADDR");
    std::vector<uint8_t> blob;
    while (got.size() < 2 && recv_blob(fd, &blob)) got.emplace_back(blob.begin(), blob.end());
    EXPECT_TRUE(child_ok(child));
    ::close(fd);
  } else {
    ASSERT_EQ(std::system((std::string("ip addr add 10.77.0.1/24 dev ") + kLinkDev).c_str()), 0);
    std::string text;
    const int err = connect_error(addr_of(kLinkNet + 9, 7471), &text);
    got.push_back(std::to_string(err) + " " + text);
    got.push_back(std::to_string(connect_error(addr_of(0x0a580001, 7471), &text)) + " " + text);
  }
  ASSERT_EQ(got.size(), 2u);
  std::string settings[2];
  if (over_mesh()) {
    settings[0] = std::string(": no neighbour answered on the port FI_SOFTRDMA_DEVARGS=") +
                  "net_af_packet0,iface=" + kLinkDev + " (FI_SOFTRDMA_ADDR=10.77.0.1/24)";
    settings[1] = ": the address is outside FI_SOFTRDMA_ADDR=10.77.0.1/24 and "
                  "FI_SOFTRDMA_GATEWAY is not set";
  }
  EXPECT_EQ(got[0], std::to_string(FI_EHOSTUNREACH) + " transport: No route to host" + settings[0]);
  EXPECT_EQ(got[1],
            std::to_string(FI_ENETUNREACH) + " transport: Network is unreachable" + settings[1]);
  (void)!std::system((std::string("ip link del ") + kLinkDev).c_str());
}

}  // namespace
}  // namespace fit
