// The native FI_EP_RDM protocol's headers: their bytes on the wire, and
// every way a peer's message can break the protocol refused by name.
#include "prov/rdm_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace softrdma::prov {
namespace {

constexpr size_t kEagerLimit = 8192;

std::vector<uint8_t> message(RdmOp op, uint16_t flags, uint64_t size, size_t body) {
  std::vector<uint8_t> m(sizeof(RdmHeader) + body, 0xA5);
  rdm_put_header(m.data(), op, flags, 7, 0x0102030405060708ULL, 0x1112131415161718ULL, 42,
                 size);
  return m;
}

RdmParse parse(const std::vector<uint8_t>& m, RdmMsg* out = nullptr) {
  RdmMsg scratch;
  return rdm_parse(m.data(), m.size(), kEagerLimit, out ? out : &scratch);
}

TEST(RdmWire, HeaderBytesAreBigEndianAtFixedOffsets) {
  const auto m = message(RdmOp::kEager, kRdmTagged | kRdmCqData, 3, 3);
  const std::vector<uint8_t> want = {
      1, 1, 0, 3,               // version, op, flags
      0, 0, 0, 7,               // credits
      1, 2, 3, 4, 5, 6, 7, 8,   // tag
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // cq_data
      0, 0, 0, 0, 0, 0, 0, 42,  // msg_id
      0, 0, 0, 0, 0, 0, 0, 3};  // size
  ASSERT_EQ(want.size(), sizeof(RdmHeader));
  EXPECT_EQ(std::vector<uint8_t>(m.begin(), m.begin() + sizeof(RdmHeader)), want);
}

TEST(RdmWire, EagerRoundTrip) {
  auto m = message(RdmOp::kEager, kRdmTagged | kRdmAckDelivery, 5, 5);
  std::memcpy(m.data() + sizeof(RdmHeader), "hello", 5);
  RdmMsg r;
  ASSERT_EQ(parse(m, &r), RdmParse::kOk);
  EXPECT_EQ(r.op, RdmOp::kEager);
  EXPECT_EQ(r.flags, kRdmTagged | kRdmAckDelivery);
  EXPECT_EQ(r.credits, 7U);
  EXPECT_EQ(r.tag, 0x0102030405060708ULL);
  EXPECT_EQ(r.cq_data, 0x1112131415161718ULL);
  EXPECT_EQ(r.msg_id, 42U);
  ASSERT_EQ(r.size, 5U);
  EXPECT_EQ(std::memcmp(r.payload, "hello", 5), 0);
  // Empty messages are messages too.
  EXPECT_EQ(parse(message(RdmOp::kEager, 0, 0, 0)), RdmParse::kOk);
}

TEST(RdmWire, RendezvousRoundTrip) {
  auto m = message(RdmOp::kRendezvous, kRdmTagged, 64 << 20, sizeof(RdmRendezvous));
  RdmRendezvous rv{};
  rv.stag.set(0xABCDEF01);
  rv.addr.set(0x7F0012345678ULL);
  std::memcpy(m.data() + sizeof(RdmHeader), &rv, sizeof(rv));
  RdmMsg r;
  ASSERT_EQ(parse(m, &r), RdmParse::kOk);
  EXPECT_EQ(r.op, RdmOp::kRendezvous);
  EXPECT_EQ(r.size, uint64_t{64} << 20);
  EXPECT_EQ(r.stag, 0xABCDEF01U);
  EXPECT_EQ(r.addr, 0x7F0012345678ULL);
}

TEST(RdmWire, ControlMessagesAreTheHeaderAlone) {
  for (RdmOp op : {RdmOp::kRendezvousDone, RdmOp::kDeliveryAck, RdmOp::kCredit}) {
    RdmMsg r;
    EXPECT_EQ(parse(message(op, 0, 0, 0), &r), RdmParse::kOk);
    EXPECT_EQ(r.op, op);
    EXPECT_EQ(r.msg_id, 42U);
    EXPECT_EQ(parse(message(op, 0, 0, 1)), RdmParse::kLength);
    EXPECT_EQ(parse(message(op, 0, 1, 0)), RdmParse::kLength);
    EXPECT_EQ(parse(message(op, kRdmTagged, 0, 0)), RdmParse::kFlags);
  }
}

TEST(RdmWire, BrokenMessagesAreRefusedByName) {
  auto m = message(RdmOp::kEager, 0, 0, 0);
  RdmMsg r;
  EXPECT_EQ(rdm_parse(m.data(), sizeof(RdmHeader) - 1, kEagerLimit, &r), RdmParse::kShort);
  EXPECT_EQ(rdm_parse(m.data(), 0, kEagerLimit, &r), RdmParse::kShort);
  m[0] = 2;
  EXPECT_EQ(parse(m), RdmParse::kVersion);
  m[0] = kRdmVersion;
  for (uint8_t op : {0, 6, 255}) {
    m[1] = op;
    EXPECT_EQ(parse(m), RdmParse::kOp) << int{op};
  }
  EXPECT_EQ(parse(message(RdmOp::kEager, 1 << 3, 0, 0)), RdmParse::kFlags);
  EXPECT_EQ(parse(message(RdmOp::kEager, 0x8000, 0, 0)), RdmParse::kFlags);
  EXPECT_EQ(parse(message(RdmOp::kEager, 0, 5, 4)), RdmParse::kLength);
  EXPECT_EQ(parse(message(RdmOp::kEager, 0, 4, 5)), RdmParse::kLength);
  EXPECT_EQ(parse(message(RdmOp::kEager, 0, kEagerLimit + 1, kEagerLimit + 1)),
            RdmParse::kTooLarge);
  EXPECT_EQ(parse(message(RdmOp::kEager, 0, kEagerLimit, kEagerLimit)), RdmParse::kOk);
  EXPECT_EQ(parse(message(RdmOp::kEager, 0, ~0ULL, 0)), RdmParse::kTooLarge);
  EXPECT_EQ(parse(message(RdmOp::kRendezvous, 0, 1 << 20, sizeof(RdmRendezvous) - 1)),
            RdmParse::kLength);
  EXPECT_EQ(parse(message(RdmOp::kRendezvous, 0, kRdmMaxSize, sizeof(RdmRendezvous))),
            RdmParse::kOk);
  EXPECT_EQ(parse(message(RdmOp::kRendezvous, 0, kRdmMaxSize + 1, sizeof(RdmRendezvous))),
            RdmParse::kTooLarge);
  auto credits = message(RdmOp::kCredit, 0, 0, 0);
  credits[7] = kRdmBuffers;
  EXPECT_EQ(parse(credits), RdmParse::kOk);
  credits[7] = kRdmBuffers + 1;
  EXPECT_EQ(parse(credits), RdmParse::kCredits);
  credits[4] = 0x80;  // a peer that would wrap a 32-bit count
  credits[7] = 0;
  EXPECT_EQ(parse(credits), RdmParse::kCredits);
  EXPECT_STREQ(rdm_parse_name(RdmParse::kCredits), "more credits than buffers");
}

TEST(RdmWire, HelloNamesTheConnector) {
  const RdmHello h = rdm_hello(0x0A000002, 40001, kRdmBuffers);
  const auto* b = reinterpret_cast<const uint8_t*>(&h);
  EXPECT_EQ(std::memcmp(b, "SRDM", 4), 0);
  EXPECT_EQ(b[6], 40001 >> 8);
  EXPECT_EQ(b[7], 40001 & 0xFF);
  EXPECT_EQ(b[8], 10);
  EXPECT_EQ(b[11], 2);
  RdmHello got;
  ASSERT_TRUE(rdm_hello_ok(&h, sizeof(h), &got));
  EXPECT_EQ(got.addr.get(), 0x0A000002U);
  EXPECT_EQ(got.port.get(), 40001);
  EXPECT_EQ(got.credits.get(), kRdmBuffers);

  EXPECT_FALSE(rdm_hello_ok(nullptr, 0, &got));
  EXPECT_FALSE(rdm_hello_ok(&h, sizeof(h) - 1, &got));
  RdmHello bad = h;
  bad.magic[0] = 'X';
  EXPECT_FALSE(rdm_hello_ok(&bad, sizeof(bad), &got));
  bad = h;
  bad.version = 9;
  EXPECT_FALSE(rdm_hello_ok(&bad, sizeof(bad), &got));
  bad = rdm_hello(0x0A000002, 0, kRdmBuffers);
  EXPECT_FALSE(rdm_hello_ok(&bad, sizeof(bad), &got));
  bad = rdm_hello(0x0A000002, 40001, kRdmBuffers + 1);
  EXPECT_FALSE(rdm_hello_ok(&bad, sizeof(bad), &got));
}

}  // namespace
}  // namespace softrdma::prov
