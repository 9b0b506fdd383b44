// mesh_test: N processes (default 4) on one host, each an Engine on the
// default transport (the embedded DPDK memif mesh, nothing configured), each
// listening and connected to every other at once; all connections carry
// traffic concurrently, every byte is checked.
//
// Every process opens one connection to each other process (so every pair
// has two, one each way) and accepts theirs. On its own connections a
// process is the requester, on accepted ones the responder. Per message size
// (0, 1, 4095, 9001, 64 KiB, 1 MiB + 3; plus 64 MiB on the ring i -> i+1,
// so every process sends and receives 64 MiB messages) the requester posts
//
//   RDMA Write      pattern -> responder region A
//   Fetch-Add, Cmp-Swap (succeeding), Cmp-Swap (failing) on responder word W
//   Send            pattern -> responder receive buffer
//   Write with Imm  pattern -> responder region B, immediate = step tag
//   RDMA Read       responder region C at an odd offset -> local buffer
//
// and checks its Read data and every atomic's original value; the responder,
// at the Send's completion, checks the receive buffer, region A and the
// atomic word (the Write and the atomics came first on the stream), at the
// Immediate Data's completion region B and the tag, then acknowledges the
// step with a Send. A final Send carries the requester's expected atomic
// word. Patterns depend on (requester, responder, step, operation): data
// from another connection, size or operation cannot pass.
//
// The parent forks the processes before any DPDK state exists, gathers their
// listening ports (published 127.0.0.1 ports, as users would name them),
// hands every process the list, and holds a barrier at the end so that no
// process tears its connections down while a peer still uses them.
//
// usage: mesh_test [--procs N] [--timeout S] [--big SIZE]
// Exit: 0 all verified; 1 a mismatch, an error, a lost connection or the
// timeout (the parent kills what is left). Needs what the DPDK path needs
// (root for the EAL).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "stack/tests/loopback.h"

namespace softrdma::mesh {
namespace {

using Clock = std::chrono::steady_clock;
using testing::loopback;
using testing::pattern;

constexpr uint32_t kMagic = 0x4d455348;  // "MESH"
constexpr int kMaxProcs = 8;
constexpr uint64_t kBaseSizes[] = {0, 1, 4095, 9001, 65536, (1u << 20) + 3};
constexpr uint64_t kReadSlack = 8;  // Reads start at offset step % 8 in C

int g_rank = -1;  // the child's index, for messages

[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "mesh_test[%d pid %d]: FAIL: ", g_rank, getpid());
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  _exit(1);
}

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

enum class What : uint32_t { kWrite = 1, kSend, kWriteImm, kReadSource };

// The pattern seed of one message: who to whom, which step, which operation.
uint32_t seed_of(int from, int to, size_t step, What what) {
  return static_cast<uint32_t>(
      mix((uint64_t(from) << 48) ^ (uint64_t(to) << 40) ^ (uint64_t(step) << 8) ^
          static_cast<uint64_t>(what)));
}

// The sizes requester `from` runs against responder `to`.
std::vector<uint64_t> sizes_for(int from, int to, int procs, uint64_t big) {
  std::vector<uint64_t> s(std::begin(kBaseSizes), std::end(kBaseSizes));
  if (big > 0 && to == (from + 1) % procs) s.push_back(big);
  return s;
}

uint64_t largest(const std::vector<uint64_t>& sizes) {
  return std::max<uint64_t>(8, *std::max_element(sizes.begin(), sizes.end()));
}

// The atomic word's history on one connection, derived by both ends.
struct AtomicSeq {
  uint64_t w;
  explicit AtomicSeq(int from, int to) : w(mix(0xA70A1C00ull + uint64_t(from) * 16 + to)) {}
  static uint64_t addend(size_t step) { return mix(step) | 1; }
  uint64_t swap_value(size_t step) const { return mix(w ^ (step * 0x51ull)); }
  // One step: fetch-add, succeeding cmp-swap, failing cmp-swap.
  void advance(size_t step) {
    w += addend(step);
    w = swap_value(step);
  }
};

// Compares n bytes with the expected ones; fails with the first difference.
void expect_bytes(const char* what, int from, int to, size_t step, uint64_t n,
                  const uint8_t* got, const uint8_t* want) {
  if (n == 0 || std::memcmp(got, want, n) == 0) return;
  uint64_t off = 0;
  while (got[off] == want[off]) ++off;
  fail("DATA MISMATCH in %s %d->%d step %zu (%" PRIu64 " bytes): byte %" PRIu64
       " is 0x%02x, expected 0x%02x",
       what, from, to, step, n, off, got[off], want[off]);
}

struct Region {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t pad = 0;
};

struct Hello {  // requester -> responder, in the MPA Request
  uint32_t magic = kMagic;
  int32_t from = -1;
};

struct Welcome {  // responder -> requester, in the MPA Reply
  uint32_t magic = kMagic;
  int32_t from = -1;
  Region a, b, c, w;
};
static_assert(sizeof(Welcome) <= Engine::kMaxPrivateData);

struct Ack {
  uint64_t step = 0;
  uint64_t magic = kMagic;
};

template <class T>
bool decode(const std::vector<uint8_t>& pd, T* out) {
  if (pd.size() != sizeof(T)) return false;
  std::memcpy(out, pd.data(), sizeof(T));
  return out->magic == kMagic;
}

uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A registered buffer.
struct Buf {
  std::vector<uint8_t> v;
  Mr* mr = nullptr;
  void init(Engine& e, Pd* pd, uint64_t n, uint32_t access) {
    v.assign(n, 0);
    mr = e.reg_mr(pd, v.data(), n, access);
    if (!mr) fail("reg_mr of %" PRIu64 " bytes failed", n);
  }
  uint8_t* p(uint64_t off = 0) { return v.data() + off; }
  Sge sge(uint64_t off, uint64_t n) {
    return Sge{addr_of(p(off)), static_cast<uint32_t>(n), mr->stag};
  }
};

Wc expect_success(const Wc& wc, const char* role, int from, int to) {
  if (wc.status != WcStatus::kSuccess)
    fail("%s %d->%d: %s completion failed: %s (vendor_err 0x%x)", role, from, to,
         to_string(wc.opcode), to_string(wc.status), wc.vendor_err);
  return wc;
}

// Our connection to responder `peer`: we post, we check Reads and atomics.
class Requester {
 public:
  enum WrId : uint64_t { kWrite = 1, kSend, kWriteImm, kRead, kFetchAdd, kCasHit, kCasMiss, kDone };

  Requester(Engine& e, Pd* pd, int self, int peer, int procs, uint64_t big)
      : e_(e), self_(self), peer_(peer), sizes_(sizes_for(self, peer, procs, big)),
        atomic_(self, peer) {
    const uint64_t max = largest(sizes_);
    for (Buf* b : {&src_w_, &src_s_, &src_i_}) b->init(e, pd, max, 0);
    read_.init(e, pd, max, kAccessLocalWrite);
    words_.init(e, pd, 64, kAccessLocalWrite);  // atomic results and the DONE word
    acks_.init(e, pd, sizeof(Ack) * (sizes_.size() + 1), kAccessLocalWrite);
    read_expect_ = pattern(max + kReadSlack, seed_of(peer, self, 0, What::kReadSource));
    cq_ = e.create_cq(64);
    qp_ = e.create_qp({.pd = pd, .send_cq = cq_, .recv_cq = cq_, .sq_depth = 16,
                       .rq_depth = static_cast<uint32_t>(sizes_.size()) + 2});
    if (!cq_ || !qp_) fail("create_qp");
    // Every acknowledgement the responder will send, posted up front.
    for (size_t k = 0; k <= sizes_.size(); ++k) {
      RecvWr r{.wr_id = k, .num_sge = 1};
      r.sg_list[0] = acks_.sge(k * sizeof(Ack), sizeof(Ack));
      if (int rc = e.post_recv(qp_, r); rc != 0) fail("post_recv: %s", std::strerror(-rc));
    }
  }

  Qp* qp() const { return qp_; }
  bool done() const { return done_; }
  bool big() const { return sizes_.back() > (2u << 20); }
  const std::vector<uint64_t>& sizes() const { return sizes_; }

  void connect(uint16_t port) {
    Hello h;
    h.from = self_;
    if (int rc = e_.connect(qp_, loopback(port), &h, sizeof(h)); rc != 0)
      fail("connect %d->%d (127.0.0.1:%u): %s", self_, peer_, port, std::strerror(-rc));
  }

  void established(const CmEvent& ev) {
    Welcome w;
    if (!decode(ev.private_data, &w) || w.from != peer_)
      fail("%d->%d: the MPA Reply is not the expected peer's", self_, peer_);
    a_ = w.a, b_ = w.b, c_ = w.c, w_ = w.w;
    up_ = true;
    start_step();
  }

  // Reaps completions and moves on when a step is complete.
  void poll() {
    if (!up_ || done_) return;
    Wc wcs[16];
    for (int n; (n = e_.poll_cq(cq_, wcs, 16)) > 0;)
      for (int i = 0; i < n; ++i) on_wc(expect_success(wcs[i], "requester", self_, peer_));
    if (pending_ > 0 || !acked_) return;
    if (step_ < sizes_.size()) {
      finish_step();
      ++step_;
      start_step();
    } else {
      done_ = true;
    }
  }

 private:
  void post(const SendWr& wr) {
    if (int rc = e_.post_send(qp_, wr); rc != 0)
      fail("%d->%d: post_send(%s): %s", self_, peer_, to_string(wr.opcode), std::strerror(-rc));
    ++pending_;
  }

  SendWr rdma(WrOpcode op, WrId id, const Region& r, uint64_t off) const {
    return SendWr{.wr_id = id, .opcode = op, .remote_addr = r.addr + off, .rkey = r.rkey};
  }

  void start_step() {
    acked_ = false;
    if (step_ == sizes_.size()) {  // DONE: the atomic word we expect
      std::memcpy(words_.p(24), &atomic_.w, 8);
      SendWr s{.wr_id = kDone, .opcode = WrOpcode::kSend, .num_sge = 1};
      s.sg_list[0] = words_.sge(24, 8);
      post(s);
      return;
    }
    const uint64_t n = sizes_[step_];
    const size_t k = step_;
    auto fill = [&](Buf& b, What what) {
      const std::vector<uint8_t> p = pattern(n, seed_of(self_, peer_, k, what));
      std::memcpy(b.p(), p.data(), n);
    };
    fill(src_w_, What::kWrite);
    fill(src_s_, What::kSend);
    fill(src_i_, What::kWriteImm);
    std::memset(read_.p(), 0xA5, n);
    std::memset(words_.p(), 0xA5, 24);

    SendWr w = rdma(WrOpcode::kWrite, kWrite, a_, 0);
    w.num_sge = 1, w.sg_list[0] = src_w_.sge(0, n);
    post(w);
    SendWr fa = rdma(WrOpcode::kAtomicFetchAdd, kFetchAdd, w_, 0);
    fa.num_sge = 1, fa.sg_list[0] = words_.sge(0, 8), fa.compare_add = AtomicSeq::addend(k);
    post(fa);
    AtomicSeq after_add = atomic_;
    after_add.w += AtomicSeq::addend(k);
    SendWr hit = rdma(WrOpcode::kAtomicCmpSwap, kCasHit, w_, 0);
    hit.num_sge = 1, hit.sg_list[0] = words_.sge(8, 8);
    hit.compare_add = after_add.w, hit.swap = after_add.swap_value(k);
    post(hit);
    SendWr miss = rdma(WrOpcode::kAtomicCmpSwap, kCasMiss, w_, 0);
    miss.num_sge = 1, miss.sg_list[0] = words_.sge(16, 8);
    miss.compare_add = ~after_add.swap_value(k), miss.swap = 0x0BAD0BAD0BAD0BADull;
    post(miss);
    SendWr s{.wr_id = kSend, .opcode = WrOpcode::kSend, .num_sge = 1};
    s.sg_list[0] = src_s_.sge(0, n);
    post(s);
    SendWr wi = rdma(WrOpcode::kWriteWithImm, kWriteImm, b_, 0);
    wi.num_sge = 1, wi.sg_list[0] = src_i_.sge(0, n), wi.imm_data = tag(k);
    post(wi);
    SendWr r = rdma(WrOpcode::kRead, kRead, c_, k % kReadSlack);
    r.num_sge = 1, r.sg_list[0] = read_.sge(0, n);
    post(r);
  }

  static uint64_t tag(size_t step) { return 0x1D00000000ull + step; }

  void on_wc(const Wc& wc) {
    static constexpr WcOpcode kOps[] = {WcOpcode::kSend, WcOpcode::kWrite, WcOpcode::kSend,
                                        WcOpcode::kWrite, WcOpcode::kRead, WcOpcode::kFetchAdd,
                                        WcOpcode::kCmpSwap, WcOpcode::kCmpSwap, WcOpcode::kSend};
    if (wc.opcode == WcOpcode::kRecv) {  // the responder's acknowledgement
      Ack a;
      std::memcpy(&a, acks_.p(wc.wr_id * sizeof(Ack)), sizeof(a));
      if (wc.byte_len != sizeof(Ack) || a.magic != kMagic || a.step != step_ ||
          wc.wr_id != step_)
        fail("%d->%d: acknowledgement for step %" PRIu64 " (%u bytes, slot %" PRIu64
             ") while at step %zu", self_, peer_, a.step, wc.byte_len, wc.wr_id, step_);
      acked_ = true;
      return;
    }
    if (wc.wr_id < kWrite || wc.wr_id > kDone || wc.opcode != kOps[wc.wr_id])
      fail("%d->%d: completion %s for work request %" PRIu64, self_, peer_,
           to_string(wc.opcode), wc.wr_id);
    if (pending_ == 0) fail("%d->%d: a completion too many", self_, peer_);
    --pending_;
    if (wc.wr_id == kRead && wc.byte_len != sizes_[step_])
      fail("%d->%d: Read of %" PRIu64 " completed %u bytes", self_, peer_, sizes_[step_],
           wc.byte_len);
  }

  // All seven completed and the responder checked its side: our checks.
  void finish_step() {
    const uint64_t n = sizes_[step_];
    const size_t k = step_;
    expect_bytes("RDMA Read", peer_, self_, k, n, read_.p(), read_expect_.data() + k % kReadSlack);
    uint64_t got[3];
    std::memcpy(got, words_.p(), 24);
    const uint64_t before = atomic_.w;
    const uint64_t after_add = before + AtomicSeq::addend(k);
    atomic_.advance(k);
    const uint64_t want[3] = {before, after_add, atomic_.w};
    static const char* const kNames[] = {"Fetch-Add", "Cmp-Swap (equal)", "Cmp-Swap (unequal)"};
    for (int i = 0; i < 3; ++i)
      if (got[i] != want[i])
        fail("ATOMIC MISMATCH %d->%d step %zu: %s returned 0x%016" PRIx64
             ", the word was 0x%016" PRIx64, self_, peer_, k, kNames[i], got[i], want[i]);
  }

  Engine& e_;
  const int self_, peer_;
  const std::vector<uint64_t> sizes_;
  AtomicSeq atomic_;
  Buf src_w_, src_s_, src_i_, read_, words_, acks_;
  std::vector<uint8_t> read_expect_;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  Region a_, b_, c_, w_;
  size_t step_ = 0;
  int pending_ = 0;
  bool acked_ = false;
  bool up_ = false;
  bool done_ = false;
};

// The connection requester `peer` opened to us: we check what lands.
class Responder {
 public:
  Responder(Engine& e, Pd* pd, int self, int peer, int procs, uint64_t big)
      : e_(e), self_(self), peer_(peer), sizes_(sizes_for(peer, self, procs, big)),
        atomic_(peer, self) {
    const uint64_t max = largest(sizes_);
    recv_.init(e, pd, max, kAccessLocalWrite);
    a_.init(e, pd, max, kAccessRemoteWrite);
    b_.init(e, pd, max, kAccessRemoteWrite);
    c_.init(e, pd, max + kReadSlack, kAccessRemoteRead);
    const std::vector<uint8_t> src = pattern(max + kReadSlack, seed_of(self, peer, 0, What::kReadSource));
    std::memcpy(c_.p(), src.data(), src.size());
    w_.init(e, pd, 8, kAccessRemoteAtomic | kAccessRemoteWrite | kAccessLocalWrite);
    std::memcpy(w_.p(), &atomic_.w, 8);
    acks_.init(e, pd, sizeof(Ack) * (sizes_.size() + 1), 0);
    cq_ = e.create_cq(64);
    qp_ = e.create_qp({.pd = pd, .send_cq = cq_, .recv_cq = cq_,
                       .sq_depth = static_cast<uint32_t>(sizes_.size()) + 2, .rq_depth = 8});
    if (!cq_ || !qp_) fail("create_qp");
    post_receives();
  }

  bool done() const { return done_; }
  Qp* qp() const { return qp_; }

  void accept(ConnReq* req) {
    Welcome w;
    w.from = self_;
    w.a = {addr_of(a_.p()), a_.mr->stag};
    w.b = {addr_of(b_.p()), b_.mr->stag};
    w.c = {addr_of(c_.p()), c_.mr->stag};
    w.w = {addr_of(w_.p()), w_.mr->stag};
    if (int rc = e_.accept(req, qp_, &w, sizeof(w)); rc != 0)
      fail("accept from %d: %s", peer_, std::strerror(-rc));
  }

  void poll() {
    Wc wcs[16];
    for (int n; (n = e_.poll_cq(cq_, wcs, 16)) > 0;)
      for (int i = 0; i < n; ++i) on_wc(expect_success(wcs[i], "responder", peer_, self_));
  }

 private:
  // The receives one step consumes: the Send's, then the Immediate Data's
  // (no buffer); after the last step only DONE's.
  void post_receives() {
    RecvWr r{.wr_id = 2 * step_, .num_sge = 1};
    r.sg_list[0] = recv_.sge(0, recv_.v.size());
    if (int rc = e_.post_recv(qp_, r); rc != 0) fail("post_recv: %s", std::strerror(-rc));
    if (step_ == sizes_.size()) return;
    RecvWr imm{.wr_id = 2 * step_ + 1, .num_sge = 0};
    if (int rc = e_.post_recv(qp_, imm); rc != 0) fail("post_recv: %s", std::strerror(-rc));
  }

  void on_wc(const Wc& wc) {
    const size_t k = step_;
    if (wc.opcode == WcOpcode::kSend) return;  // our acknowledgement went out
    if (done_) fail("%d->%d: a completion after DONE", peer_, self_);
    if (wc.opcode == WcOpcode::kRecv) {
      if (wc.wr_id != 2 * k || got_send_)
        fail("%d->%d: Send completed receive %" PRIu64 " at step %zu", peer_, self_, wc.wr_id, k);
      // This step's atomics came before this Send on the stream (the next
      // step's wait for our acknowledgement).
      if (k < sizes_.size()) atomic_.advance(k);
      uint64_t word;
      std::memcpy(&word, w_.p(), 8);
      if (word != atomic_.w)
        fail("ATOMIC MISMATCH %d->%d: the word is 0x%016" PRIx64 " after step %zu, expected "
             "0x%016" PRIx64, peer_, self_, word, k, atomic_.w);
      if (k == sizes_.size()) {  // DONE carries what the requester expects
        uint64_t theirs = 0;
        if (wc.byte_len == 8) std::memcpy(&theirs, recv_.p(), 8);
        if (wc.byte_len != 8 || theirs != atomic_.w)
          fail("%d->%d: DONE of %u bytes says the word is 0x%016" PRIx64 ", we have 0x%016" PRIx64,
               peer_, self_, wc.byte_len, theirs, atomic_.w);
        acknowledge();
        done_ = true;
        return;
      }
      const uint64_t n = sizes_[k];
      if (wc.byte_len != n)
        fail("%d->%d step %zu: Send of %" PRIu64 " bytes arrived with %u", peer_, self_, k, n,
             wc.byte_len);
      expect_bytes("Send", peer_, self_, k, n, recv_.p(),
                   pattern(n, seed_of(peer_, self_, k, What::kSend)).data());
      // The Write was posted before the Send on the same stream: placed.
      expect_bytes("RDMA Write", peer_, self_, k, n, a_.p(),
                   pattern(n, seed_of(peer_, self_, k, What::kWrite)).data());
      got_send_ = true;
    } else if (wc.opcode == WcOpcode::kRecvRdmaImm) {
      if (wc.wr_id != 2 * k + 1 || !got_send_ || !(wc.flags & kWcWithImm) ||
          wc.imm_data != 0x1D00000000ull + k)
        fail("%d->%d step %zu: Immediate Data 0x%" PRIx64 " (flags 0x%x) on receive %" PRIu64,
             peer_, self_, k, wc.imm_data, wc.flags, wc.wr_id);
      const uint64_t n = sizes_[k];
      expect_bytes("RDMA Write with Immediate", peer_, self_, k, n, b_.p(),
                   pattern(n, seed_of(peer_, self_, k, What::kWriteImm)).data());
      got_send_ = false;
      ++step_;
      post_receives();  // before the acknowledgement lets the requester go on
      acknowledge();
    } else {
      fail("%d->%d: unexpected %s completion", peer_, self_, to_string(wc.opcode));
    }
  }

  void acknowledge() {
    // Acknowledgement i names step i (DONE: the number of steps).
    const uint64_t acked = k_acked_++;
    Ack a{.step = acked};
    std::memcpy(acks_.p(acked * sizeof(Ack)), &a, sizeof(a));
    SendWr s{.wr_id = 100 + acked, .opcode = WrOpcode::kSend, .num_sge = 1};
    s.sg_list[0] = acks_.sge(acked * sizeof(Ack), sizeof(Ack));
    if (int rc = e_.post_send(qp_, s); rc != 0)
      fail("%d->%d: acknowledgement: %s", peer_, self_, std::strerror(-rc));
  }

  Engine& e_;
  const int self_, peer_;
  const std::vector<uint64_t> sizes_;
  AtomicSeq atomic_;
  Buf recv_, a_, b_, c_, w_, acks_;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  size_t step_ = 0;
  uint64_t k_acked_ = 0;
  bool got_send_ = false;
  bool done_ = false;
};

// --- the child -------------------------------------------------------------

void write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("pipe write: %s", std::strerror(errno));
    c += w, n -= static_cast<size_t>(w);
  }
}

// Reads n bytes, progressing the engine meanwhile (peers need us).
void read_all(int fd, void* p, size_t n, Engine* e, Clock::time_point deadline,
              const char* what) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    if (Clock::now() > deadline) fail("timed out waiting for %s", what);
    if (e) e->progress(0);
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, e ? 0 : 100) <= 0) continue;
    ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("the parent went away (%s)", what);
    c += r, n -= static_cast<size_t>(r);
  }
}

int child(int rank, int procs, uint64_t big, Clock::time_point deadline, int up, int down) {
  g_rank = rank;
  Engine e;  // FI_SOFTRDMA_*: nothing set means the DPDK memif mesh
  if (!e.ok()) fail("the engine's transport did not start");
  if (std::strcmp(e.transport_name(), "dpdk") != 0)
    fail("transport is %s, want dpdk (the embedded memif mesh)", e.transport_name());
  Pd* pd = e.alloc_pd();
  Listener* l = nullptr;
  if (int rc = e.listen(loopback(0), 16, &l); rc != 0) fail("listen: %s", std::strerror(-rc));
  const uint16_t port = ntohs(e.listen_addr(l).sin_port);

  std::vector<std::unique_ptr<Requester>> req(procs);
  std::vector<std::unique_ptr<Responder>> resp(procs);
  for (int p = 0; p < procs; ++p) {
    if (p == rank) continue;
    req[p] = std::make_unique<Requester>(e, pd, rank, p, procs, big);
    resp[p] = std::make_unique<Responder>(e, pd, rank, p, procs, big);
  }
  write_all(up, &port, sizeof(port));
  std::vector<uint16_t> ports(procs);
  read_all(down, ports.data(), sizeof(uint16_t) * procs, &e, deadline, "the port list");

  // Everyone at once.
  for (int p = 0; p < procs; ++p)
    if (req[p]) req[p]->connect(ports[p]);

  // Which peer a QP talks to, and whether it is one of our requesters.
  auto owner = [&](Qp* qp, bool* active) -> int {
    for (int p = 0; p < procs; ++p) {
      if (!req[p]) continue;
      *active = req[p]->qp() == qp;
      if (*active || resp[p]->qp() == qp) return p;
    }
    return -1;
  };
  bool barrier = false;
  int up_count = 0;
  for (;;) {
    // Busy polling, but idle passes give the CPU away for a moment: four
    // spinning processes on a 2-core machine starve peers still starting
    // DPDK for their links, and a mesh link must be up within a fixed 3 s
    // of the connect() that asked for it (both ends' DPDK start included).
    if (e.progress(0) == 0) usleep(20);
    CmEvent ev;
    while (e.poll_cm(&ev)) {
      bool active = false;
      switch (ev.type) {
        case CmEventType::kConnectRequest: {
          Hello h;
          if (!decode(ev.private_data, &h) || h.from < 0 || h.from >= procs || h.from == rank ||
              !resp[h.from])
            fail("a connection request from no peer of ours");
          resp[h.from]->accept(ev.req);
          break;
        }
        case CmEventType::kEstablished: {
          const int p = owner(ev.qp, &active);
          if (p < 0) fail("established: an unknown QP");
          if (active) req[p]->established(ev);
          ++up_count;
          break;
        }
        default: {
          const int p = owner(ev.qp, &active);
          fail("%s on the connection %d->%d: %s (status %d, term 0x%x)", to_string(ev.type),
               active ? rank : p, active ? p : rank,
               ev.status ? std::strerror(-ev.status) : "-", ev.status, ev.term);
        }
      }
    }
    bool all = up_count == 2 * (procs - 1);
    for (int p = 0; p < procs; ++p) {
      if (!req[p]) continue;
      req[p]->poll();
      resp[p]->poll();
      all = all && req[p]->done() && resp[p]->done();
    }
    if (all && !barrier) {
      barrier = true;
      const char d = 'D';
      write_all(up, &d, 1);
      break;
    }
    if (Clock::now() > deadline) {
      char state[512] = "";
      size_t used = 0;
      for (int p = 0; p < procs && used < sizeof(state); ++p) {
        if (!req[p]) continue;
        used += static_cast<size_t>(
            std::snprintf(state + used, sizeof(state) - used, " %d->%d %s, %d->%d %s;", rank, p,
                          req[p]->done() ? "done" : "busy", p, rank,
                          resp[p]->done() ? "done" : "busy"));
      }
      fail("timed out; %d of %d connections up;%s", up_count, 2 * (procs - 1), state);
    }
  }
  // Everyone verified everything: wait for the others, still serving them.
  char go = 0;
  read_all(down, &go, 1, &e, deadline, "the final barrier");
  e.close_listener(l);
  for (int p = 0; p < procs; ++p)
    if (req[p]) e.disconnect(req[p]->qp());
  // Orderly close, bounded: the peers' ends and ours go down.
  const Clock::time_point until = std::min(deadline, Clock::now() + std::chrono::seconds(5));
  while (Clock::now() < until) {
    e.progress(0);
    CmEvent ev;
    while (e.poll_cm(&ev)) {
    }
    bool open = false;
    for (int p = 0; p < procs; ++p)
      if (req[p]) open = open || req[p]->qp()->conn() || resp[p]->qp()->conn();
    if (!open) break;
  }
  // What this process checked: its Reads, and what its peers sent it.
  uint64_t out = 0, in = 0, most = 0;
  for (int p = 0; p < procs; ++p) {
    if (!req[p]) continue;
    for (uint64_t n : req[p]->sizes()) out += n, most = std::max(most, n);
    for (uint64_t n : sizes_for(p, rank, procs, big)) in += 3 * n, most = std::max(most, n);
  }
  std::printf("mesh_test[%d pid %d]: %d connections out, %d in, all verified: %" PRIu64
              " bytes read back, %" PRIu64 " bytes received (send, write, write_imm), "
              "largest message %" PRIu64 " bytes\n",
              rank, getpid(), procs - 1, procs - 1, out, in, most);
  std::fflush(stdout);
  return 0;
}

// --- the parent ------------------------------------------------------------

int run(int procs, uint64_t big, double timeout_s) {
  const Clock::time_point t0 = Clock::now();
  const auto budget = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(timeout_s));
  std::vector<pid_t> pids(procs, -1);
  std::vector<int> up(procs, -1), down(procs, -1);
  signal(SIGPIPE, SIG_IGN);  // a dead child's pipe must not kill the parent
  std::fflush(stdout);
  for (int i = 0; i < procs; ++i) {
    int u[2], d[2];
    if (pipe2(u, O_CLOEXEC) != 0 || pipe2(d, O_CLOEXEC) != 0) {
      std::perror("pipe");
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      ::close(u[0]);
      ::close(d[1]);
      for (int j = 0; j < i; ++j) ::close(up[j]), ::close(down[j]);
      // The child's own deadline comes first; the parent's kill backs it up.
      _exit(child(i, procs, big, t0 + budget - std::chrono::seconds(5), u[1], d[0]));
    }
    ::close(u[1]);
    ::close(d[0]);
    pids[i] = pid;
    up[i] = u[0];
    down[i] = d[1];
  }

  std::vector<uint16_t> ports(procs, 0);
  std::vector<size_t> got(procs, 0);  // bytes of the port, then the barrier byte
  std::vector<bool> reaped(procs, false);
  int stage = 0;  // 0: gathering ports, 1: waiting at the barrier, 2: released
  // Kills and reaps whatever is left; the test has failed.
  auto abort_all = [&](const char* why) {
    std::fprintf(stderr, "mesh_test: FAIL: %s; stopping the rest\n", why);
    for (int i = 0; i < procs; ++i)
      if (!reaped[i]) kill(pids[i], SIGKILL);
    for (int i = 0; i < procs; ++i)
      if (!reaped[i]) waitpid(pids[i], nullptr, 0);
    return 1;
  };
  for (int left = procs; left > 0;) {
    if (Clock::now() > t0 + budget) return abort_all("timed out");
    for (int i = 0; i < procs; ++i) {
      if (reaped[i]) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      reaped[i] = true;
      --left;
      char why[128];
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::snprintf(why, sizeof(why), "process %d (pid %d) %s %d", i, pids[i],
                      WIFEXITED(status) ? "exited" : "was killed by signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return abort_all(why);
      }
      if (stage < 2) {
        std::snprintf(why, sizeof(why), "process %d exited before the barrier", i);
        return abort_all(why);
      }
    }
    std::vector<pollfd> pfds;
    for (int i = 0; i < procs; ++i) pfds.push_back({reaped[i] ? -1 : up[i], POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), 20) <= 0) continue;
    for (int i = 0; i < procs; ++i) {
      if (!(pfds[i].revents & POLLIN)) continue;
      if (stage == 0 && got[i] < sizeof(uint16_t)) {
        ssize_t r = ::read(up[i], reinterpret_cast<char*>(&ports[i]) + got[i],
                           sizeof(uint16_t) - got[i]);
        if (r > 0) got[i] += static_cast<size_t>(r);
      } else if (stage == 1 && got[i] == sizeof(uint16_t)) {
        char d = 0;
        if (::read(up[i], &d, 1) == 1 && d == 'D') ++got[i];
      }
    }
    auto all_got = [&](size_t n) {
      return std::all_of(got.begin(), got.end(), [n](size_t g) { return g == n; });
    };
    if (stage == 0 && all_got(sizeof(uint16_t))) {
      std::printf("mesh_test: %d processes listening on ports", procs);
      for (uint16_t p : ports) std::printf(" %u", p);
      std::printf("; connecting all to all\n");
      std::fflush(stdout);
      for (int i = 0; i < procs; ++i) write_all(down[i], ports.data(), sizeof(uint16_t) * procs);
      stage = 1;
    } else if (stage == 1 && all_got(sizeof(uint16_t) + 1)) {
      std::printf("mesh_test: all %d connections verified after %.1f s; closing\n",
                  procs * (procs - 1), std::chrono::duration<double>(Clock::now() - t0).count());
      std::fflush(stdout);
      const char go = 'G';
      for (int i = 0; i < procs; ++i) write_all(down[i], &go, 1);
      stage = 2;
    }
  }
  std::printf("mesh_test: PASS: %d processes, %d connections, %.1f s\n", procs,
              procs * (procs - 1), std::chrono::duration<double>(Clock::now() - t0).count());
  return 0;
}

}  // namespace
}  // namespace softrdma::mesh

int main(int argc, char** argv) {
  int procs = 4;
  double timeout_s = 150;
  uint64_t big = uint64_t{64} << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--procs" && v) {
      procs = std::atoi(v), ++i;
    } else if (a == "--timeout" && v) {
      timeout_s = std::atof(v), ++i;
    } else if (a == "--big" && v) {
      big = std::strtoull(v, nullptr, 0), ++i;
    } else {
      std::fprintf(stderr, "usage: mesh_test [--procs 2..%d] [--timeout S] [--big BYTES]\n",
                   softrdma::mesh::kMaxProcs);
      return 2;
    }
  }
  if (procs < 2 || procs > softrdma::mesh::kMaxProcs || !(timeout_s > 10) || big > (1u << 30)) {
    std::fprintf(stderr, "mesh_test: bad arguments\n");
    return 2;
  }
  return softrdma::mesh::run(procs, big, timeout_s);
}
