// Kernel-interface ports (af_packet, af_xdp) on a veth pair that the test
// makes in a network namespace of its own and deletes afterwards. The
// ports are opened with PortOptions::netns, so nothing touches the host's
// interfaces. Needs root; skipped otherwise.
#include <net/if.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "stack/net/dpdk/port.h"
#include "stack/net/dpdk/tests/frame_util.h"

namespace softrdma::net {
namespace {

using namespace std::chrono_literals;

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

std::string capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    pclose(p);
  }
  return out;
}

class KernelIfTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_FAIL() << "needs root (netns, veth)";
    netns_ = "softrdma-t" + std::to_string(getpid());
    sh("ip netns del " + netns_);  // a leftover of a killed run
    const std::string in = "ip -n " + netns_ + " ";
    // No IPv6 in the namespace: the kernel stays silent on the veths.
    ASSERT_TRUE(sh("ip netns add " + netns_));
    created_ = true;
    ASSERT_TRUE(sh("ip netns exec " + netns_ +
                   " sysctl -qw net.ipv6.conf.all.disable_ipv6=1"
                   " net.ipv6.conf.default.disable_ipv6=1"));
    ASSERT_TRUE(sh(in + "link add " + kA + " type veth peer name " + kB));
    ASSERT_TRUE(sh(in + "link set " + kA + " up"));
    ASSERT_TRUE(sh(in + "link set " + kB + " up"));
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    if (created_) {
      EXPECT_TRUE(sh("ip netns del " + netns_));  // takes the veths along
    }
  }

  std::unique_ptr<FrameLink> open(int index, const char* iface, std::string* err) {
    PortOptions o;
    o.devargs = std::string(GetParam()) + std::to_string(index) + ",iface=" + iface;
    o.netns = netns_;
    return open_dpdk_port(o, err);
  }

  std::string mac_of(const char* iface) {
    // "va@vb  UP  aa:bb:cc:dd:ee:ff <...>"
    const std::string out = capture("ip -n " + netns_ + " -br link show " + iface);
    char name[64], state[64], mac[64];
    if (std::sscanf(out.c_str(), "%63s %63s %63s", name, state, mac) != 3) return "";
    return mac;
  }

  static std::string mac_text(const uint8_t* m) {
    char s[18];
    std::snprintf(s, sizeof(s), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                  m[5]);
    return s;
  }

  static constexpr const char* kA = "softrdma-va";
  static constexpr const char* kB = "softrdma-vb";
  std::string netns_;
  bool created_ = false;
  std::unique_ptr<FrameLink> a_, b_;
};

TEST_P(KernelIfTest, ExchangesFramesOverAVethPairInItsOwnNetns) {
  std::string err;
  a_ = open(0, kA, &err);
  if (!a_ && std::string(GetParam()) == "net_af_xdp")
    GTEST_SKIP() << "af_xdp unavailable here: " << err;
  ASSERT_TRUE(a_) << err;
  b_ = open(1, kB, &err);
  ASSERT_TRUE(b_) << err;
  ASSERT_TRUE(frametest::wait_link_up(*a_, *b_, 5s));

  EXPECT_EQ(if_nametoindex(kA), 0u);  // not in the host's namespace
  EXPECT_EQ(mac_text(a_->mac()), mac_of(kA));
  EXPECT_EQ(mac_text(b_->mac()), mac_of(kB));
  EXPECT_EQ(dynamic_cast<DpdkPort&>(*a_).driver(), GetParam());
  EXPECT_FALSE(a_->trusted_checksums());  // no rx checksum offload on these PMDs

  EXPECT_TRUE(frametest::exchange(*a_, *b_, 2000, frametest::kMinTestFrame, 1514, 10s, 1));
  EXPECT_TRUE(frametest::exchange(*b_, *a_, 2000, frametest::kMinTestFrame, 1514, 10s, 2));
  EXPECT_EQ(a_->counters().tx_packets, 2000u);
  EXPECT_EQ(a_->counters().tx_dropped, 0u);
  EXPECT_GE(b_->counters().rx_packets, 2000u);
}

INSTANTIATE_TEST_SUITE_P(Pmd, KernelIfTest, ::testing::Values("net_af_packet", "net_af_xdp"),
                         [](const auto& p) { return std::string(p.param).substr(4); });

}  // namespace
}  // namespace softrdma::net
