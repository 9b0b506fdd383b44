// The fault-injection decorator over an in-memory link: each kind of fault
// at rate 1 (or 0) does exactly what it says to the frames, and nothing is
// leaked (ASan runs this test).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "stack/net/dpdk/tests/fake_link.h"
#include "stack/net/fault_link.h"

namespace softrdma::net {
namespace {

std::vector<uint8_t> frame(uint8_t fill, uint32_t len = 100) { return std::vector<uint8_t>(len, fill); }

struct Wrapped {
  FakeLink* fake;
  std::unique_ptr<FrameLink> link;
};

Wrapped wrap(const char* spec) {
  FaultRates r;
  std::string err;
  EXPECT_TRUE(parse_fault_rates(spec, &r, &err)) << err;
  auto fake = std::make_unique<FakeLink>();
  FakeLink* raw = fake.get();
  return {raw, with_faults(std::move(fake), r)};
}

void send(FrameLink& l, const std::vector<uint8_t>& f) {
  void* h = nullptr;
  uint8_t* d = l.tx_begin(static_cast<uint32_t>(f.size()), &h);
  ASSERT_NE(d, nullptr);
  std::copy(f.begin(), f.end(), d);
  l.tx_commit(h, static_cast<uint32_t>(f.size()));
}

TEST(FaultLink, ParsesRatesAndRefusesBadOnes) {
  FaultRates r;
  std::string err;
  ASSERT_TRUE(parse_fault_rates("drop=0.02,dup=0.5,reorder=1,corrupt=0,reset=0.25,seed=9", &r, &err)) << err;
  EXPECT_DOUBLE_EQ(r.drop, 0.02);
  EXPECT_DOUBLE_EQ(r.dup, 0.5);
  EXPECT_DOUBLE_EQ(r.reorder, 1);
  EXPECT_DOUBLE_EQ(r.reset, 0.25);
  EXPECT_EQ(r.seed, 9u);
  for (const char* bad : {"lose=0.1", "drop=1.5", "drop=-0.1", "drop=", "drop=0.1x", "seed=abc"}) {
    err.clear();
    EXPECT_FALSE(parse_fault_rates(bad, &r, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
}

TEST(FaultLink, NoFaultsMeansNoDecorator) {
  auto fake = std::make_unique<FakeLink>();
  FrameLink* raw = fake.get();
  EXPECT_EQ(with_faults(std::move(fake), FaultRates{}).get(), raw);
}

TEST(FaultLink, DropsEveryFrameAndReleasesIt) {
  Wrapped w = wrap("drop=1");
  for (uint8_t i = 0; i < 5; ++i) w.fake->push(frame(i));
  RxFrame out[8];
  EXPECT_EQ(w.link->rx_burst(out, 8), 0);
  EXPECT_EQ(w.fake->released, 5);
  EXPECT_EQ(fault_counters(*w.link).dropped, 5u);
}

TEST(FaultLink, CorruptsOneBitPastTheEthernetHeader) {
  Wrapped w = wrap("corrupt=1");
  EXPECT_FALSE(w.link->trusted_checksums());  // the stack must check sums now
  for (int i = 0; i < 50; ++i) w.fake->push(frame(0));
  RxFrame out[64];
  const int n = w.link->rx_burst(out, 64);
  ASSERT_EQ(n, 50);
  for (int i = 0; i < n; ++i) {
    int flipped = 0;
    for (uint32_t k = 0; k < out[i].len; ++k) {
      flipped += __builtin_popcount(out[i].data[k]);
      if (out[i].data[k] != 0) {
        EXPECT_GE(k, 14u) << "frame " << i;
      }
    }
    EXPECT_EQ(flipped, 1) << "frame " << i;
    w.link->rx_release(out[i].handle);
  }
  EXPECT_EQ(fault_counters(*w.link).corrupted, 50u);
}

TEST(FaultLink, DuplicatesEveryFrame) {
  Wrapped w = wrap("dup=1");
  send(*w.link, frame(1));
  send(*w.link, frame(2, 60));
  w.link->tx_flush();
  ASSERT_EQ(w.fake->sent.size(), 4u);
  EXPECT_EQ(w.fake->sent[0], frame(1));
  EXPECT_EQ(w.fake->sent[1], frame(1));
  EXPECT_EQ(w.fake->sent[2], frame(2, 60));
  EXPECT_EQ(w.fake->sent[3], frame(2, 60));
  EXPECT_EQ(fault_counters(*w.link).duplicated, 2u);
}

TEST(FaultLink, ReordersWithinABurstAndLosesNothing) {
  Wrapped w = wrap("reorder=1");
  send(*w.link, frame(1));
  send(*w.link, frame(2));  // 1 was held: it goes out after 2
  send(*w.link, frame(3));  // held again...
  EXPECT_EQ(w.fake->sent.size(), 2u);
  w.link->tx_flush();       // ...and released by the end of the burst
  ASSERT_EQ(w.fake->sent.size(), 3u);
  EXPECT_EQ(w.fake->sent[0], frame(2));
  EXPECT_EQ(w.fake->sent[1], frame(1));
  EXPECT_EQ(w.fake->sent[2], frame(3));
  EXPECT_EQ(fault_counters(*w.link).reordered, 1u);
}

// An Ethernet/IPv4/TCP frame with valid checksums and `payload` bytes of data.
std::vector<uint8_t> tcp_frame(uint8_t flags, uint32_t seq, uint32_t payload) {
  std::vector<uint8_t> f(14 + 20 + 20 + payload, 0xab);
  f[12] = 0x08, f[13] = 0x00;
  uint8_t* ip = f.data() + 14;
  const uint32_t tot = 40 + payload;
  const uint8_t iph[20] = {0x45, 0, uint8_t(tot >> 8), uint8_t(tot), 0, 1, 0x40, 0, 64, 6, 0, 0,
                           10, 0, 0, 1, 10, 0, 0, 2};
  std::copy(iph, iph + 20, ip);
  uint8_t* tcp = ip + 20;
  const uint8_t th[20] = {0x30, 0x39, 0xc0, 0x01, uint8_t(seq >> 24), uint8_t(seq >> 16),
                          uint8_t(seq >> 8), uint8_t(seq), 0, 0, 0, 7, 0x50, flags, 0xff, 0xff,
                          0, 0, 0, 0};
  std::copy(th, th + 20, tcp);
  return f;
}
// RFC 1071: a header with its checksum in place sums to 0xffff.
uint16_t ones_sum(const uint8_t* p, size_t len, uint32_t acc) {
  for (; len > 1; p += 2, len -= 2) acc += uint32_t(p[0]) << 8 | p[1];
  if (len) acc += uint32_t(p[0]) << 8;
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

TEST(FaultLink, ResetsTcpSegmentsWithTheirSequenceNumber) {
  Wrapped w = wrap("reset=1");
  w.fake->push(tcp_frame(0x18, 0x01020304, 1000));  // PSH|ACK with data: reset
  w.fake->push(tcp_frame(0x12, 7, 0));              // SYN|ACK: left alone
  w.fake->push(frame(0x45));                        // not IPv4: left alone
  RxFrame out[4];
  ASSERT_EQ(w.link->rx_burst(out, 4), 3);
  const uint8_t* ip = out[0].data + 14;
  const uint8_t* tcp = ip + 20;
  EXPECT_EQ(out[0].len, 54u);
  EXPECT_EQ(ip[2] << 8 | ip[3], 40);
  EXPECT_EQ(tcp[13], 0x14);  // RST|ACK
  EXPECT_EQ(tcp[4] << 24 | tcp[5] << 16 | tcp[6] << 8 | tcp[7], 0x01020304);
  EXPECT_EQ(ones_sum(ip, 20, 0), 0xffff) << "IPv4 header checksum";
  const uint32_t pseudo = ones_sum(ip + 12, 8, 6 + 20);
  EXPECT_EQ(ones_sum(tcp, 20, pseudo), 0xffff) << "TCP checksum";
  EXPECT_EQ(out[1].len, 54u);
  EXPECT_EQ(out[1].data[14 + 20 + 13], 0x12);
  EXPECT_EQ(out[2].len, 100u);
  for (int i = 0; i < 3; ++i) w.link->rx_release(out[i].handle);
  EXPECT_EQ(fault_counters(*w.link).reset, 1u);
}

}  // namespace
}  // namespace softrdma::net
