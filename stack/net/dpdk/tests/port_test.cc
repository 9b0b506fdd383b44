// open_dpdk_port's own logic (rx chain handling, limits, counters, errors)
// on net_ring: a vdev whose tx queue feeds its own rx queue with the very
// mbufs sent, so tests can inject hand-made mbuf chains.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "stack/net/dpdk/eal.h"
#include "stack/net/dpdk/port.h"
#include "stack/net/dpdk/tests/frame_util.h"

namespace softrdma::net {
namespace {

using namespace std::chrono_literals;

// A fresh name each time: net_ring keeps its rings after removal.
std::unique_ptr<FrameLink> open_ring() {
  static int n = 0;
  PortOptions o;
  o.devargs = "net_ring" + std::to_string(n++);
  std::string err;
  auto l = open_dpdk_port(o, &err);
  EXPECT_TRUE(l) << err;
  return l;
}

DpdkPort& dpdk(FrameLink& l) { return dynamic_cast<DpdkPort&>(l); }

// An mbuf of the shared pool, borrowed through tx_begin.
rte_mbuf* segment(FrameLink& l, uint32_t len, uint8_t first, uint32_t offset = 0) {
  void* h = nullptr;
  EXPECT_NE(l.tx_begin(64, &h), nullptr);
  auto* m = static_cast<rte_mbuf*>(h);
  m->data_off = static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + offset);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(first + i);
  return m;
}

void chain(rte_mbuf* head, rte_mbuf* tail) { ASSERT_EQ(rte_pktmbuf_chain(head, tail), 0); }

// Sends m straight into the port's tx queue, bypassing tx_begin/commit.
void inject(FrameLink& l, rte_mbuf* m) {
  ASSERT_EQ(rte_eth_tx_burst(dpdk(l).port_id(), 0, &m, 1), 1);
}

std::vector<RxFrame> receive(FrameLink& l, size_t want) {
  std::vector<RxFrame> out;
  RxFrame f[32];
  const auto end = frametest::Clock::now() + 2s;
  while (out.size() < want && frametest::Clock::now() < end) {
    const int n = l.rx_burst(f, 32);
    out.insert(out.end(), f, f + n);
  }
  return out;
}

TEST(RingPort, LoopsFramesBackWithCountersAndNoLeak) {
  auto l = open_ring();
  ASSERT_TRUE(l);
  const MbufPoolInfo pool = dpdk_mbuf_pool_info();
  EXPECT_EQ(pool.size, 16384u);
  EXPECT_EQ(pool.priv_size, kFramePrivSize);
  EXPECT_EQ(pool.data_room, uint32_t{RTE_MBUF_DEFAULT_DATAROOM});
  EXPECT_EQ(dpdk(*l).driver(), "net_ring");
  EXPECT_TRUE(l->link_up());
  EXPECT_FALSE(l->trusted_checksums());  // no checksum offload to lean on
  EXPECT_EQ(l->rx_wait_fd(), -1);

  EXPECT_TRUE(frametest::exchange(*l, *l, 5000, frametest::kMinTestFrame, 1514, 10s));
  const LinkCounters c = l->counters();
  EXPECT_EQ(c.tx_packets, 5000u);
  EXPECT_EQ(c.rx_packets, 5000u);
  EXPECT_EQ(c.tx_bytes, c.rx_bytes);
  EXPECT_EQ(c.tx_dropped + c.rx_dropped, 0u);
  EXPECT_EQ(dpdk_mbuf_pool_info().available, pool.available);
}

TEST(RingPort, PrivateScratchSitsBeforeTheFrameInTheSameMbuf) {
  auto l = open_ring();
  ASSERT_TRUE(l);
  ASSERT_TRUE(frametest::send_test_frame(*l, l->mac(), 7, 100));
  l->tx_flush();
  auto got = receive(*l, 1);
  ASSERT_EQ(got.size(), 1u);
  const RxFrame& f = got[0];
  EXPECT_EQ(f.priv, static_cast<uint8_t*>(f.handle) + sizeof(rte_mbuf));
  EXPECT_GE(f.data - static_cast<const uint8_t*>(f.priv), static_cast<ptrdiff_t>(kFramePrivSize));
  std::memset(f.priv, 0xab, kFramePrivSize);  // the stack's to use
  EXPECT_TRUE(frametest::test_frame_intact(f.data, f.len));
  l->rx_release(f.handle);
}

TEST(RingPort, ChainsAreLinearizedOrDropped) {
  auto l = open_ring();
  ASSERT_TRUE(l);
  const MbufPoolInfo pool = dpdk_mbuf_pool_info();
  const uint32_t room = pool.data_room;

  // 1: fits the first segment's tailroom, joined in place.
  rte_mbuf* a = segment(*l, 100, 0);
  chain(a, segment(*l, 200, 100));
  chain(a, segment(*l, 50, 44));
  inject(*l, a);
  // 2: first segment near the end of its buffer, copied into a fresh mbuf.
  rte_mbuf* b = segment(*l, 200, 1, room - 300);
  chain(b, segment(*l, 500, 201));
  inject(*l, b);
  // 3: longer than any mbuf: dropped.
  rte_mbuf* c = segment(*l, room - 100, 0);
  chain(c, segment(*l, 200, 0));
  inject(*l, c);
  // 4: pkt_len disagrees with the segments: dropped rather than trusted.
  rte_mbuf* d = segment(*l, 100, 0);
  chain(d, segment(*l, 100, 0));
  d->pkt_len = 150;
  inject(*l, d);
  // 5: an ordinary frame after them.
  ASSERT_TRUE(frametest::send_test_frame(*l, l->mac(), 5, 300));
  l->tx_flush();

  auto got = receive(*l, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].len, 350u);
  EXPECT_EQ(got[1].len, 700u);
  for (const RxFrame* f : {&got[0], &got[1]}) {
    const auto* m = static_cast<const rte_mbuf*>(f->handle);
    EXPECT_EQ(m->nb_segs, 1);
    for (uint32_t i = 0; i < f->len; ++i)
      ASSERT_EQ(f->data[i], static_cast<uint8_t>((f == &got[0] ? 0 : 1) + i)) << i;
    EXPECT_EQ(f->priv, reinterpret_cast<const uint8_t*>(m) + sizeof(rte_mbuf));
  }
  EXPECT_TRUE(frametest::is_test_frame(got[2].data, got[2].len));
  for (auto& f : got) l->rx_release(f.handle);

  const DpdkPortCounters k = dpdk(*l).dpdk_counters();
  EXPECT_EQ(k.rx_linearized, 2u);
  EXPECT_EQ(k.rx_oversize, 1u);
  EXPECT_EQ(k.link.rx_dropped, 2u);
  EXPECT_EQ(k.link.rx_packets, 3u);
  EXPECT_EQ(dpdk_mbuf_pool_info().available, pool.available);
}

TEST(RingPort, TxLimitsAreCountedAsDrops) {
  auto l = open_ring();
  ASSERT_TRUE(l);
  void* h = nullptr;
  EXPECT_EQ(l->tx_begin(l->mtu() + 19, &h), nullptr);  // beyond mtu + header + VLAN tag
  EXPECT_EQ(l->counters().tx_dropped, 1u);
  ASSERT_TRUE(frametest::send_test_frame(*l, l->mac(), 0, l->mtu() + 18));
  l->tx_flush();
  auto got = receive(*l, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].len, l->mtu() + 18);
  l->rx_release(got[0].handle);

  // An empty pool: tx_begin gives null, and works again once mbufs return.
  std::vector<void*> held;
  while (l->tx_begin(64, &h) != nullptr) held.push_back(h);
  EXPECT_GT(held.size(), 16000u);
  EXPECT_EQ(l->counters().tx_dropped, 2u);
  for (void* m : held) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  ASSERT_NE(l->tx_begin(64, &h), nullptr);
  rte_pktmbuf_free(static_cast<rte_mbuf*>(h));
}

TEST(RingPort, OpenErrorsLeaveNothingBehind) {
  auto l = open_ring();
  ASSERT_TRUE(l);
  const uint16_t ports = rte_eth_dev_count_avail();
  std::string err;
  PortOptions o;
  EXPECT_FALSE(open_dpdk_port(o, &err));
  EXPECT_NE(err.find("empty devargs"), std::string::npos) << err;

  o.devargs = "net_nosuchpmd0";
  EXPECT_FALSE(open_dpdk_port(o, &err));
  EXPECT_NE(err.find("rte_dev_probe"), std::string::npos) << err;

  o.devargs = l->name();
  EXPECT_FALSE(open_dpdk_port(o, &err));
  EXPECT_NE(err.find("already open"), std::string::npos) << err;

  o.devargs = "net_ring99";
  o.mtu = 9000;  // the pool was made for 1500
  EXPECT_FALSE(open_dpdk_port(o, &err));
  EXPECT_NE(err.find("pool_data_room"), std::string::npos) << err;

  o.mtu = 1500;
  o.netns = "softrdma-no-such-netns";
  EXPECT_FALSE(open_dpdk_port(o, &err));
  EXPECT_NE(err.find("netns"), std::string::npos) << err;

  EXPECT_EQ(rte_eth_dev_count_avail(), ports);
  EXPECT_TRUE(frametest::exchange(*l, *l, 10, frametest::kMinTestFrame, 1514, 5s));
  l.reset();
  EXPECT_EQ(rte_eth_dev_count_avail(), 0u);
}

}  // namespace
}  // namespace softrdma::net
