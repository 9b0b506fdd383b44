// The counters extension (prov/fi_ext_softrdma.h): fi_open_ops on the
// fabric and the domain, and counters that follow the traffic actually sent.
#include <cstdlib>
#include <cstring>
#include <string>

#include "fi-tests/fi_test.h"
#include "prov/fi_ext_softrdma.h"

namespace fit {
namespace {

class Counters : public Connected {
 protected:
  fi_softrdma_counters_ops* ops(fid* f) {
    void* p = nullptr;
    if (fi_open_ops(f, FI_SOFTRDMA_COUNTERS_OPS, 0, &p, nullptr) != 0) return nullptr;
    return static_cast<fi_softrdma_counters_ops*>(p);
  }
  softrdma_counters read() {
    softrdma_counters c{};
    fi_softrdma_counters_ops* o = ops(&f_->fabric()->fid);
    EXPECT_NE(o, nullptr);
    if (o) {
      EXPECT_EQ(o->read(&f_->fabric()->fid, &c, sizeof(c)), 0);
    }
    return c;
  }
  // One message of n bytes client -> server, data checked.
  void send(size_t n, uint64_t seed) {
    std::vector<uint8_t> src(n), dst(n);
    fill(src.data(), n, seed);
    ASSERT_EQ(fi_recv(s_->ep, dst.data(), n, nullptr, 0, nullptr), 0);
    ASSERT_EQ(fi_send(c_->ep, src.data(), n, nullptr, 0, nullptr), 0);
    fi_cq_data_entry e;
    ASSERT_EQ(cq_wait(s_->rx, &e), 1);
    ASSERT_EQ(cq_wait(c_->tx, &e), 1);
    ASSERT_TRUE(same(dst.data(), n, seed));
  }
  static bool over_dpdk() {
    const char* t = std::getenv("FI_SOFTRDMA_TRANSPORT");
    return t == nullptr || std::string(t) == "dpdk";
  }
};

TEST_F(Counters, OpenedOnFabricAndDomainOnly) {
  fi_softrdma_counters_ops* f = ops(&f_->fabric()->fid);
  fi_softrdma_counters_ops* d = ops(&f_->domain()->fid);
  ASSERT_NE(f, nullptr);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(f->size, sizeof(fi_softrdma_counters_ops));
  softrdma_counters c{};
  EXPECT_EQ(d->read(&f_->domain()->fid, &c, sizeof(c)), 0);
  EXPECT_EQ(f->read(&c_->ep->fid, &c, sizeof(c)), -FI_EINVAL);  // an endpoint is neither
  void* p = nullptr;
  EXPECT_EQ(fi_open_ops(&f_->fabric()->fid, "softrdma_counters_v0", 0, &p, nullptr), -FI_ENOSYS);
}

TEST_F(Counters, FollowTheTraffic) {
  const softrdma_counters before = read();
  EXPECT_EQ(before.qps, 2u);  // the connected pair, both ends in this engine
  EXPECT_EQ(before.connections, 2u);
  constexpr size_t kBytes = 1 << 20;
  constexpr int kMessages = 8;
  for (int i = 0; i < kMessages; ++i) {
    send(kBytes, 100 + i);
    if (HasFatalFailure()) return;
  }
  const softrdma_counters after = read();
  const uint64_t payload = uint64_t{kBytes} * kMessages;
  EXPECT_EQ(after.payload_tx - before.payload_tx, payload);
  EXPECT_EQ(after.payload_rx - before.payload_rx, payload);
  EXPECT_EQ(after.rx_copy_bytes - before.rx_copy_bytes, payload) << "one copy on receive";
  EXPECT_GE(after.fpdus_tx - before.fpdus_tx, payload / 65536);
  EXPECT_EQ(after.fpdus_rx - before.fpdus_rx, after.fpdus_tx - before.fpdus_tx);
  EXPECT_EQ(after.terminates_tx, 0u);
  EXPECT_EQ(after.crc_errors, 0u);
  // Both ends live in this process, so the bytes take lwIP's loopback (or
  // kernel TCP) and no link carries a frame; two_process_test.sh checks the
  // link counters against the payload between two processes.
  EXPECT_EQ(after.tx_packets, before.tx_packets);
  EXPECT_EQ(after.rx_packets, before.rx_packets);
  if (over_dpdk()) {
    EXPECT_GT(after.mbufs_total, 0u);
    EXPECT_LT(after.mbufs_in_use, after.mbufs_total);
  } else {
    EXPECT_EQ(after.mbufs_total, 0u);
  }
}

TEST_F(Counters, ResourcesInUse) {
  const softrdma_counters before = read();
  std::vector<uint8_t> buf(4096);
  fid_mr* mr = f_->reg(buf.data(), buf.size(), FI_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(read().mrs, before.mrs + 1);
  fi_close(&mr->fid);
  EXPECT_EQ(read().mrs, before.mrs);
  // Closing an endpoint takes its QP and, once the peer has seen the
  // disconnect, its connection.
  s_.reset();
  EXPECT_EQ(read().qps, before.qps - 1);
}

// An older caller's smaller struct gets the leading fields, nothing beyond.
TEST_F(Counters, SmallerStructGetsItsFields) {
  send(4096, 7);
  if (HasFatalFailure()) return;
  uint8_t raw[sizeof(softrdma_counters) + 8];
  std::memset(raw, 0xa5, sizeof(raw));
  const size_t part = offsetof(softrdma_counters, fpdus_tx);
  fi_softrdma_counters_ops* o = ops(&f_->fabric()->fid);
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(o->read(&f_->fabric()->fid, reinterpret_cast<softrdma_counters*>(raw), part), 0);
  for (size_t i = part; i < sizeof(raw); ++i) ASSERT_EQ(raw[i], 0xa5) << "byte " << i;
}

}  // namespace
}  // namespace fit
