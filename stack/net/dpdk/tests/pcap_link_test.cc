// The pcap decorator over an in-memory FrameLink; files are read back with
// tshark, which must accept them and see every frame.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "stack/net/dpdk/tests/fake_link.h"
#include "stack/net/dpdk/tests/frame_util.h"
#include "stack/net/pcap_link.h"

namespace softrdma::net {
namespace {

std::vector<uint8_t> frame(uint32_t seq, uint32_t len) {
  std::vector<uint8_t> f(len);
  const uint8_t dst[6] = {0x02, 0, 0, 0, 0, 2}, src[6] = {0x02, 0, 0, 0, 0, 1};
  frametest::fill_test_frame(f.data(), dst, src, seq, len);
  return f;
}

std::string capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    pclose(p);
  }
  return out;
}

// (frame.len, eth.type) per frame, as tshark reads the file.
std::vector<std::pair<uint32_t, std::string>> read_with_tshark(const std::string& path) {
  std::istringstream in(capture("tshark -r " + path + " -T fields -e frame.len -e eth.type 2>/dev/null"));
  std::vector<std::pair<uint32_t, std::string>> rows;
  uint32_t len;
  std::string type;
  while (in >> len >> type) rows.emplace_back(len, type);
  return rows;
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

class PcapLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v tshark >/dev/null 2>&1") != 0)
      GTEST_FAIL() << "tshark missing (scripts/setup.sh installs it)";
    path_ = "/tmp/softrdma-pcap-test-" + std::to_string(getpid()) + ".pcap";
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(PcapLinkTest, RecordsEveryReceivedAndTransmittedFrame) {
  auto fake = std::make_unique<FakeLink>();
  FakeLink* raw = fake.get();
  const std::vector<uint32_t> rx_lens = {60, 1514, 9014, 64, 300};
  const std::vector<uint32_t> tx_lens = {60, 77, 1514, 9014, 1000, 42, 2000};
  for (size_t i = 0; i < rx_lens.size(); ++i) raw->push(frame(i, rx_lens[i]));

  std::string err;
  auto link = with_pcap(std::move(fake), path_, &err);
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_NE(link.get(), raw);
  EXPECT_EQ(link->name(), "fake0");
  EXPECT_EQ(link->mtu(), 9000u);

  RxFrame f[8];
  ASSERT_EQ(link->rx_burst(f, 8), 5);
  for (int i = 0; i < 5; ++i) link->rx_release(f[i].handle);
  // Two frames begun before either is committed, committed out of order.
  void *h1, *h2;
  uint8_t* p1 = link->tx_begin(tx_lens[0], &h1);
  uint8_t* p2 = link->tx_begin(tx_lens[1], &h2);
  auto f1 = frame(100, tx_lens[0]), f2 = frame(101, tx_lens[1]);
  std::copy(f1.begin(), f1.end(), p1);
  std::copy(f2.begin(), f2.end(), p2);
  link->tx_commit(h2, tx_lens[1]);
  link->tx_commit(h1, tx_lens[0]);
  for (size_t i = 2; i < tx_lens.size(); ++i) {
    void* h;
    uint8_t* p = link->tx_begin(tx_lens[i], &h);
    ASSERT_NE(p, nullptr);
    auto fr = frame(100 + i, tx_lens[i]);
    std::copy(fr.begin(), fr.end(), p);
    link->tx_commit(h, tx_lens[i]);
  }
  link->tx_flush();
  EXPECT_EQ(raw->sent.size(), tx_lens.size());
  link.reset();  // flushes

  const auto rows = read_with_tshark(path_);
  ASSERT_EQ(rows.size(), rx_lens.size() + tx_lens.size());
  std::vector<uint32_t> want = rx_lens;
  want.push_back(tx_lens[1]);
  want.push_back(tx_lens[0]);
  want.insert(want.end(), tx_lens.begin() + 2, tx_lens.end());
  uint64_t bytes = 0, want_bytes = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].first, want[i]) << "frame " << i;
    EXPECT_EQ(rows[i].second, "0x88b5") << "frame " << i;
    bytes += rows[i].first;
    want_bytes += want[i];
  }
  EXPECT_EQ(bytes, want_bytes);
  // 24-octet file header, 16 per record, then the frames whole.
  EXPECT_EQ(file_size(path_), static_cast<off_t>(24 + 16 * rows.size() + want_bytes));
}

TEST_F(PcapLinkTest, FlushesWhileTheLinkIsPolledAndWhenTheBufferFills) {
  auto fake = std::make_unique<FakeLink>();
  FakeLink* raw = fake.get();
  auto link = with_pcap(std::move(fake), path_);
  raw->push(frame(0, 100));
  RxFrame f[1];
  ASSERT_EQ(link->rx_burst(f, 1), 1);
  link->rx_release(f[0].handle);
  EXPECT_LE(file_size(path_), 24);  // still buffered
  // An idle poll more than a second later writes it out.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(link->rx_burst(f, 1), 0);
  EXPECT_EQ(file_size(path_), 24 + 16 + 100);
  // More than the 1 MiB buffer holds is written without waiting.
  for (int i = 0; i < 200; ++i) raw->push(frame(i, 9014));
  while (link->rx_burst(f, 1) == 1) link->rx_release(f[0].handle);
  EXPECT_GT(file_size(path_), 1 << 19);  // at least one buffer-full already out
  link.reset();
  EXPECT_EQ(read_with_tshark(path_).size(), 201u);
}

TEST_F(PcapLinkTest, UnwritablePathLeavesTheLinkUnwrapped) {
  auto fake = std::make_unique<FakeLink>();
  FakeLink* raw = fake.get();
  std::string err;
  auto link = with_pcap(std::move(fake), "/nonexistent-dir/x.pcap", &err);
  EXPECT_EQ(link.get(), raw);
  EXPECT_NE(err.find("/nonexistent-dir/x.pcap"), std::string::npos) << err;
}

TEST_F(PcapLinkTest, EnvironmentVariableNamesTheFile) {
  unsetenv("FI_SOFTRDMA_PCAP");
  auto fake = std::make_unique<FakeLink>();
  FakeLink* raw = fake.get();
  auto link = with_pcap_from_env(std::move(fake));
  EXPECT_EQ(link.get(), raw);

  const std::string pattern = "/tmp/softrdma-pcap-env-%p-%n.pcap";
  const std::string expanded =
      "/tmp/softrdma-pcap-env-" + std::to_string(getpid()) + "-fake0.pcap";
  setenv("FI_SOFTRDMA_PCAP", pattern.c_str(), 1);
  link = with_pcap_from_env(std::move(link));
  unsetenv("FI_SOFTRDMA_PCAP");
  EXPECT_NE(link.get(), raw);
  raw->push(frame(0, 60));
  RxFrame f[1];
  ASSERT_EQ(link->rx_burst(f, 1), 1);
  link->rx_release(f[0].handle);
  link.reset();
  EXPECT_EQ(read_with_tshark(expanded).size(), 1u);
  unlink(expanded.c_str());
}

}  // namespace
}  // namespace softrdma::net
