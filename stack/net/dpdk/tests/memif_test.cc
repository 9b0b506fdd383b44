// memif ports through open_dpdk_port: two in one process (server + client
// on one socket), and one in a child process.
//
// DPDK 22.11 memif takes socket= as an abstract socket name by default
// (socket-abstract=yes), so no directory is needed and nothing is left on
// disk. Every open in this process uses a pool sized for jumbo frames (the
// first open decides the pool).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_log.h>

#include "stack/net/dpdk/eal.h"
#include "stack/net/dpdk/memif_guard.h"
#include "stack/net/dpdk/port.h"
#include "stack/net/dpdk/tests/frame_util.h"

namespace softrdma::net {
namespace {

using namespace std::chrono_literals;
using frametest::exchange;

constexpr uint32_t kJumboMtu = 9000;
constexpr uint32_t kPoolRoom = 9216;

std::string unique_socket() {
  static std::atomic<int> n{0};
  return "/run/softrdma/memif-test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

PortOptions memif(const std::string& role, int index, const std::string& sock,
                  const std::string& extra = "") {
  PortOptions o;
  o.devargs = "net_memif" + std::to_string(index) + ",role=" + role + ",socket=" + sock + ",id=0" +
              extra;
  o.pool_data_room = kPoolRoom;
  return o;
}

struct Pair {
  std::unique_ptr<FrameLink> server, client;
};

Pair open_pair(uint32_t mtu = 1500, const std::string& extra = "") {
  const std::string sock = unique_socket();
  Pair p;
  PortOptions s = memif("server", 0, sock, extra), c = memif("client", 1, sock, extra);
  s.mtu = c.mtu = mtu;
  std::string err;
  p.server = open_dpdk_port(s, &err);
  EXPECT_TRUE(p.server) << err;
  p.client = open_dpdk_port(c, &err);
  EXPECT_TRUE(p.client) << err;
  if (p.server && p.client) {
    EXPECT_TRUE(frametest::wait_link_up(*p.server, *p.client, 5s));
  }
  return p;
}

DpdkPortCounters counters_of(const FrameLink& l) {
  return dynamic_cast<const DpdkPort&>(l).dpdk_counters();
}

bool port_exists(const char* name) {
  uint16_t id;
  return rte_eth_dev_get_port_by_name(name, &id) == 0;
}

TEST(Memif, ExchangesFramesBothWays) {
  Pair p = open_pair();
  ASSERT_TRUE(p.server && p.client);
  const uint32_t pool_free = dpdk_mbuf_pool_info().available;

  EXPECT_EQ(p.server->name(), "net_memif0");
  EXPECT_EQ(dynamic_cast<DpdkPort&>(*p.client).driver(), "net_memif");
  EXPECT_EQ(p.server->mtu(), 1500u);
  EXPECT_TRUE(p.server->trusted_checksums());
  EXPECT_NE(std::memcmp(p.server->mac(), p.client->mac(), 6), 0);

  EXPECT_TRUE(exchange(*p.server, *p.client, 3000, frametest::kMinTestFrame, 1514, 10s, 1));
  EXPECT_TRUE(exchange(*p.client, *p.server, 3000, frametest::kMinTestFrame, 1514, 10s, 2));

  const auto s = counters_of(*p.server), c = counters_of(*p.client);
  EXPECT_EQ(s.link.tx_packets, 3000u);
  EXPECT_EQ(c.link.rx_packets, 3000u);
  EXPECT_EQ(s.link.tx_bytes, c.link.rx_bytes);
  EXPECT_EQ(c.link.tx_bytes, s.link.rx_bytes);
  EXPECT_EQ(s.link.tx_dropped + s.link.rx_dropped + c.link.tx_dropped + c.link.rx_dropped, 0u);
  EXPECT_EQ(s.rx_linearized + c.rx_linearized, 0u);
  // Every mbuf came back (rx_release, tx completion).
  EXPECT_EQ(dpdk_mbuf_pool_info().available, pool_free);
}

// memif unmaps a link's rings on EAL's interrupt thread when either end
// goes. With the guard installed, that unmapping waits for any thread still
// inside a burst: here a thread holds a burst mark while the client closes,
// and the close completes only once the mark is gone.
TEST(Memif, TeardownWaitsForBurstsInProgress) {
  Pair p = open_pair();
  ASSERT_TRUE(p.server && p.client);
  ASSERT_TRUE(memif_guard::installed());
  EXPECT_TRUE(exchange(*p.server, *p.client, 100, frametest::kMinTestFrame, 1514, 10s, 3));

  std::atomic<bool> marked{false}, release{false}, closed{false};
  std::thread burst([&] {
    memif_guard::Burst b;  // as if preempted inside rte_eth_rx_burst
    marked = true;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  while (!marked) std::this_thread::sleep_for(1ms);
  std::thread closer([&] {
    p.client.reset();  // memif_disconnect -> munmap of the rings
    closed = true;
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(closed) << "the rings were unmapped under a burst in progress";
  release = true;
  burst.join();
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!closed && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(closed);
  closer.join();
  // A burst after the teardown returns nothing and touches nothing.
  RxFrame f[4];
  EXPECT_EQ(p.server->rx_burst(f, 4), 0);
}

// DPDK 22.11 memif reports a 1518-octet maximum but carries any frame
// length, and copies into receive mbufs fill-first, so a 9014-octet frame
// arrives as one segment when the pool's data room holds it. Frames chained
// over several ring descriptors break once the ring wraps (a stale "next"
// flag merges frames; a lap of chained frames also corrupts the DPDK heap),
// so open_dpdk_port sets bsize to hold a whole frame.
class MemifJumbo : public ::testing::TestWithParam<const char*> {};

TEST_P(MemifJumbo, CarriesJumboFramesInOneSegment) {
  Pair p = open_pair(kJumboMtu, GetParam());
  ASSERT_TRUE(p.server && p.client);
  EXPECT_EQ(p.client->mtu(), kJumboMtu);
  EXPECT_TRUE(exchange(*p.server, *p.client, 3000, frametest::kMinTestFrame, kJumboMtu + 14, 10s, 3));
  EXPECT_TRUE(exchange(*p.client, *p.server, 3000, frametest::kMinTestFrame, kJumboMtu + 14, 10s, 4));
  EXPECT_EQ(counters_of(*p.server).rx_linearized + counters_of(*p.client).rx_linearized, 0u);
}

INSTANTIATE_TEST_SUITE_P(Bsize, MemifJumbo, ::testing::Values("", ",bsize=10240"));

TEST(Memif, BufferSizeBelowTheFrameIsRefused) {
  std::string err;
  PortOptions c = memif("client", 1, unique_socket(), ",bsize=2048");
  c.mtu = kJumboMtu;
  EXPECT_FALSE(open_dpdk_port(c, &err));
  EXPECT_NE(err.find("bsize"), std::string::npos) << err;
}

TEST(Memif, ClientWithoutServerFailsWithinItsTimeout) {
  PortOptions c = memif("client", 1, unique_socket());
  c.start_timeout_ms = 200;
  std::string err;
  const auto t0 = frametest::Clock::now();
  EXPECT_FALSE(open_dpdk_port(c, &err));
  EXPECT_LT(frametest::Clock::now() - t0, 3s);
  EXPECT_NE(err.find("rte_eth_dev_start"), std::string::npos) << err;
  EXPECT_FALSE(port_exists("net_memif1"));  // the failed device was removed
}

// Names and the socket can be used again (the PMD's leftover listener is
// retired with the socket's last device; see port.cc).
TEST(Memif, CloseRemovesDevicesAndNamesAndSocketCanBeReused) {
  const std::string sock = unique_socket();
  uint16_t ports_after_first = 0;
  for (int round = 0; round < 4; ++round) {
    {
      Pair p;
      std::string err;
      p.server = open_dpdk_port(memif("server", 0, sock), &err);
      ASSERT_TRUE(p.server) << err;
      p.client = open_dpdk_port(memif("client", 1, sock), &err);
      ASSERT_TRUE(p.client) << err;
      ASSERT_TRUE(frametest::wait_link_up(*p.server, *p.client, 5s));
      EXPECT_TRUE(port_exists("net_memif0") && port_exists("net_memif1"));
      EXPECT_TRUE(exchange(*p.server, *p.client, 50, frametest::kMinTestFrame, 1514, 5s));
      if (round % 2) p.server.reset();  // either end may go first
    }
    EXPECT_FALSE(port_exists("net_memif0") || port_exists("net_memif1"));
    if (round == 0) ports_after_first = rte_eth_dev_count_avail();
    EXPECT_EQ(rte_eth_dev_count_avail(), ports_after_first);
  }
}

// Once a socket's last device has gone nothing listens on it any more: a
// client trying it fails to start (rather than reaching the PMD's freed
// listener state), and a new server on that socket works.
TEST(Memif, ClientOfAClosedServerStaysDownHarmlessly) {
  const std::string sock = unique_socket();
  {
    Pair p;
    p.server = open_dpdk_port(memif("server", 0, sock));
    p.client = open_dpdk_port(memif("client", 1, sock));
    ASSERT_TRUE(p.server && p.client);
    ASSERT_TRUE(frametest::wait_link_up(*p.server, *p.client, 5s));
    p.server.reset();
    const auto end = frametest::Clock::now() + 5s;
    while (p.client->link_up() && frametest::Clock::now() < end) std::this_thread::sleep_for(1ms);
    EXPECT_FALSE(p.client->link_up());
  }
  PortOptions orphan = memif("client", 2, sock);
  orphan.start_timeout_ms = 100;
  EXPECT_FALSE(open_dpdk_port(orphan));

  Pair p;
  p.server = open_dpdk_port(memif("server", 0, sock));
  p.client = open_dpdk_port(memif("client", 1, sock));
  ASSERT_TRUE(p.server && p.client);
  ASSERT_TRUE(frametest::wait_link_up(*p.server, *p.client, 5s));
  EXPECT_TRUE(exchange(*p.client, *p.server, 50, frametest::kMinTestFrame, 1514, 5s));
}

// DPDK's log, captured while alive (and shown if a test fails meanwhile).
class LogCapture {
 public:
  LogCapture() : stream_(open_memstream(&text_, &len_)) { rte_openlog_stream(stream_); }
  ~LogCapture() {
    std::string t = text();
    if (::testing::Test::HasFailure()) std::fprintf(stderr, "DPDK log:\n%s", t.c_str());
    std::free(text_);
  }
  std::string text() {
    if (stream_ != nullptr) {
      rte_openlog_stream(stderr);
      std::fclose(stream_);
      stream_ = nullptr;
    }
    return std::string(text_, len_);
  }

 private:
  char* text_ = nullptr;
  size_t len_ = 0;
  FILE* stream_;
};

// Tearing both ends down back to back, over and over, while the interrupt
// thread handles each peer's disconnect: DPDK's heap must stay intact.
TEST(Memif, RepeatedOpenCloseKeepsTheDpdkHeapIntact) {
  LogCapture log;
  for (int round = 0; round < 30; ++round) {
    Pair p = open_pair();
    ASSERT_TRUE(p.server && p.client);
    ASSERT_TRUE(exchange(*p.server, *p.client, 20, frametest::kMinTestFrame, 1514, 5s));
    if (round % 2) p.server.reset();
  }
  // A client that never connects, after all of that.
  PortOptions c = memif("client", 1, unique_socket());
  c.start_timeout_ms = 50;
  EXPECT_FALSE(open_dpdk_port(c));
  std::this_thread::sleep_for(100ms);  // anything the interrupt thread still does
  const std::string text = log.text();
  EXPECT_EQ(text.find("Invalid memory"), std::string::npos) << text;
}

TEST(Memif, SecondOpenOfAnOpenDeviceFails) {
  Pair p = open_pair();
  ASSERT_TRUE(p.server && p.client);
  std::string err;
  EXPECT_FALSE(open_dpdk_port(memif("server", 0, unique_socket()), &err));
  EXPECT_NE(err.find("already open"), std::string::npos) << err;
  EXPECT_TRUE(exchange(*p.server, *p.client, 10, frametest::kMinTestFrame, 1514, 5s));
}

TEST(Memif, PeerCloseTakesTheLinkDown) {
  Pair p = open_pair();
  ASSERT_TRUE(p.server && p.client);
  p.client.reset();
  const auto end = frametest::Clock::now() + 5s;
  while (p.server->link_up() && frametest::Clock::now() < end) std::this_thread::sleep_for(1ms);
  EXPECT_FALSE(p.server->link_up());
}

// A receiver that does not poll fills the ring, then the port's queue;
// tx_begin then refuses, and nothing is lost once the receiver drains.
TEST(Memif, FullRingPushesBackWithoutLoss) {
  const std::string sock = unique_socket();
  PortOptions s = memif("server", 0, sock), c = memif("client", 1, sock);
  s.tx_retry_us = 10;
  auto server = open_dpdk_port(s);
  auto client = open_dpdk_port(c);
  ASSERT_TRUE(server && client);
  ASSERT_TRUE(frametest::wait_link_up(*server, *client, 5s));
  frametest::drain(*client);  // hands the server its ring buffers
  constexpr int kOffered = 5000;  // over the 1024-slot ring plus the queue
  int accepted = 0;
  while (accepted < kOffered &&
         frametest::send_test_frame(*server, client->mac(), accepted, 100))
    ++accepted;
  server->tx_flush();
  EXPECT_GE(accepted, 1024);
  EXPECT_LT(accepted, kOffered);
  EXPECT_EQ(server->counters().tx_dropped, 0u);
  EXPECT_GT(counters_of(*server).tx_retries, 0u);

  int got = 0;
  RxFrame f[64];
  const auto end = frametest::Clock::now() + 5s;
  while (got < accepted && frametest::Clock::now() < end) {
    const int n = client->rx_burst(f, 64);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(frametest::test_frame_seq(f[i].data), static_cast<uint32_t>(got));
      ++got;
      client->rx_release(f[i].handle);
    }
    server->tx_flush();  // what the ring refused goes as it drains
  }
  EXPECT_EQ(got, accepted);
  EXPECT_EQ(server->counters().tx_packets, static_cast<uint64_t>(accepted));
}

// memif has no ethdev rx interrupts in DPDK 22.11 (rx_intr_enable gives
// -ENOTSUP): the port reports no fd and works by polling.
TEST(Memif, InterruptModeWithoutPmdSupportPolls) {
  const std::string sock = unique_socket();
  PortOptions s = memif("server", 0, sock), c = memif("client", 1, sock);
  s.interrupt_mode = c.interrupt_mode = true;
  auto server = open_dpdk_port(s);
  auto client = open_dpdk_port(c);
  ASSERT_TRUE(server && client);
  ASSERT_TRUE(frametest::wait_link_up(*server, *client, 5s));
  EXPECT_EQ(server->rx_wait_fd(), -1);
  EXPECT_EQ(client->rx_wait_fd(), -1);
  client->rx_wait_arm();
  EXPECT_TRUE(exchange(*server, *client, 100, frametest::kMinTestFrame, 1514, 5s));
}

TEST(Memif, EalCleanupRefusedWhilePortsAreOpen) {
  Pair p = open_pair();
  ASSERT_TRUE(p.server && p.client);
  EXPECT_EQ(dpdk_eal_cleanup(), -EBUSY);
}

// --- Two processes -------------------------------------------------------
// The child runs the disabled test below in a fresh process (its own EAL):
// it is the memif client, sends numbered frames (and two larger than the
// parent's pool can hold), then checks the frames the parent sends back.

constexpr char kChildSocketEnv[] = "SOFTRDMA_MEMIF_CHILD_SOCKET";
constexpr int kChildFrames = 20;
constexpr uint32_t kChildMtu = 12000;

TEST(MemifChild, DISABLED_Peer) {
  const char* sock = std::getenv(kChildSocketEnv);
  ASSERT_NE(sock, nullptr);
  PortOptions c;
  c.devargs = std::string("net_memif0,role=client,id=0,socket=") + sock;
  c.mtu = kChildMtu;
  c.start_timeout_ms = 10000;
  std::string err;
  auto link = open_dpdk_port(c, &err);
  ASSERT_TRUE(link) << err;
  const auto end = frametest::Clock::now() + 10s;
  while (!link->link_up()) {
    ASSERT_LT(frametest::Clock::now(), end);
    std::this_thread::sleep_for(1ms);
  }
  frametest::drain(*link);
  const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  for (int i = 0; i < kChildFrames; ++i) {
    if (i == 5 || i == 15) {  // oversize for the parent: never counted as frames
      ASSERT_TRUE(frametest::send_test_frame(*link, bcast, 1000 + i, kChildMtu + 14));
    }
    ASSERT_TRUE(frametest::send_test_frame(*link, bcast, i, i % 2 ? 9014 : 1514));
  }
  link->tx_flush();
  int got = 0;
  RxFrame f[32];
  while (got < kChildFrames) {
    ASSERT_LT(frametest::Clock::now(), end);
    const int n = link->rx_burst(f, 32);
    for (int i = 0; i < n; ++i) {
      if (frametest::is_test_frame(f[i].data, f[i].len)) {
        EXPECT_EQ(frametest::test_frame_seq(f[i].data), static_cast<uint32_t>(got));
        EXPECT_TRUE(frametest::test_frame_intact(f[i].data, f[i].len));
        ++got;
      }
      link->rx_release(f[i].handle);
    }
  }
  // Stay until the parent has seen everything; it closes first.
  while (link->link_up() && frametest::Clock::now() < end) std::this_thread::sleep_for(1ms);
}

// The child (client) starts first and retries until the server listens.
// A child process that is always reaped: waited for with a bound, killed
// if the test gives up on it.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) wait(0ms);
  }
  // Exit status, or -1 if it had to be killed.
  int wait(std::chrono::milliseconds bound) {
    int status = -1;
    const auto end = frametest::Clock::now() + bound;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (frametest::Clock::now() > end) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(10ms);
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_;
};

// The child (client) starts first and retries until the server listens.
TEST(Memif, TwoProcessesClientFirstAndOversizeFramesDropped) {
  const std::string sock = unique_socket();

  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls (EAL threads may hold locks).
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  env_storage.push_back(std::string(kChildSocketEnv) + "=" + sock);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  char arg0[] = "memif_child", arg1[] = "--gtest_filter=MemifChild.DISABLED_Peer",
       arg2[] = "--gtest_also_run_disabled_tests";
  char* argv[] = {arg0, arg1, arg2, nullptr};

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  Child child(pid);
  std::this_thread::sleep_for(300ms);
  std::string err;
  auto server = open_dpdk_port(memif("server", 0, sock), &err);
  ASSERT_TRUE(server) << err;
  EXPECT_LT(dpdk_mbuf_pool_info().data_room, kChildMtu + 14);

  const auto end = frametest::Clock::now() + 15s;
  int got = 0;
  RxFrame f[32];
  while (got < kChildFrames && frametest::Clock::now() < end) {
    const int n = server->rx_burst(f, 32);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(frametest::test_frame_seq(f[i].data), static_cast<uint32_t>(got));
      EXPECT_EQ(f[i].len, got % 2 ? 9014u : 1514u);
      EXPECT_TRUE(frametest::test_frame_intact(f[i].data, f[i].len));
      ++got;
      server->rx_release(f[i].handle);
    }
  }
  EXPECT_EQ(got, kChildFrames);
  const auto c = counters_of(*server);
  EXPECT_EQ(c.rx_oversize, 2u);
  EXPECT_EQ(c.link.rx_dropped, 2u);

  const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  for (int i = 0; i < kChildFrames; ++i)
    ASSERT_TRUE(frametest::send_test_frame(*server, bcast, i, 64 + i * 70));
  server->tx_flush();
  // The child exits once it has all frames and sees the link drop.
  std::this_thread::sleep_for(200ms);
  server.reset();
  EXPECT_EQ(child.wait(15s), 0);
}

}  // namespace
}  // namespace softrdma::net
