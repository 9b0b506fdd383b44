// MPA connection setup: Request/Reply frames (RFC 5044 §7.1), enhanced
// connection establishment (RFC 6581 §5), and the negotiation that turns a
// Request and a Reply into both ends' settings.
#include "stack/iwarp/mpa.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace softrdma::iwarp {
namespace {

std::vector<uint8_t> pdata(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// Feeds the whole frame in pieces of `piece` octets (0: all at once), then
// checks the reader stopped exactly at the frame's end.
MpaStatus read_frame(MpaReader& r, const std::vector<uint8_t>& frame, size_t piece,
                     size_t* consumed) {
  size_t off = 0;
  MpaStatus st = MpaStatus::kNeedMore;
  while (off < frame.size() && st == MpaStatus::kNeedMore) {
    size_t n = piece ? std::min(piece, frame.size() - off) : frame.size() - off;
    size_t used = 0;
    st = r.feed(frame.data() + off, n, &used);
    EXPECT_LE(used, n);
    if (st == MpaStatus::kNeedMore) {
      EXPECT_EQ(used, n) << "short read while needing more";
    }
    off += used;
  }
  *consumed = off;
  return st;
}

void expect_same(const MpaParams& got, const MpaParams& want, bool reply) {
  EXPECT_EQ(got.rev, want.rev);
  EXPECT_EQ(got.markers, want.markers);
  EXPECT_EQ(got.crc, want.crc);
  EXPECT_EQ(got.reject, reply && want.reject);
  EXPECT_EQ(got.private_data, want.private_data);
  if (want.rev == kMpaRev2) {
    EXPECT_EQ(got.p2p, want.p2p);
    EXPECT_EQ(got.ird, want.ird);
    EXPECT_EQ(got.ord, want.ord);
    EXPECT_EQ(got.rtr_write, want.rtr_write);
    EXPECT_EQ(got.rtr_read, want.rtr_read);
    EXPECT_EQ(got.rtr_send, want.rtr_send);
  } else {  // rev 1 carries none of these
    EXPECT_FALSE(got.p2p);
    EXPECT_FALSE(got.rtr_write || got.rtr_read || got.rtr_send);
  }
}

TEST(MpaFrameTest, RoundTripAllPrivateDataSizes) {
  for (bool reply : {false, true}) {
    for (uint8_t rev : {kMpaRev1, kMpaRev2}) {
      const size_t max_pd = kMpaMaxPrivateData - (rev == kMpaRev2 ? sizeof(MpaV2Params) : 0);
      for (size_t n = 0; n <= max_pd; ++n) {
        MpaParams p;
        p.rev = rev;
        p.markers = n & 1;
        p.crc = n & 2;
        p.reject = n & 4;
        p.p2p = n & 8;
        p.ird = static_cast<uint16_t>((n * 37) & kMpaV2IrdOrdMask);
        p.ord = static_cast<uint16_t>((n * 101 + 5) & kMpaV2IrdOrdMask);
        p.rtr_write = n & 16;
        p.rtr_read = n & 32;
        p.rtr_send = n & 64;
        p.private_data = pdata(n, static_cast<uint8_t>(n));
        const std::vector<uint8_t> frame = mpa_build(reply, p);
        ASSERT_EQ(frame.size(), sizeof(MpaRrHdr) + n + (rev == kMpaRev2 ? 4 : 0));
        for (size_t piece : {size_t{0}, size_t{1}, size_t{7}}) {
          SCOPED_TRACE(::testing::Message() << "reply " << reply << " rev " << int{rev} << " pd "
                                            << n << " piece " << piece);
          MpaReader r(reply);
          size_t consumed = 0;
          ASSERT_EQ(read_frame(r, frame, piece, &consumed), MpaStatus::kDone);
          EXPECT_EQ(consumed, frame.size());
          expect_same(r.params(), p, reply);
        }
      }
    }
  }
}

// FPDUs may follow the frame in the same read: the reader takes only its own.
TEST(MpaFrameTest, StopsAtFrameEnd) {
  for (uint8_t rev : {kMpaRev1, kMpaRev2}) {
    for (size_t n : {0, 1, 100}) {
      MpaParams p;
      p.rev = rev;
      p.private_data = pdata(n, 3);
      std::vector<uint8_t> bytes = mpa_build(false, p);
      const size_t frame = bytes.size();
      bytes.insert(bytes.end(), 64, 0xab);
      MpaReader r(false);
      size_t used = 0;
      ASSERT_EQ(r.feed(bytes.data(), bytes.size(), &used), MpaStatus::kDone);
      EXPECT_EQ(used, frame);
      EXPECT_EQ(r.params().private_data, p.private_data);
    }
  }
}

TEST(MpaFrameTest, GoldenV2Request) {
  MpaParams p;
  p.rev = kMpaRev2;
  p.markers = true;
  p.crc = true;
  p.p2p = true;
  p.ird = 0x0123;
  p.ord = 0x0456;
  p.rtr_write = true;
  p.rtr_read = false;
  p.rtr_send = false;
  p.private_data = {0xde, 0xad, 0xbe};
  const std::vector<uint8_t> want = {
      'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',
      0xc0,        // M | C, R clear, Res zero
      0x02,        // Rev 2
      0x00, 0x07,  // PD_Length: 4 (IRD/ORD) + 3
      0x81, 0x23,  // peer-to-peer | IRD
      0x84, 0x56,  // RDMA Write RTR | ORD
      0xde, 0xad, 0xbe};
  EXPECT_EQ(mpa_build(false, p), want);

  // Each flag on its own, and the other RTR bits.
  p.markers = false;
  p.private_data.clear();
  p.rtr_write = false;
  p.rtr_read = true;
  p.rtr_send = true;
  std::vector<uint8_t> f = mpa_build(false, p);
  ASSERT_EQ(f.size(), 24u);
  EXPECT_EQ(f[16], 0x40);
  EXPECT_EQ((std::vector<uint8_t>(f.begin() + 18, f.end())),
            (std::vector<uint8_t>{0x00, 0x04, 0xc1, 0x23, 0x44, 0x56}));
  p.crc = false;
  p.markers = true;
  EXPECT_EQ(mpa_build(false, p)[16], 0x80);

  // R appears only in a Reply; the key differs.
  p.reject = true;
  EXPECT_EQ(mpa_build(false, p)[16], 0x80) << "a Request never carries R";
  f = mpa_build(true, p);
  EXPECT_EQ(f[16], 0xa0);
  EXPECT_EQ(std::string(f.begin(), f.begin() + 16), "MPA ID Rep Frame");

  // Rev 1: no IRD/ORD prefix.
  MpaParams v1;
  v1.rev = kMpaRev1;
  v1.crc = true;
  v1.private_data = {1, 2};
  f = mpa_build(false, v1);
  EXPECT_EQ((std::vector<uint8_t>(f.begin() + 16, f.end())),
            (std::vector<uint8_t>{0x40, 0x01, 0x00, 0x02, 1, 2}));
}

// A raw header: key, flags, rev, PD_Length, then `extra` octets.
std::vector<uint8_t> raw(const char* key, uint8_t flags, uint8_t rev, uint16_t pd_len,
                         size_t extra) {
  std::vector<uint8_t> f(key, key + kMpaKeyLen);
  f.push_back(flags);
  f.push_back(rev);
  f.push_back(static_cast<uint8_t>(pd_len >> 8));
  f.push_back(static_cast<uint8_t>(pd_len));
  f.insert(f.end(), extra, 0);
  return f;
}

void expect_status(bool reply, const std::vector<uint8_t>& frame, MpaStatus want) {
  for (size_t piece : {size_t{0}, size_t{1}}) {
    MpaReader r(reply);
    size_t consumed = 0;
    const MpaStatus got = read_frame(r, frame, piece, &consumed);
    EXPECT_EQ(got, want) << "got " << to_string(got) << ", want " << to_string(want) << ", piece "
                         << piece;
  }
}

TEST(MpaFrameTest, Rejections) {
  // Wrong key: a Reply where a Request belongs and the reverse, and one bad octet.
  expect_status(false, raw(kMpaKeyRep, 0x40, 2, 4, 4), MpaStatus::kBadKey);
  expect_status(true, raw(kMpaKeyReq, 0x40, 2, 4, 4), MpaStatus::kBadKey);
  std::vector<uint8_t> bad = raw(kMpaKeyReq, 0x40, 2, 4, 4);
  bad[15] ^= 1;
  expect_status(false, bad, MpaStatus::kBadKey);
  expect_status(false, raw("GET / HTTP/1.1\r\n", 0, 1, 0, 0), MpaStatus::kBadKey);

  for (uint8_t rev : {0, 3, 0xff}) {
    expect_status(false, raw(kMpaKeyReq, 0x40, rev, 4, 4), MpaStatus::kBadRev);
    expect_status(true, raw(kMpaKeyRep, 0x40, rev, 4, 4), MpaStatus::kBadRev);
  }
  for (uint8_t rev : {kMpaRev1, kMpaRev2}) {
    for (uint16_t len : {513, 1000, 0xffff}) {
      expect_status(false, raw(kMpaKeyReq, 0, rev, len, 0), MpaStatus::kBadLength);
      expect_status(true, raw(kMpaKeyRep, 0, rev, len, 0), MpaStatus::kBadLength);
    }
    expect_status(false, raw(kMpaKeyReq, 0, rev, 512, 512), MpaStatus::kDone);
  }
  // Rev 2 needs its IRD/ORD prefix; rev 1 may be empty.
  for (uint16_t len : {0, 1, 2, 3}) {
    expect_status(false, raw(kMpaKeyReq, 0, kMpaRev2, len, len), MpaStatus::kBadLength);
    expect_status(true, raw(kMpaKeyRep, 0, kMpaRev2, len, len), MpaStatus::kBadLength);
    expect_status(false, raw(kMpaKeyReq, 0, kMpaRev1, len, len), MpaStatus::kDone);
  }
  expect_status(false, raw(kMpaKeyReq, 0, kMpaRev2, 4, 4), MpaStatus::kDone);
}

// The errors are found when the header is complete, not later.
TEST(MpaFrameTest, ErrorAtHeaderEnd) {
  MpaReader r(false);
  std::vector<uint8_t> f = raw(kMpaKeyReq, 0, 7, 0, 0);
  size_t used = 0;
  ASSERT_EQ(r.feed(f.data(), sizeof(MpaRrHdr) - 1, &used), MpaStatus::kNeedMore);
  EXPECT_EQ(used, sizeof(MpaRrHdr) - 1);
  EXPECT_EQ(r.feed(f.data() + used, 1, &used), MpaStatus::kBadRev);
}

// --- negotiation ---

struct Negotiated {
  MpaParams rep;  // as the initiator parsed it
  MpaResult ini, resp;
  bool settled;
};

// Request → bytes → responder → Reply → bytes → initiator, as the CM does.
Negotiated negotiate(const MpaParams& req, const MpaParams& ours) {
  Negotiated n{};
  MpaReader rq(false);
  std::vector<uint8_t> f = mpa_build(false, req);
  size_t used = 0;
  EXPECT_EQ(rq.feed(f.data(), f.size(), &used), MpaStatus::kDone);
  MpaParams rep = mpa_answer(rq.params(), ours, &n.resp);
  MpaReader rr(true);
  f = mpa_build(true, rep);
  EXPECT_EQ(rr.feed(f.data(), f.size(), &used), MpaStatus::kDone);
  n.rep = rr.params();
  n.settled = mpa_settle(req, n.rep, &n.ini);
  return n;
}

MpaParams params(uint8_t rev, bool crc, bool markers) {
  MpaParams p;
  p.rev = rev;
  p.crc = crc;
  p.markers = markers;
  return p;
}

TEST(MpaNegotiationTest, CrcOnIfEitherAsks) {
  for (uint8_t rev : {kMpaRev1, kMpaRev2}) {
    for (int bits = 0; bits < 4; ++bits) {
      const bool ci = bits & 1, cr = bits & 2;
      Negotiated n = negotiate(params(rev, ci, false), params(rev, cr, false));
      ASSERT_TRUE(n.settled);
      EXPECT_EQ(n.ini.crc, ci || cr) << "rev " << int{rev} << " bits " << bits;
      EXPECT_EQ(n.resp.crc, ci || cr);
      EXPECT_EQ(n.rep.crc, ci || cr) << "the Reply states the outcome";
    }
  }
}

TEST(MpaNegotiationTest, MarkersPerDirection) {
  for (uint8_t rev : {kMpaRev1, kMpaRev2}) {
    for (int bits = 0; bits < 4; ++bits) {
      const bool mi = bits & 1, mr = bits & 2;  // each side asks to receive markers
      Negotiated n = negotiate(params(rev, true, mi), params(rev, true, mr));
      ASSERT_TRUE(n.settled);
      EXPECT_EQ(n.ini.rx_markers, mi);
      EXPECT_EQ(n.ini.tx_markers, mr);
      EXPECT_EQ(n.resp.rx_markers, mr);
      EXPECT_EQ(n.resp.tx_markers, mi);
      EXPECT_EQ(n.ini.tx_markers, n.resp.rx_markers);
      EXPECT_EQ(n.resp.tx_markers, n.ini.rx_markers);
    }
  }
}

TEST(MpaNegotiationTest, OrdClampedToPeerIrd) {
  struct Case {
    uint16_t ini_ird, ini_ord, resp_ird, resp_ord;
  } cases[] = {{16, 16, 16, 16}, {4, 32, 8, 2}, {1, 1, 0, 0}, {0, 5, 3, 9}, {0x3fff, 0x3fff, 7, 0x3fff}};
  for (const Case& c : cases) {
    MpaParams req = params(kMpaRev2, true, false), ours = params(kMpaRev2, true, false);
    req.ird = c.ini_ird;
    req.ord = c.ini_ord;
    ours.ird = c.resp_ird;
    ours.ord = c.resp_ord;
    Negotiated n = negotiate(req, ours);
    ASSERT_TRUE(n.settled);
    EXPECT_EQ(n.resp.ord, std::min(c.resp_ord, c.ini_ird));
    EXPECT_EQ(n.ini.ord, std::min(c.ini_ord, c.resp_ird));
    EXPECT_EQ(n.resp.ird, c.resp_ird);
    EXPECT_EQ(n.ini.ird, c.ini_ird);
    EXPECT_LE(n.ini.ord, n.resp.ird);
    EXPECT_LE(n.resp.ord, n.ini.ird);
    EXPECT_EQ(n.rep.ird, c.resp_ird);
    EXPECT_EQ(n.rep.ord, n.resp.ord) << "the Reply states the clamped ORD";
  }
}

TEST(MpaNegotiationTest, RtrChoice) {
  struct Case {
    bool ini_p2p, w, r, s, resp_p2p;
    Rtr want;
  } cases[] = {
      {true, true, false, false, true, Rtr::kWrite},
      {true, false, true, false, true, Rtr::kRead},
      {true, false, false, true, true, Rtr::kSend},
      {true, true, true, true, true, Rtr::kWrite},   // one kind only, write preferred
      {true, false, true, true, true, Rtr::kSend},
      {true, false, false, false, true, Rtr::kNone},  // nothing offered
      {false, true, false, false, true, Rtr::kNone},  // initiator not peer-to-peer
      {true, true, false, false, false, Rtr::kNone},  // responder not peer-to-peer
  };
  for (const Case& c : cases) {
    MpaParams req = params(kMpaRev2, true, false), ours = params(kMpaRev2, true, false);
    req.p2p = c.ini_p2p;
    req.rtr_write = c.w;
    req.rtr_read = c.r;
    req.rtr_send = c.s;
    ours.p2p = c.resp_p2p;
    Negotiated n = negotiate(req, ours);
    ASSERT_TRUE(n.settled);
    EXPECT_EQ(n.resp.rtr, c.want);
    EXPECT_EQ(n.ini.rtr, c.want);
    EXPECT_EQ(n.rep.p2p, c.want != Rtr::kNone);
    EXPECT_EQ(int{n.rep.rtr_write} + n.rep.rtr_read + n.rep.rtr_send, c.want == Rtr::kNone ? 0 : 1)
        << "a Reply names at most one RTR kind";
  }
}

TEST(MpaNegotiationTest, V1PeerGetsV1Reply) {
  MpaParams req = params(kMpaRev1, false, true);
  req.private_data = {9, 8, 7};
  MpaParams ours = params(kMpaRev2, true, false);
  ours.private_data = {1};
  MpaResult resp;
  MpaParams rep = mpa_answer(req, ours, &resp);
  EXPECT_EQ(rep.rev, kMpaRev1);
  EXPECT_EQ(resp.rev, kMpaRev1);
  EXPECT_EQ(resp.rtr, Rtr::kNone);
  std::vector<uint8_t> f = mpa_build(true, rep);
  EXPECT_EQ(f[17], kMpaRev1);
  EXPECT_EQ(f.size(), sizeof(MpaRrHdr) + 1) << "no IRD/ORD prefix in a v1 Reply";
  Negotiated n = negotiate(req, ours);
  ASSERT_TRUE(n.settled);
  EXPECT_EQ(n.ini.rev, kMpaRev1);
  EXPECT_EQ(n.rep.private_data, ours.private_data);
  EXPECT_EQ(n.ini.rtr, Rtr::kNone);
  EXPECT_TRUE(n.ini.crc);
  EXPECT_TRUE(n.ini.rx_markers);
  EXPECT_TRUE(n.resp.tx_markers);
}

TEST(MpaNegotiationTest, SettleRefusesBadReplies) {
  MpaParams req = params(kMpaRev2, true, false);
  req.p2p = true;
  req.rtr_write = true;
  req.rtr_read = req.rtr_send = false;
  MpaParams rep = params(kMpaRev2, true, false);
  rep.p2p = true;
  rep.rtr_write = false;
  MpaResult out;

  rep.rtr_read = true;
  EXPECT_FALSE(mpa_settle(req, rep, &out)) << "Read RTR was not offered";
  rep.rtr_read = false;
  rep.rtr_send = true;
  EXPECT_FALSE(mpa_settle(req, rep, &out)) << "Send RTR was not offered";
  rep.rtr_send = false;
  EXPECT_FALSE(mpa_settle(req, rep, &out)) << "peer-to-peer with no RTR chosen";
  rep.rtr_write = rep.rtr_read = true;
  req.rtr_read = true;
  EXPECT_FALSE(mpa_settle(req, rep, &out)) << "two RTR kinds chosen";
  rep.rtr_read = false;
  ASSERT_TRUE(mpa_settle(req, rep, &out));
  EXPECT_EQ(out.rtr, Rtr::kWrite);

  MpaParams v1req = params(kMpaRev1, true, false);
  EXPECT_FALSE(mpa_settle(v1req, rep, &out)) << "v2 Reply to a v1 Request";
  rep.p2p = false;
  rep.rtr_write = false;
  ASSERT_TRUE(mpa_settle(req, rep, &out)) << "responder declines peer-to-peer";
  EXPECT_EQ(out.rtr, Rtr::kNone);
}

TEST(MpaNames, StatusNames) {
  for (MpaStatus s : {MpaStatus::kNeedMore, MpaStatus::kDone, MpaStatus::kBadKey,
                      MpaStatus::kBadRev, MpaStatus::kBadLength}) {
    ASSERT_NE(to_string(s), nullptr);
    EXPECT_GT(std::string(to_string(s)).size(), 0u);
  }
}

}  // namespace
}  // namespace softrdma::iwarp
