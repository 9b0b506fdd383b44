// Shared pieces of the libFuzzer harnesses (docs/fuzzing.md): the guarded
// memory every harness registers, a QP in RTS driven through the real
// receive path (stack/tests/fake_conn.h's FakeConn), the checks
// run after every input, and the framer that wraps fuzzed DDP/RDMAP octets
// in valid MPA framing. gen_corpus.cc uses the same definitions, so the seed
// corpus always names the STags and tagged offsets the harnesses register.
//
// Why a fixed address: tagged offsets are virtual addresses
// (FI_MR_VIRT_ADDR), so with ASLR a fuzzer could never name a registered
// byte. The arena is mapped at kArenaBase (outside ASan's shadow and heap),
// so the same input reaches the same memory in every run.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "stack/iwarp/tx_frame.h"
#include "stack/tests/fake_conn.h"
#include "stack/tests/raw_peer.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define SOFTRDMA_FUZZ_ASAN 1
#endif
#endif

namespace softrdma::fuzz {

using testing::Bytes;

// A broken invariant: print why and abort, which libFuzzer reports as a crash.
[[noreturn]] inline void fail(const char* file, int line, const char* fmt, ...) {
  std::fprintf(stderr, "\n==fuzz== invariant broken at %s:%d: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
  std::abort();
}
#define FUZZ_CHECK(cond, ...) \
  do {                        \
    if (!(cond)) ::softrdma::fuzz::fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

// The test helpers report contract breaks (e.g. rx_consume beyond what
// rx_peek showed) with EXPECT_*; outside a gtest run those would only print,
// so every failed expectation aborts here.
struct AbortOnGtestFailure : ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "\n==fuzz== helper expectation failed at %s:%d: %s\n",
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
    std::abort();
  }
};

// --- the guarded arena -------------------------------------------------------

inline constexpr uint64_t kArenaBase = 0x500000000000ull;
inline constexpr size_t kArenaSize = 16 * 1024;
inline constexpr size_t kGuard = 64;  // canary octets before and after every region

enum Region : int {
  kWrite,     // remote write: RDMA Write target
  kRead,      // remote read only: Read Request source, must never change
  kAtomic,    // remote atomic/read/write: atomic words
  kLocal,     // registered, local write only: must never change
  kOtherPd,   // all remote rights but another PD: must never change
  kInval,     // remote write, the STag a Send with Invalidate may kill
  kSink0,     // our outstanding Read's first sink (300 octets)
  kSink1,     // ... and its second (40 octets)
  kResult,    // our outstanding Fetch-Add's result word (lkey 0)
  kRecvA,     // receive 1: one SGE of 16
  kRecvB1,    // receive 2: SGEs of 1, 100 and 3
  kRecvB2,
  kRecvB3,
  kRecvD,     // receive 4: one SGE of 512 (receive 3 has no SGE at all)
  kRegionCount
};

struct RegionSpec {
  const char* name;
  uint32_t size;
  uint32_t access;
  int pd;           // 0: not registered, 1: the QP's PD, 2: another PD
  bool may_change;  // may the peer legitimately write it?
};

inline constexpr uint32_t kAllRemote = kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic;
inline constexpr RegionSpec kRegions[kRegionCount] = {
    {"write", 4096, kAccessLocalWrite | kAccessRemoteWrite, 1, true},
    {"read", 4096, kAccessRemoteRead, 1, false},
    {"atomic", 64, kAccessLocalWrite | kAllRemote, 1, true},
    {"local", 256, kAccessLocalWrite, 1, false},
    {"other_pd", 256, kAccessLocalWrite | kAllRemote, 2, false},
    {"inval", 256, kAccessLocalWrite | kAccessRemoteWrite, 1, true},
    {"sink0", 300, kAccessLocalWrite, 1, true},
    {"sink1", 40, kAccessLocalWrite, 1, true},
    {"result", 8, 0, 0, true},
    {"recvA", 16, 0, 0, true},
    {"recvB1", 1, 0, 0, true},
    {"recvB2", 100, 0, 0, true},
    {"recvB3", 3, 0, 0, true},
    {"recvD", 512, 0, 0, true},
};

constexpr size_t round64(size_t n) { return (n + 63) / 64 * 64; }
constexpr size_t region_offset(int r) {
  size_t off = kGuard;
  for (int i = 0; i < r; ++i) off += round64(kRegions[i].size) + kGuard;
  return off;
}
static_assert(region_offset(kRegionCount) <= kArenaSize);
constexpr uint64_t region_addr(int r) { return kArenaBase + region_offset(r); }
// STags: MrTable hands out index << 8 with key 0 on first use, in
// registration order (slot 0 is never used).
constexpr uint32_t region_stag(int r) {
  uint32_t index = 0;
  for (int i = 0; i <= r; ++i) index += kRegions[i].pd != 0;
  return kRegions[r].pd ? index << 8 : 0;
}

class Arena {
 public:
  static Arena& get() {
    static Arena a;
    return a;
  }
  uint8_t* at(int r) { return base_ + region_offset(r); }

  // Fresh contents for the next input: patterns in regions, canaries between
  // (a copy of the pristine image, so the per-input cost is one memcpy).
  void reset() {
    unpoison();
    std::memcpy(base_, pristine_.data(), kArenaSize);
    poison();
  }

  // Canaries intact (nothing written outside granted memory) and regions the
  // peer has no right to write unchanged.
  void check() {
    unpoison();
    each_gap([this](uint8_t* p, size_t n) {
      const size_t off = static_cast<size_t>(p - base_);
      FUZZ_CHECK(same(off, n), "canary at arena+%zu overwritten (outside every region)",
                 off + first_diff(off, n));
    });
    for (int r = 0; r < kRegionCount; ++r) {
      const size_t off = region_offset(r), n = kRegions[r].size;
      if (!kRegions[r].may_change)
        FUZZ_CHECK(same(off, n), "region %s written at +%zu without the right", kRegions[r].name,
                   first_diff(off, n));
    }
    poison();
  }

  static uint8_t pattern(int r, size_t j) { return static_cast<uint8_t>((r * 37 + j * 13) ^ 0x5a); }

 private:
  Arena() {
    void* p = ::mmap(reinterpret_cast<void*>(kArenaBase), kArenaSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    FUZZ_CHECK(p == reinterpret_cast<void*>(kArenaBase), "cannot map the arena at 0x%llx: %s",
               static_cast<unsigned long long>(kArenaBase), std::strerror(errno));
    base_ = static_cast<uint8_t*>(p);
    pristine_.resize(kArenaSize);
    for (size_t i = 0; i < kArenaSize; ++i) pristine_[i] = canary(i);
    for (int r = 0; r < kRegionCount; ++r) {
      for (size_t j = 0; j < kRegions[r].size; ++j) pristine_[region_offset(r) + j] = pattern(r, j);
    }
  }
  bool same(size_t off, size_t n) const { return std::memcmp(base_ + off, pristine_.data() + off, n) == 0; }
  size_t first_diff(size_t off, size_t n) const {
    size_t i = 0;
    while (i < n && base_[off + i] == pristine_[off + i]) ++i;
    return i;
  }
  static uint8_t canary(size_t i) { return static_cast<uint8_t>(0xA5 ^ (i * 29)); }
  // The gaps between regions (from a region's last octet to the next one's
  // first) hold canaries and are poisoned: ASan reports a stray access at
  // once, with the engine's stack; the canaries catch it without ASan.
  template <typename F>
  void each_gap(F f) {
    for (int r = 0; r <= kRegionCount; ++r) {
      const size_t tail = r == 0 ? 0 : region_offset(r - 1) + kRegions[r - 1].size;
      const size_t next = r == kRegionCount ? kArenaSize : region_offset(r);
      f(base_ + tail, next - tail);
    }
  }
  void poison() {
#ifdef SOFTRDMA_FUZZ_ASAN
    each_gap([](uint8_t* p, size_t n) { ASAN_POISON_MEMORY_REGION(p, n); });
#endif
  }
  void unpoison() {
#ifdef SOFTRDMA_FUZZ_ASAN
    ASAN_UNPOISON_MEMORY_REGION(base_, kArenaSize);
#endif
  }
  uint8_t* base_ = nullptr;
  std::vector<uint8_t> pristine_;
};

// Called once from LLVMFuzzerInitialize.
inline void init() {
  ::testing::UnitTest::GetInstance()->listeners().Append(new AbortOnGtestFailure);
  Arena::get();
}

// --- the QP under test -------------------------------------------------------

// Work requests primed before the input arrives, so every kind of response
// and every completion path has something to match.
inline constexpr uint64_t kRecvIds[] = {1, 2, 3, 4};
inline constexpr uint64_t kReadWrId = 100;
inline constexpr uint64_t kAtomicWrId = 101;
// The peer's STags our Read and Fetch-Add name. gen_corpus.cc's sender
// registers the arena's read and atomic regions under these (its first two
// registrations), so the seed corpus holds real responses to them.
inline constexpr uint32_t kPeerReadStag = 0x100;
inline constexpr uint32_t kPeerAtomicStag = 0x200;
inline constexpr uint16_t kIrdOrd = 4;

inline Sge sge(int r, uint32_t lkey = 0) { return {region_addr(r), kRegions[r].size, lkey}; }
inline uint64_t recv_capacity(uint64_t wr_id) {
  switch (wr_id) {
    case 1: return kRegions[kRecvA].size;
    case 2: return kRegions[kRecvB1].size + kRegions[kRecvB2].size + kRegions[kRecvB3].size;
    case 3: return 0;
    case 4: return kRegions[kRecvD].size;
  }
  return 0;
}

// Posts the receives, the two-SGE Read and the Fetch-Add through `post`
// (Qp or Engine), identically in the harnesses and the corpus generator.
template <typename PostRecv, typename PostSend>
void prime(PostRecv post_recv, PostSend post_send) {
  RecvWr r{};
  r.wr_id = 1;
  r.num_sge = 1;
  r.sg_list[0] = sge(kRecvA);
  FUZZ_CHECK(post_recv(r) == 0, "post_recv 1");
  r.wr_id = 2;
  r.num_sge = 3;
  r.sg_list[0] = sge(kRecvB1);
  r.sg_list[1] = sge(kRecvB2);
  r.sg_list[2] = sge(kRecvB3);
  FUZZ_CHECK(post_recv(r) == 0, "post_recv 2");
  r.wr_id = 3;
  r.num_sge = 0;
  FUZZ_CHECK(post_recv(r) == 0, "post_recv 3");
  r.wr_id = 4;
  r.num_sge = 1;
  r.sg_list[0] = sge(kRecvD);
  FUZZ_CHECK(post_recv(r) == 0, "post_recv 4");

  SendWr rd{};
  rd.wr_id = kReadWrId;
  rd.opcode = WrOpcode::kRead;
  rd.num_sge = 2;
  rd.sg_list[0] = sge(kSink0, region_stag(kSink0));
  rd.sg_list[1] = sge(kSink1, region_stag(kSink1));
  rd.rkey = kPeerReadStag;
  rd.remote_addr = region_addr(kRead);
  FUZZ_CHECK(post_send(rd) == 0, "post Read");
  SendWr at{};
  at.wr_id = kAtomicWrId;
  at.opcode = WrOpcode::kAtomicFetchAdd;
  at.num_sge = 1;
  at.sg_list[0] = sge(kResult);
  at.rkey = kPeerAtomicStag;
  at.remote_addr = region_addr(kAtomic) + 32;
  at.compare_add = 5;
  FUZZ_CHECK(post_send(at) == 0, "post Fetch-Add");
}

// Every primed request must complete exactly once after the stream ends
// (the QP is in error by then, so whatever did not succeed is flushed), and
// what succeeded must be plausible.
inline void check_completions(const std::vector<Wc>& recv, const std::vector<Wc>& send) {
  std::map<uint64_t, int> seen;
  for (const Wc& wc : recv) {
    ++seen[wc.wr_id];
    FUZZ_CHECK(wc.wr_id >= 1 && wc.wr_id <= 4, "unknown receive completion %llu",
               static_cast<unsigned long long>(wc.wr_id));
    if (wc.status == WcStatus::kSuccess) {
      FUZZ_CHECK(wc.opcode == WcOpcode::kRecv || wc.opcode == WcOpcode::kRecvRdmaImm,
                 "receive completed with opcode %d", static_cast<int>(wc.opcode));
      FUZZ_CHECK(wc.byte_len <= recv_capacity(wc.wr_id), "receive %llu: %u octets > capacity",
                 static_cast<unsigned long long>(wc.wr_id), wc.byte_len);
    }
  }
  for (const Wc& wc : send) {
    ++seen[wc.wr_id];
    FUZZ_CHECK(wc.wr_id == kReadWrId || wc.wr_id == kAtomicWrId, "unknown send completion %llu",
               static_cast<unsigned long long>(wc.wr_id));
    if (wc.status == WcStatus::kSuccess && wc.wr_id == kReadWrId)
      FUZZ_CHECK(wc.byte_len == kRegions[kSink0].size + kRegions[kSink1].size,
                 "Read completed with %u octets", wc.byte_len);
  }
  for (uint64_t id : {1ull, 2ull, 3ull, 4ull, 100ull, 101ull})
    FUZZ_CHECK(seen[id] == 1, "work request %llu completed %d times",
               static_cast<unsigned long long>(id), seen[id]);
}

// What our side sends back (read responses, atomic responses, Terminate)
// must itself be well-formed: whole FPDUs, good CRCs, a Terminate that
// decodes (raw_peer.h's decoder) and nothing after it. Markers are never
// asked of us here (tx_markers off), so the stream parses directly.
inline void check_outgoing(const Bytes& out, bool crc) {
  size_t off = 0;
  bool after_term = false;
  while (off < out.size()) {
    FUZZ_CHECK(out.size() - off >= iwarp::kMpaLenSize, "our stream ends inside a length");
    const size_t ulpdu = (size_t{out[off]} << 8) | out[off + 1];
    const size_t body = iwarp::kMpaLenSize + ulpdu + iwarp::mpa_pad(ulpdu);
    FUZZ_CHECK(out.size() - off >= body + iwarp::kMpaCrcSize, "our stream ends inside an FPDU");
    const uint8_t* c = out.data() + off + body;
    const uint32_t got = uint32_t{c[0]} | (uint32_t{c[1]} << 8) | (uint32_t{c[2]} << 16) |
                         (uint32_t{c[3]} << 24);
    FUZZ_CHECK(!crc || got == crc32c(out.data() + off, body), "we sent a bad CRC");
    testing::RxFpdu f;
    f.ulpdu.assign(out.begin() + static_cast<long>(off),
                   out.begin() + static_cast<long>(off + iwarp::kMpaLenSize + ulpdu));
    FUZZ_CHECK(ulpdu >= 2 && f.complete_hdr(), "we sent an FPDU shorter than its header");
    FUZZ_CHECK(!after_term, "we sent an FPDU after our Terminate");
    if (f.is_terminate()) {
      testing::TermInfo t;
      std::string why;
      FUZZ_CHECK(testing::decode_terminate(f, &t, &why), "we sent a malformed Terminate: %s",
                 why.c_str());
      after_term = true;
    }
    off += body + iwarp::kMpaCrcSize;
  }
}

// First input octet: how the connection was set up. The harnesses that
// frame the input themselves ignore the bits they do not need.
struct QpConfig {
  bool crc = true;
  bool rx_markers = false;  // the peer inserts markers (we asked)
  iwarp::Rtr rtr = iwarp::Rtr::kNone;
  bool initiator = false;   // we send the RTR; else we await it (if rtr)
  bool reset = false;       // the stream ends with a reset, not a FIN
  uint8_t feed = 0;         // how the input is handed over (fuzz_fpdu_stream)
  uint64_t seed = 0;        // FakeConn's cutting of the stream into views

  static QpConfig from(uint8_t b0, uint8_t b1) {
    QpConfig c;
    c.crc = b0 & 1;
    c.rx_markers = b0 & 2;
    static constexpr iwarp::Rtr kRtr[] = {iwarp::Rtr::kNone, iwarp::Rtr::kWrite, iwarp::Rtr::kRead,
                                          iwarp::Rtr::kSend};
    c.rtr = kRtr[(b0 >> 2) & 3];
    c.initiator = b0 & 0x10;
    c.reset = b0 & 0x20;
    c.feed = static_cast<uint8_t>(b0 >> 6);
    c.seed = b1;
    return c;
  }
  uint8_t byte0() const {
    int r = rtr == iwarp::Rtr::kWrite ? 1 : rtr == iwarp::Rtr::kRead ? 2 : rtr == iwarp::Rtr::kSend ? 3 : 0;
    return static_cast<uint8_t>(crc | (rx_markers << 1) | (r << 2) | (initiator << 4) |
                                (reset << 5) | (feed << 6));
  }
  iwarp::MpaResult mpa() const {
    return {.rev = iwarp::kMpaRev2, .crc = crc, .tx_markers = false, .rx_markers = rx_markers,
            .rtr = rtr, .ord = kIrdOrd, .ird = kIrdOrd};
  }
};

// What an Engine owns for one QP: stack/tests/fake_conn.h's FakeHost, but
// with CQs sized for one input. An input completes six work requests (plus
// any a bug adds, which a full CQ keeps aside rather than drops, so
// check_completions still sees them); FakeHost's two 4096-entry CQs were
// 400 KB allocated, zeroed, page-faulted in and unmapped for every input,
// about half of an execution's time under ASan.
inline constexpr uint32_t kCqDepth = 16;
struct Host {
  iwarp::MrTable mrs;
  iwarp::Pd pd{1}, other_pd{2};
  iwarp::Cq send_cq{kCqDepth}, recv_cq{kCqDepth};
  iwarp::Stats stats;
  testing::RecordingOwner owner;
  iwarp::Qp qp{1,
               {.pd = &pd, .send_cq = &send_cq, .recv_cq = &recv_cq, .sq_depth = 64,
                .rq_depth = 64},
               &mrs, &stats, &owner};
};

inline testing::FakeConnConfig conn_config() {
  testing::FakeConnConfig c;
  c.tx_space = 1u << 20;
  return c;
}

// One QP in RTS on a FakeConn, with the arena registered and work primed.
// feed() hands stream octets to the real receive path (Qp::rx_progress, as
// the engine's on_readable does); finish() ends the stream the way the
// engine's on_closed does and runs every check.
class QpTarget {
 public:
  explicit QpTarget(const QpConfig& cfg)
      : cfg_(cfg),
        conn_(conn_config(), cfg.seed * 2 + 1),
        peer_(conn_config(), cfg.seed * 2 + 2) {
    testing::FakeConn::join(conn_, peer_);
    Arena& a = Arena::get();
    a.reset();
    for (int r = 0; r < kRegionCount; ++r) {
      if (!kRegions[r].pd) continue;
      iwarp::Mr* mr = host_.mrs.reg(kRegions[r].pd == 1 ? &host_.pd : &host_.other_pd, a.at(r),
                                    kRegions[r].size, kRegions[r].access);
      FUZZ_CHECK(mr && mr->stag == region_stag(r), "unexpected STag for region %s",
                 kRegions[r].name);
    }
    prime([this](const RecvWr& w) { return host_.qp.post_recv(w); },
          [this](const SendWr& w) { return host_.qp.post_send(w); });
    host_.qp.start(&conn_, cfg.mpa(), cfg.initiator);
  }

  void feed(const uint8_t* p, size_t n) {
    conn_.inject(p, n);
    host_.qp.rx_progress();
    drain();
  }

  void finish() {
    iwarp::Qp* qp = &host_.qp;
    if (qp->conn()) {
      qp->rx_progress();  // a Terminate may sit in the last octets
      qp->on_stream_closed(cfg_.reset ? -ECONNRESET : 0);
      qp->detach_conn();
    }
    drain();
    FUZZ_CHECK(qp->state() == QpState::kError, "QP in state %s after its stream ended",
               to_string(qp->state()));
    FUZZ_CHECK(host_.stats.rx_copy_bytes == host_.stats.payload_rx, "copy counters disagree");
    Arena::get().check();
    check_completions(testing::FakeHost::drain(host_.recv_cq),
                      testing::FakeHost::drain(host_.send_cq));
    check_outgoing(out_, cfg_.crc);
  }

  iwarp::Qp* qp() { return &host_.qp; }
  const Bytes& out() const { return out_; }  // what our side sent so far
  testing::FakeConn& peer() { return peer_; }  // where our side's octets arrive
  testing::FakeConn& conn() { return conn_; }  // where the input arrives

 private:
  // Collects what our side sent (it goes to a peer nobody else reads).
  void drain() {
    net::RxView v[8];
    for (size_t n; (n = peer_.rx_peek(v, 8)) > 0;) {
      size_t used = 0;
      for (size_t i = 0; i < n; ++i) {
        out_.insert(out_.end(), v[i].data, v[i].data + v[i].len);
        used += v[i].len;
      }
      peer_.rx_consume(used);
    }
  }

  QpConfig cfg_;
  Host host_;
  testing::FakeConn conn_, peer_;
  Bytes out_;
};

// --- valid framing around fuzzed DDP/RDMAP octets ------------------------------

// Frames ULPDUs as the peer would: ULPDU_Length, pad, CRC and markers, with
// the engine's own TxFrame (markers are placed by stream position, so one
// framer serves a whole stream).
class Framer {
 public:
  Framer(bool crc, bool markers) : crc_(crc), markers_(markers) {}
  // ulpdu: everything after the 2-octet MPA length (DDP/RDMAP header and
  // payload), at most 65535 octets.
  Bytes frame(const uint8_t* ulpdu, size_t n) {
    uint8_t len[2] = {static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
    static const uint8_t kZero[4] = {};
    iwarp::TxFrame f(markers_, crc_, pos_);
    bool ok = f.add(len, 2) && f.add(ulpdu, n) && f.add(kZero, iwarp::mpa_pad(n)) && f.finish();
    FUZZ_CHECK(ok, "TxFrame cannot lay out %zu octets", n);
    pos_ = f.end_pos();
    Bytes out;
    for (int i = 0; i < f.iovcnt(); ++i) {
      const auto* p = static_cast<const uint8_t*>(f.iov()[i].iov_base);
      out.insert(out.end(), p, p + f.iov()[i].iov_len);
    }
    return out;
  }

 private:
  bool crc_, markers_;
  uint64_t pos_ = 0;
};

}  // namespace softrdma::fuzz
