// srdma_soak: a long run of the SoftRDMA engine under mixed load, every byte
// checked, memory watched (issue 6's soak; docs/soak.md).
//
//   server:  srdma_soak --server [-p port]
//   client:  srdma_soak [-p port] [--duration S] [--conns N] [--churn C] ... <server-ip>
//
// Main phase: the client opens --conns connections and for --duration
// seconds keeps --depth operations in flight on each: a seeded random mix of
// Send, RDMA Write, RDMA Read, Write with Immediate, Fetch-Add and
// Compare-Swap, sizes log-uniform from 0 B to --max-size, at odd offsets.
// Operation k of connection c is a pure function of (seed, c, k) (OpGen), so
// the server derives the same sequence and checks what arrives, in order:
//
//   Send            receive buffer      server: length and every byte
//   Write           server write slot   server, once the client's notify word
//                                       (ops issued, written after the Write)
//                                       covers it: placement is in order
//   Write with Imm  server write slot   server, at the receive completion:
//                                       immediate value and every byte
//   Read            server read source  client: every byte (sink poisoned first)
//   Fetch-Add/CSwap server atomic word  client: each returned value against its
//                                       model; server: the final word
//
// Payloads are patterns seeded by (seed, connection, k). iWARP has no
// receiver-not-ready retry, so the server returns credits (receives posted,
// write slots checked) in the client's control block with small Writes; the
// same Write carries the server's verified counts and RSS. At the end the
// client writes the op count into the server's end word; the server finishes
// checking, replays the atomics, writes its final counts, then a done word.
//
// Churn phase (--churn C): C short connections, --churn-parallel open at a
// time, each runs --churn-ops checked operations the same way and closes;
// afterwards the client's descriptors, RSS and lwIP's held frames must be
// back where they were.
//
// Finally the client connects once more with a "bye" request: the server
// rejects it with its own summary (errors, peak and final RSS) and exits.
//
// With --serve-until-idle S the server outlives its clients (the fault
// suite, stack/tests/peer_fault_test.sh): a lost connection is an error event
// it reports and survives, a connection silent for --stall is dropped, and it
// exits after S seconds with nothing open, checking that its engine objects,
// frames, mbufs and memory are back to the idle baseline. Clients run with
// --no-bye so that the server stays up.
//
// Exit: 0 all verified and memory flat; 1 a data mismatch, or memory grew
// (RSS growth after the first 20 % of the main phase above --flat-mib, or
// churn left resources behind); 2 an error: lost connection, stall (no
// progress for --stall seconds: a dead peer), timeout, usage.
#include <arpa/inet.h>
#include <dirent.h>
#include <getopt.h>
#include <malloc.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "stack/engine.h"
#include "stack/tools/tool_common.h"

namespace softrdma::soak {
namespace {

using namespace softrdma::tools;

static_assert(std::endian::native == std::endian::little, "patterns assume little-endian");

constexpr uint16_t kDefaultPort = 18616;
constexpr int kExitMismatch = 1;  // data mismatch or memory not flat
constexpr int kExitError = 2;     // lost connection, stall, timeout, usage
constexpr uint32_t kMagic = 0x4b414f53;  // "SOAK"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxDepth = 64;
constexpr uint64_t kMaxSize = uint64_t{64} << 20;
constexpr uint32_t kOffsetSlack = 64;  // payloads start 0..63 bytes into their slots
constexpr uint32_t kReadSlack = 4096;  // Reads start 0..4095 bytes into the source
constexpr uint32_t kCqDepth = 4096;    // shared by all QPs (the CQ spills beyond)
constexpr uint64_t kMaxReports = 10;   // mismatches printed in detail

const char* g_role = "client";

// Under AddressSanitizer freed memory sits in a quarantine (256 MiB by
// default) by design, so RSS says nothing about leaks there: LeakSanitizer
// judges them at exit instead, and the RSS bounds are reported, not applied.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssJudged = false;
#else
constexpr bool kRssJudged = true;
#endif

[[noreturn]] __attribute__((format(printf, 2, 3))) void die(int code, const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "srdma_soak %s: ", g_role);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::exit(code);
}

double mib(uint64_t kb) { return static_cast<double>(kb) / 1024.0; }
double gib(uint64_t bytes) { return static_cast<double>(bytes) / double(uint64_t{1} << 30); }

// --- process figures -------------------------------------------------------

struct MemFigures {
  uint64_t rss_kb = 0;  // VmRSS: resident now
  uint64_t hwm_kb = 0;  // VmHWM: the peak resident size so far
};

MemFigures read_mem() {
  MemFigures m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long v;
    if (std::sscanf(line, "VmRSS: %llu kB", &v) == 1) m.rss_kb = v;
    if (std::sscanf(line, "VmHWM: %llu kB", &v) == 1) m.hwm_kb = v;
  }
  std::fclose(f);
  return m;
}

// Resident memory that is live: glibc keeps freed heap memory (and raises its
// mmap threshold after freeing a large block, so later mid-sized buffers come
// from the heap); malloc_trim gives free memory back first, so what stays
// resident is what the process still holds. Used for before/after figures,
// never inside the steady-state watch.
uint64_t live_rss_kb() {
  malloc_trim(0);
  return read_mem().rss_kb;
}

int count_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own descriptor
}

// What a connection holds while open and must give back when closed.
struct Resources {
  uint64_t fds = 0, rss_kb = 0;
  Counters c{};

  static Resources now(Engine& eng) {
    return {.fds = static_cast<uint64_t>(count_fds()), .rss_kb = live_rss_kb(),
            .c = eng.counters()};
  }
  // Everything back to `before` (memory within slack_kb: allocators keep some).
  bool back_to(const Resources& before, uint64_t slack_kb) const {
    const bool rss_ok = !kRssJudged || rss_kb <= before.rss_kb + slack_kb;
    return fds == before.fds && rss_ok && c.qps == before.c.qps &&
           c.mrs == before.c.mrs && c.connections == before.c.connections &&
           c.rx_frames_held <= before.c.rx_frames_held &&
           c.mbufs_in_use <= before.c.mbufs_in_use;
  }
  std::string describe() const {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "fds %" PRIu64 " rss %.1f MiB qps %" PRIu64 " mrs %" PRIu64 " conns %" PRIu64
                  " held frames %" PRIu64 " mbufs in use %" PRIu64,
                  fds, mib(rss_kb), c.qps, c.mrs, c.connections, c.rx_frames_held,
                  c.mbufs_in_use);
    return buf;
  }
};

// --- the operation sequence ------------------------------------------------

enum class Op : uint8_t { kSend, kWrite, kRead, kWriteImm, kFetchAdd, kCmpSwap };
constexpr const char* kOpNames[] = {"send", "write", "read", "write_imm", "fadd", "cas"};
// Weights of the mix, in percent.
constexpr uint32_t kOpWeights[] = {24, 24, 20, 16, 8, 8};
constexpr size_t kOps = 6;

const char* op_name(Op op) { return kOpNames[static_cast<size_t>(op)]; }
bool is_atomic(Op op) { return op == Op::kFetchAdd || op == Op::kCmpSwap; }
bool uses_recv(Op op) { return op == Op::kSend || op == Op::kWriteImm; }    // takes a receive
bool uses_wslot(Op op) { return op == Op::kWrite || op == Op::kWriteImm; }  // takes a write slot

// Everything about operation k that both sides must agree on.
struct OpSpec {
  Op op = Op::kSend;
  uint32_t size = 0;
  uint32_t local_off = 0;   // into the client's slot (0 for atomics: 8-aligned)
  uint32_t remote_off = 0;  // into the server's write slot, or the read source
  uint64_t seed = 0;        // the payload's pattern
  uint64_t imm = 0;         // Write with Immediate
  uint64_t operand = 0;     // Fetch-Add addend; Compare-Swap: the miss mask
  uint64_t swap = 0;
  bool cas_hit = true;      // Compare-Swap compares with the true value
};

class OpGen {
 public:
  OpGen() = default;
  OpGen(uint64_t seed, uint32_t conn, uint32_t max_size)
      : base_(mix64(seed ^ mix64(conn + 0x50414bull))), max_size_(max_size),
        log_range_(std::log2(double(max_size) + 1.0)) {}

  OpSpec at(uint64_t k) const {
    const uint64_t r0 = rnd(k, 0), r1 = rnd(k, 1), r2 = rnd(k, 2);
    OpSpec s;
    s.op = pick_op(r0 % 100);
    s.seed = rnd(k, 3);
    if (is_atomic(s.op)) {
      s.size = 8;
      s.operand = rnd(k, 4) | 1;  // nonzero: a miss mask really misses
      s.swap = rnd(k, 5);
      s.cas_hit = (r0 >> 32) % 4 != 0;
      return s;
    }
    s.size = log_uniform(r1);
    s.local_off = static_cast<uint32_t>(r2 % kOffsetSlack);
    s.remote_off = static_cast<uint32_t>((r2 >> 16) % (s.op == Op::kRead ? kReadSlack
                                                                        : kOffsetSlack));
    s.imm = rnd(k, 6);
    return s;
  }
  // The atomic word's first value, and the read source's pattern.
  uint64_t atomic_init() const { return mix64(base_ ^ 0xA7011Cull); }
  uint64_t read_seed() const { return mix64(base_ ^ 0x5EADull); }

 private:
  uint64_t rnd(uint64_t k, uint64_t j) const { return mix64(base_ ^ mix64(k * 8 + j)); }
  static Op pick_op(uint64_t pct) {
    for (size_t i = 0; i < kOps; ++i) {
      if (pct < kOpWeights[i]) return static_cast<Op>(i);
      pct -= kOpWeights[i];
    }
    return Op::kSend;
  }
  // 2^x - 1 for x uniform in [0, log2(max + 1)): 0 .. max, each octave alike.
  uint32_t log_uniform(uint64_t r) const {
    const double u = double(r >> 11) / double(uint64_t{1} << 53);
    const double v = std::floor(std::exp2(u * log_range_)) - 1.0;
    return static_cast<uint32_t>(std::clamp(v, 0.0, double(max_size_)));
  }

  uint64_t base_ = 0;
  uint32_t max_size_ = 0;
  double log_range_ = 0;
};

// The atomic word as the operations leave it: applies s to *v and returns
// the original value the operation must report.
uint64_t apply_atomic(const OpSpec& s, uint64_t* v, uint64_t* compare) {
  const uint64_t orig = *v;
  if (s.op == Op::kFetchAdd) {
    *v += s.operand;
  } else {
    *compare = s.cas_hit ? orig : orig ^ s.operand;
    if (*compare == orig) *v = s.swap;
  }
  return orig;
}

// --- the wire between client and server ------------------------------------

struct Region {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint32_t rkey = 0;
  uint32_t pad = 0;
};

enum class HelloKind : uint8_t { kData = 1, kBye = 2 };

// Client -> server, in the MPA Request.
struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint8_t kind = 0;
  uint8_t pad[3] = {};
  uint32_t conn = 0;
  uint64_t seed = 0;
  uint32_t max_size = 0;
  uint32_t depth = 0;  // operations in flight; also the server's receive and write slots
  Region ctrl;
};

// Server -> client, in the MPA Reply.
struct Welcome {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  Region data, ctrl;
};

// Server -> client in the Reject of a bye request: the server's account.
struct Farewell {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t mismatches = 0;
  uint64_t lost = 0;  // connections that ended before their checks were done
  uint64_t ops = 0, bytes = 0, conns = 0;
  uint64_t peak_rss_kb = 0, final_rss_kb = 0, open_conns = 0;
};
static_assert(sizeof(Hello) <= Engine::kMaxPrivateData);
static_assert(sizeof(Welcome) <= Engine::kMaxPrivateData);
static_assert(sizeof(Farewell) <= Engine::kMaxPrivateData);

template <class T>
bool decode(const std::vector<uint8_t>& pd, T* out) {
  if (pd.size() != sizeof(T)) return false;
  std::memcpy(out, pd.data(), sizeof(T));
  return out->magic == kMagic && out->version == kVersion;
}

// The server's running account of one connection, Written into the client's
// control block. Every field only grows, so a Write that overtakes an older
// one, or a value read while the next lands, is still true.
struct Credit {
  uint64_t recv_posted = 0;      // receives posted: Sends/Write-Imms the client may issue
  uint64_t writes_checked = 0;   // write slots freed
  uint64_t ops_checked = 0;
  uint64_t bytes_checked = 0;
  uint64_t mismatches = 0;
  uint64_t rss_kb = 0;  // the server process's, for the client's memory watch
};

constexpr size_t kNotifyRing = 2 * kMaxDepth + 4;  // > notifies that can be queued

// Written by the server; the rest are sources of the client's own Writes.
struct alignas(64) ClientCtrl {
  Credit credit;
  alignas(64) uint64_t done = 0;  // the end value, once the final credit has landed
  alignas(64) uint64_t notify_src[kNotifyRing] = {};
  uint64_t end_src = 0;
};

// Written by the client; the rest are sources of the server's own Writes.
struct alignas(64) ServerCtrl {
  uint64_t notify = 0;  // operations issued, written after each RDMA Write
  uint64_t end = 0;     // operations in all + 1, written once all have completed
  alignas(64) Credit credit_src;
  uint64_t done_src = 0;
};

// A connection's server memory (one MR): receive slots, write slots, the
// read source, the atomic word.
struct Layout {
  uint64_t stride = 0;
  uint32_t slots = 0;
  uint32_t max_size = 0;

  Layout() = default;
  Layout(uint32_t max, uint32_t depth)
      : stride((uint64_t{max} + kOffsetSlack + 63) & ~uint64_t{63}), slots(depth), max_size(max) {}
  uint64_t recv(uint64_t i) const { return (i % slots) * stride; }
  uint64_t wslot(uint64_t i) const { return (slots + i % slots) * stride; }
  uint64_t read_src() const { return 2 * slots * stride; }
  uint64_t read_len() const { return (uint64_t{max_size} + kReadSlack + 63) & ~uint64_t{63}; }
  uint64_t atomic() const { return read_src() + read_len(); }
  uint64_t bytes() const { return atomic() + 64; }
};

// --- options ---------------------------------------------------------------

struct Options {
  bool server = false;
  std::string host;
  uint16_t port = kDefaultPort;
  double duration_s = 60;
  uint32_t conns = 8;
  uint32_t depth = 8;
  uint32_t max_size = 4u << 20;
  uint64_t seed = 0;
  bool seed_set = false;
  double report_s = 1;
  uint64_t churn = 0;
  uint32_t churn_parallel = 64;
  uint64_t churn_ops = 16;
  uint32_t churn_max_size = 64u << 10;
  double stall_s = 30;
  double timeout_s = 0;  // 0: derived from the phases
  double flat_mib = 8;
  double warmup_s = -1;  // -1: warmup_secs() decides
  // Server: keep serving across lost clients (each one an error event it
  // survives, not a failure), drop a connection stalled for --stall, and exit
  // once nothing was open or asked for during this many seconds. 0: off.
  double serve_until_idle_s = 0;
  bool no_bye = false;  // client: leave the server running (no bye request)
};

// Memory growth is judged after the warm-up: 20 % of the main phase, but at
// least 20 s (DPDK's and lwIP's buffer pools are touched progressively at
// first: RSS climbs for some 15 s on the memif path, then stays put) and at
// most half of it.
double warmup_secs(const Options& o) {
  if (o.warmup_s >= 0) return std::min(o.warmup_s, o.duration_s);
  return std::min(std::max(0.2 * o.duration_s, 20.0), 0.5 * o.duration_s);
}

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: srdma_soak --server [-p port] [--stall S] [--timeout S] [--serve-until-idle S]\n"
      "       srdma_soak [options] <server-ip>\n"
      "  -p, --port N            TCP port (default %u)\n"
      "  -d, --duration S        main phase seconds (default 60)\n"
      "  -n, --conns N           main phase connections (default 8)\n"
      "  -q, --depth N           operations in flight per connection, 1..%u (default 8)\n"
      "  -s, --max-size N        largest message, K/M suffixes (default 4M)\n"
      "      --seed N            the mix's seed (default: from the clock; printed)\n"
      "  -r, --report S          seconds between report lines (default 1)\n"
      "      --churn N           then N short connections, opened and closed (default 0)\n"
      "      --churn-parallel N  churn connections open at once (default 64)\n"
      "      --churn-ops N       checked operations per churn connection (default 16)\n"
      "      --churn-max-size N  largest churn message (default 64K)\n"
      "      --stall S           give up after S seconds without progress (default 30)\n"
      "      --timeout S         give up after S seconds in all (default: phases + margin)\n"
      "      --flat-mib M        allowed RSS growth after warm-up, MiB (default 8)\n"
      "      --warmup S          warm-up seconds before growth counts (default: 20 %% of\n"
      "                          --duration, at least 20 s, at most half)\n"
      "      --no-bye            leave the server running at the end (no final account)\n"
      "      --serve-until-idle S  (server) survive lost clients: drop a connection stalled\n"
      "                          for --stall, exit after S s with nothing open, resources\n"
      "                          checked against the idle baseline\n"
      "Engine from the environment (FI_SOFTRDMA_TRANSPORT=dpdk|kernel, _THREADING=c1|c2|c3).\n"
      "Exit: 0 verified and flat, 1 mismatch or memory growth, 2 error, stall or timeout.\n",
      kDefaultPort, kMaxDepth);
}

[[noreturn]] void bad_usage(const char* what, const char* arg) {
  std::fprintf(stderr, "srdma_soak: %s: '%s'\n", what, arg);
  usage(stderr);
  std::exit(kExitError);
}

uint64_t parse_num(const char* arg, const char* what, uint64_t lo, uint64_t hi) {
  uint64_t v;
  if (!parse_u64(arg, &v) || v < lo || v > hi) bad_usage(what, arg);
  return v;
}

double parse_secs(const char* arg, const char* what, double lo) {
  char* end = nullptr;
  const double v = std::strtod(arg, &end);
  if (!end || *end || !(v >= lo) || v > 1e7) bad_usage(what, arg);
  return v;
}

Options parse_args(int argc, char** argv) {
  enum {
    kServer = 256, kSeed, kChurn, kChurnParallel, kChurnOps, kChurnMax, kStall, kTimeout, kFlat,
    kWarmup, kNoBye, kServeUntilIdle
  };
  static const option kLong[] = {
      {"server", no_argument, nullptr, kServer},
      {"port", required_argument, nullptr, 'p'},
      {"duration", required_argument, nullptr, 'd'},
      {"conns", required_argument, nullptr, 'n'},
      {"depth", required_argument, nullptr, 'q'},
      {"max-size", required_argument, nullptr, 's'},
      {"seed", required_argument, nullptr, kSeed},
      {"report", required_argument, nullptr, 'r'},
      {"churn", required_argument, nullptr, kChurn},
      {"churn-parallel", required_argument, nullptr, kChurnParallel},
      {"churn-ops", required_argument, nullptr, kChurnOps},
      {"churn-max-size", required_argument, nullptr, kChurnMax},
      {"stall", required_argument, nullptr, kStall},
      {"timeout", required_argument, nullptr, kTimeout},
      {"flat-mib", required_argument, nullptr, kFlat},
      {"warmup", required_argument, nullptr, kWarmup},
      {"no-bye", no_argument, nullptr, kNoBye},
      {"serve-until-idle", required_argument, nullptr, kServeUntilIdle},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  Options o;
  for (int c; (c = getopt_long(argc, argv, "p:d:n:q:s:r:h", kLong, nullptr)) != -1;) {
    switch (c) {
      case kServer: o.server = true; break;
      case 'p': o.port = static_cast<uint16_t>(parse_num(optarg, "bad port", 1, 65535)); break;
      case 'd': o.duration_s = parse_secs(optarg, "bad duration", 0); break;
      case 'n': o.conns = static_cast<uint32_t>(parse_num(optarg, "bad --conns", 0, 4096)); break;
      case 'q':
        o.depth = static_cast<uint32_t>(parse_num(optarg, "bad --depth", 1, kMaxDepth));
        break;
      case 's': o.max_size = static_cast<uint32_t>(parse_num(optarg, "bad size", 8, kMaxSize)); break;
      case kSeed: o.seed = parse_num(optarg, "bad seed", 0, UINT64_MAX); o.seed_set = true; break;
      case 'r': o.report_s = parse_secs(optarg, "bad report interval", 0.05); break;
      case kChurn: o.churn = parse_num(optarg, "bad --churn", 0, uint64_t{1} << 32); break;
      case kChurnParallel:
        o.churn_parallel = static_cast<uint32_t>(parse_num(optarg, "bad --churn-parallel", 1, 4000));
        break;
      case kChurnOps: o.churn_ops = parse_num(optarg, "bad --churn-ops", 0, uint64_t{1} << 32); break;
      case kChurnMax:
        o.churn_max_size = static_cast<uint32_t>(parse_num(optarg, "bad size", 8, kMaxSize));
        break;
      case kStall: o.stall_s = parse_secs(optarg, "bad --stall", 1); break;
      case kTimeout: o.timeout_s = parse_secs(optarg, "bad --timeout", 1); break;
      case kFlat: o.flat_mib = parse_secs(optarg, "bad --flat-mib", 0); break;
      case kWarmup: o.warmup_s = parse_secs(optarg, "bad --warmup", 0); break;
      case kNoBye: o.no_bye = true; break;
      case kServeUntilIdle:
        o.serve_until_idle_s = parse_secs(optarg, "bad --serve-until-idle", 0.1);
        break;
      case 'h': usage(stdout); std::exit(0);
      default: usage(stderr); std::exit(kExitError);
    }
  }
  if (optind < argc) o.host = argv[optind++];
  if (optind < argc) bad_usage("unexpected argument", argv[optind]);
  if (o.server != o.host.empty()) bad_usage("give either --server or a server address", "");
  if (!o.seed_set) o.seed = mix64(static_cast<uint64_t>(Clock::now().time_since_epoch().count()));
  return o;
}

// --- one engine, shared by all connections of a process --------------------

// The engine, a PD and one CQ for all QPs; completions are routed by QP
// number, CM events by QP (or, for requests, handed over as they are).
class Node {
 public:
  Node() : eng_(EngineConfig::from_env()) {
    if (!eng_.ok()) die(kExitError, "the engine's transport did not start");
    pd_ = eng_.alloc_pd();
    cq_ = eng_.create_cq(kCqDepth);
  }
  Engine& eng() { return eng_; }
  Pd* pd() const { return pd_; }
  Cq* cq() const { return cq_; }

  uint32_t reg(void* p, uint64_t len, uint32_t access) {
    const Mr* mr = eng_.reg_mr(pd_, p, len, access);
    if (!mr) die(kExitError, "registering %" PRIu64 " bytes failed", len);
    return mr->stag;
  }
  Qp* make_qp(uint32_t sq, uint32_t rq, uint16_t rd) {
    Qp* qp = eng_.create_qp({.pd = pd_, .send_cq = cq_, .recv_cq = cq_, .sq_depth = sq,
                             .rq_depth = rq, .ord = rd, .ird = rd});
    if (!qp) die(kExitError, "create_qp failed");
    return qp;
  }

  // One pass: I/O, then CM events and completions handed to the callbacks.
  template <class OnCm, class OnWc>
  void pump(OnCm on_cm, OnWc on_wc) {
    eng_.progress(0);
    CmEvent ev;
    while (eng_.poll_cm(&ev)) on_cm(ev);
    Wc buf[64];
    for (int n; (n = eng_.poll_cq(cq_, buf, 64)) > 0;)
      for (int i = 0; i < n; ++i) on_wc(buf[i]);
  }

  // The engine's counters for a report line (stack/counters.h).
  std::string counters() {
    const Counters c = eng_.counters();
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "fpdu tx %" PRIu64 " rx %" PRIu64 " crc_err %" PRIu64 " term %" PRIu64 "/%" PRIu64
                  " retx %" PRIu64 " drop %" PRIu64 "/%" PRIu64 " | qps %" PRIu64 " mrs %" PRIu64
                  " conns %" PRIu64 " held %" PRIu64 " mbufs %" PRIu64,
                  c.fpdus_tx, c.fpdus_rx, c.crc_errors, c.terminates_tx, c.terminates_rx,
                  c.tcp_retransmits, c.rx_dropped, c.tx_dropped, c.qps, c.mrs, c.connections,
                  c.rx_frames_held, c.mbufs_in_use);
    return buf;
  }

 private:
  Engine eng_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
};

// Counts mismatches; the first few are printed in detail.
class Mismatches {
 public:
  __attribute__((format(printf, 2, 3))) void report(const char* fmt, ...) {
    if (count_++ >= kMaxReports) return;
    std::fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "srdma_soak %s: MISMATCH: ", g_role);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
  }
  // Checks p[0, n) against pattern bytes [start, start+n) of seed.
  bool check(const char* what, uint32_t conn, uint64_t k, const uint8_t* p, uint64_t n,
             uint64_t seed, uint64_t start = 0) {
    const uint64_t off = pattern_mismatch(p, n, seed, start);
    if (off == n) return true;
    report("conn %u op %" PRIu64 " %s of %" PRIu64 " bytes: byte %" PRIu64
           " is 0x%02x, expected 0x%02x",
           conn, k, what, n, off, p[off], pattern_byte(seed, start + off));
    return false;
  }
  uint64_t count() const { return count_; }

 private:
  uint64_t count_ = 0;
};

// RSS samples of a phase: the value at the end of warm-up and the largest
// after it, so growth = peak after warm-up - value at warm-up.
struct MemWatch {
  uint64_t at_warm_kb = 0;
  uint64_t peak_after_kb = 0;
  bool warm = false;

  void sample(uint64_t kb, bool after_warmup) {
    if (!after_warmup || kb == 0) return;
    if (!warm) {
      warm = true;
      at_warm_kb = kb;
    }
    peak_after_kb = std::max(peak_after_kb, kb);
  }
  double growth_mib() const { return warm ? mib(peak_after_kb - at_warm_kb) : 0; }
};

// ============================================================================
// client
// ============================================================================

struct Totals {
  uint64_t ops = 0;             // operations completed and checked
  uint64_t client_bytes = 0;    // checked here (Reads, atomic results)
  uint64_t server_bytes = 0;    // checked by the server, of closed connections
  uint64_t server_mismatches = 0;
  uint64_t ooo = 0;             // completions out of posting order
  uint64_t slow_closes = 0;     // disconnects that had not finished after 5 s
};

class ClientConn {
 public:
  enum class State : uint8_t { kConnecting, kRunning, kDraining, kEnding, kClosing, kClosed };

  ClientConn(Node& node, const Options& o, uint32_t id, uint32_t max_size, uint64_t op_limit,
             Mismatches* mism, Totals* totals)
      : node_(node), id_(id), depth_(o.depth), max_size_(max_size), op_limit_(op_limit),
        gen_(o.seed, id, max_size), model_(gen_.atomic_init()), mism_(mism), totals_(totals),
        slots_(o.depth) {
    stride_ = (uint64_t{max_size} + kOffsetSlack + 63) & ~uint64_t{63};
    local_ = alloc_touched(stride_ * depth_);
    if (!local_) die(kExitError, "out of memory for connection %u", id);
    ctrl_ = std::make_unique<ClientCtrl>();
    constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    local_stag_ = node_.reg(local_.get(), stride_ * depth_, kAll);
    ctrl_stag_ = node_.reg(ctrl_.get(), sizeof(ClientCtrl), kAll);
    // Room for the window, a notify after each op, and the end word.
    qp_ = node_.make_qp(2 * depth_ + 8, 1, static_cast<uint16_t>(depth_));
  }
  ~ClientConn() { release(); }
  ClientConn(const ClientConn&) = delete;
  ClientConn& operator=(const ClientConn&) = delete;

  Qp* qp() const { return qp_; }
  uint32_t id() const { return id_; }
  State state() const { return state_; }
  bool closed() const { return state_ == State::kClosed; }
  uint64_t issued() const { return next_; }
  // Bytes the server has checked so far on this connection (live figure).
  uint64_t server_bytes() const { return load(ctrl_->credit.bytes_checked); }
  uint64_t server_rss_kb() const { return load(ctrl_->credit.rss_kb); }

  void connect(const sockaddr_in& peer, uint64_t seed) {
    Hello h;
    h.kind = static_cast<uint8_t>(HelloKind::kData);
    h.conn = id_;
    h.seed = seed;
    h.max_size = max_size_;
    h.depth = depth_;
    h.ctrl = {.addr = addr_of(ctrl_.get()), .len = sizeof(ClientCtrl), .rkey = ctrl_stag_};
    if (int rc = node_.eng().connect(qp_, peer, &h, sizeof(h)); rc < 0)
      die(kExitError, "connect: %s", std::strerror(-rc));
  }

  // CM events of this QP. Returns false for a connection lost under us.
  bool on_cm(const CmEvent& ev) {
    switch (ev.type) {
      case CmEventType::kEstablished: {
        Welcome w;
        if (!decode(ev.private_data, &w)) die(kExitError, "the peer is not an srdma_soak server");
        if (w.data.len < Layout(max_size_, depth_).bytes() || w.ctrl.len < sizeof(ServerCtrl))
          die(kExitError, "the server's regions are too small");
        peer_data_ = w.data;
        peer_ctrl_ = w.ctrl;
        state_ = State::kRunning;
        if (op_limit_ == 0) state_ = State::kDraining;
        return true;
      }
      case CmEventType::kDisconnected:
        if (state_ == State::kClosing) {
          state_ = State::kClosed;
          return true;
        }
        std::fprintf(stderr, "srdma_soak client: connection %u lost after %" PRIu64
                     " ops (state %d): %s\n", id_, next_, int(state_),
                     describe_status(ev.status, ev.term).c_str());
        state_ = State::kClosed;
        return false;
      default:
        std::fprintf(stderr, "srdma_soak client: connection %u: %s (%s)\n", id_,
                     to_string(ev.type), describe_status(ev.status, 0).c_str());
        state_ = State::kClosed;
        return false;
    }
  }

  // A completion of this QP. Returns false on a failed one.
  bool on_wc(const Wc& wc) {
    if (wc.status != WcStatus::kSuccess) {
      if (state_ == State::kClosing || state_ == State::kClosed) return true;  // teardown flush
      std::fprintf(stderr, "srdma_soak client: connection %u: %s completion (wr %" PRIu64
                   ") failed: %s (vendor_err 0x%x)\n", id_, to_string(wc.opcode), wc.wr_id,
                   to_string(wc.status), wc.vendor_err);
      return false;
    }
    Slot& s = slots_[wc.wr_id % depth_];
    if (!s.busy || s.k != wc.wr_id) {
      mism_->report("conn %u: completion for op %" PRIu64 " that is not in flight", id_, wc.wr_id);
      return true;
    }
    if (wc.wr_id != oldest_ && totals_->ooo++ < 3) {
      std::fprintf(stderr, "srdma_soak client: note: conn %u op %" PRIu64 " (%s) completed "
                   "before op %" PRIu64 " (%s)\n", id_, wc.wr_id, op_name(s.spec.op), oldest_,
                   op_name(slots_[oldest_ % depth_].spec.op));
    }
    check_completion(s, wc);
    s.busy = false;
    --in_flight_;
    while (oldest_ < next_ && !slots_[oldest_ % depth_].busy) ++oldest_;
    ++totals_->ops;
    return true;
  }

  // Issues what the window and credits allow, or moves the close along.
  void step(bool stop) {
    if (stop && state_ == State::kRunning) state_ = State::kDraining;
    if (!flush_notify()) return;
    switch (state_) {
      case State::kRunning:
        while (next_ < op_limit_ && issue_next()) {}
        if (next_ >= op_limit_) state_ = State::kDraining;
        return;
      case State::kDraining:
        if (in_flight_ == 0) post_end();
        return;
      case State::kEnding:
        if (load(ctrl_->done) == ctrl_->end_src) finish();
        return;
      case State::kClosing:
        // The closing side gets no kDisconnected: its stream is gone once
        // the QP lets go of it (as srdma_perf's close_active waits).
        if (!qp_->conn()) {
          state_ = State::kClosed;
        } else if (Clock::now() > close_deadline_) {
          std::fprintf(stderr, "srdma_soak client: connection %u: close took over 5 s\n", id_);
          ++totals_->slow_closes;
          state_ = State::kClosed;
        }
        return;
      default:
        return;
    }
  }

  std::string describe() const {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "conn %u state %d issued %" PRIu64 " in flight %u recv %" PRIu64 "/%" PRIu64
                  " wslots %" PRIu64 "/%" PRIu64 " done %" PRIu64,
                  id_, int(state_), next_, in_flight_, recv_issued_,
                  load(ctrl_->credit.recv_posted), wslot_issued_,
                  load(ctrl_->credit.writes_checked) + depth_, load(ctrl_->done));
    return buf;
  }

 private:
  struct Slot {
    bool busy = false;
    uint64_t k = 0;
    OpSpec spec;
    uint64_t expect = 0;  // atomics: the original value the model says
  };

  uint8_t* local(uint64_t k) { return local_.get() + (k % depth_) * stride_; }

  SendWr wr_for(uint64_t k, WrOpcode op, uint8_t* p, uint32_t len, uint64_t raddr,
                uint32_t rkey, uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = k, .opcode = op, .flags = flags, .num_sge = 1, .remote_addr = raddr,
              .rkey = rkey};
    wr.sg_list[0] = Sge{addr_of(p), len, local_stag_};
    return wr;
  }

  // Posts op next_ if its slot is free and the server has room for it.
  bool issue_next() {
    const uint64_t k = next_;
    Slot& s = slots_[k % depth_];
    if (s.busy) return false;
    const OpSpec spec = gen_.at(k);
    const Layout lay(max_size_, depth_);
    if (uses_recv(spec.op) && recv_issued_ >= load(ctrl_->credit.recv_posted)) return false;
    if (uses_wslot(spec.op) && wslot_issued_ >= load(ctrl_->credit.writes_checked) + depth_)
      return false;
    uint8_t* const buf = local(k) + spec.local_off;
    const uint64_t wslot = peer_data_.addr + lay.wslot(wslot_issued_) + spec.remote_off;
    SendWr wr;
    uint64_t model_next = model_;
    switch (spec.op) {
      case Op::kSend:
        fill_pattern(buf, spec.size, spec.seed);
        wr = wr_for(k, WrOpcode::kSend, buf, spec.size, 0, 0);
        break;
      case Op::kWrite:
      case Op::kWriteImm:
        fill_pattern(buf, spec.size, spec.seed);
        wr = wr_for(k, spec.op == Op::kWrite ? WrOpcode::kWrite : WrOpcode::kWriteWithImm, buf,
                    spec.size, wslot, peer_data_.rkey);
        wr.imm_data = spec.imm;
        break;
      case Op::kRead:
        std::memset(buf, static_cast<int>(mix64(k) | 1), spec.size);  // stale bytes must not pass
        wr = wr_for(k, WrOpcode::kRead, buf, spec.size,
                    peer_data_.addr + lay.read_src() + spec.remote_off, peer_data_.rkey);
        break;
      case Op::kFetchAdd:
      case Op::kCmpSwap: {
        uint64_t compare = 0;
        s.expect = apply_atomic(spec, &model_next, &compare);
        const uint64_t poison = ~s.expect;
        std::memcpy(buf, &poison, 8);
        wr = wr_for(k, spec.op == Op::kFetchAdd ? WrOpcode::kAtomicFetchAdd
                                                : WrOpcode::kAtomicCmpSwap,
                    buf, 8, peer_data_.addr + lay.atomic(), peer_data_.rkey);
        wr.compare_add = spec.op == Op::kFetchAdd ? spec.operand : compare;
        wr.swap = spec.swap;
        break;
      }
    }
    const int rc = node_.eng().post_send(qp_, wr);
    if (rc == -EAGAIN) return false;  // the send queue is full: later
    if (rc < 0) die(kExitError, "post_send(%s): %s", op_name(spec.op), std::strerror(-rc));
    model_ = model_next;  // the responder applies atomics in the order posted
    s = Slot{.busy = true, .k = k, .spec = spec, .expect = s.expect};
    ++in_flight_;
    ++next_;
    if (uses_recv(spec.op)) ++recv_issued_;
    if (uses_wslot(spec.op)) ++wslot_issued_;
    if (spec.op == Op::kWrite) notify_due_ = next_;  // the server checks it once told
    flush_notify();
    return true;
  }

  // Posts the pending notify (ops issued so far); false while it cannot.
  bool flush_notify() {
    if (notify_due_ <= notified_) return true;
    uint64_t& src = ctrl_->notify_src[notifies_ % kNotifyRing];
    src = notify_due_;
    const SendWr wr = ctrl_write(&src, offsetof(ServerCtrl, notify));
    const int rc = node_.eng().post_send(qp_, wr);
    if (rc == -EAGAIN) return false;
    if (rc < 0) die(kExitError, "post_send(notify): %s", std::strerror(-rc));
    ++notifies_;
    notified_ = notify_due_;
    return true;
  }

  SendWr ctrl_write(uint64_t* src, size_t peer_off) const {
    SendWr wr{.opcode = WrOpcode::kWrite, .flags = 0, .num_sge = 1,
              .remote_addr = peer_ctrl_.addr + peer_off, .rkey = peer_ctrl_.rkey};
    wr.sg_list[0] = Sge{addr_of(src), 8, ctrl_stag_};
    return wr;
  }

  // All operations completed: tell the server how many there were.
  void post_end() {
    ctrl_->end_src = next_ + 1;
    const int rc = node_.eng().post_send(qp_, ctrl_write(&ctrl_->end_src, offsetof(ServerCtrl, end)));
    if (rc == -EAGAIN) return;
    if (rc < 0) die(kExitError, "post_send(end): %s", std::strerror(-rc));
    state_ = State::kEnding;
  }

  // The server's final account has landed: take it and close.
  void finish() {
    totals_->server_bytes += load(ctrl_->credit.bytes_checked);
    totals_->server_mismatches += load(ctrl_->credit.mismatches);
    state_ = State::kClosing;
    close_deadline_ = Clock::now() + std::chrono::seconds(5);
    if (int rc = node_.eng().disconnect(qp_); rc < 0) state_ = State::kClosed;
  }

  void check_completion(const Slot& s, const Wc& wc) {
    const OpSpec& spec = s.spec;
    static constexpr WcOpcode kWant[] = {WcOpcode::kSend, WcOpcode::kWrite, WcOpcode::kRead,
                                         WcOpcode::kWrite, WcOpcode::kFetchAdd,
                                         WcOpcode::kCmpSwap};
    if (wc.opcode != kWant[static_cast<size_t>(spec.op)]) {
      mism_->report("conn %u op %" PRIu64 " %s completed as %s", id_, s.k, op_name(spec.op),
                    to_string(wc.opcode));
    }
    const uint8_t* buf = local(s.k) + spec.local_off;
    if (spec.op == Op::kRead) {
      if (wc.byte_len != spec.size)
        mism_->report("conn %u op %" PRIu64 " read completed %u bytes of %u", id_, s.k,
                      wc.byte_len, spec.size);
      mism_->check("read", id_, s.k, buf, spec.size, gen_.read_seed(), spec.remote_off);
      totals_->client_bytes += spec.size;
    } else if (is_atomic(spec.op)) {
      uint64_t got;
      std::memcpy(&got, buf, 8);
      if (got != s.expect)
        mism_->report("conn %u op %" PRIu64 " %s returned 0x%016" PRIx64 ", model 0x%016" PRIx64,
                      id_, s.k, op_name(spec.op), got, s.expect);
      totals_->client_bytes += 8;
    }
  }

  void release() {
    if (qp_) node_.eng().destroy_qp(qp_);
    qp_ = nullptr;
    if (local_stag_) node_.eng().dereg_mr(local_stag_);
    if (ctrl_stag_) node_.eng().dereg_mr(ctrl_stag_);
    local_stag_ = ctrl_stag_ = 0;
  }

  Node& node_;
  const uint32_t id_;
  const uint32_t depth_;
  const uint32_t max_size_;
  const uint64_t op_limit_;
  const OpGen gen_;
  uint64_t model_;  // the server's atomic word once all posted atomics ran
  Mismatches* mism_;
  Totals* totals_;
  std::vector<Slot> slots_;
  uint64_t stride_ = 0;
  Buffer local_;
  std::unique_ptr<ClientCtrl> ctrl_;
  uint32_t local_stag_ = 0, ctrl_stag_ = 0;
  Qp* qp_ = nullptr;
  Region peer_data_, peer_ctrl_;
  State state_ = State::kConnecting;
  uint64_t next_ = 0, oldest_ = 0;
  uint32_t in_flight_ = 0;
  uint64_t recv_issued_ = 0, wslot_issued_ = 0;
  uint64_t notify_due_ = 0, notified_ = 0, notifies_ = 0;
  Clock::time_point close_deadline_{};
};

// The figures of one phase, for the summary.
struct PhaseResult {
  double secs = 0;
  uint64_t ops = 0;
  MemWatch client_mem, server_mem;
};

class Client {
 public:
  explicit Client(const Options& o) : o_(o) {
    std::string err;
    if (!resolve_ipv4(o.host, o.port, &peer_, &err))
      die(kExitError, "cannot resolve %s: %s", o.host.c_str(), err.c_str());
    const double churn_s = 10 + 0.05 * double(o.churn);
    const double limit = o.timeout_s > 0 ? o.timeout_s : o.duration_s * 1.2 + churn_s + 120;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(limit));
  }

  int run() {
    std::printf("# srdma_soak: seed %" PRIu64 " | transport %s | threading %s | %u conns x %u in "
                "flight, 0..%u B | %.0f s | churn %" PRIu64 " x %" PRIu64 " ops (%u at a time)\n",
                o_.seed, node_.eng().transport_name(), threading_name(), o_.conns, o_.depth,
                o_.max_size, o_.duration_s, o_.churn, o_.churn_ops, o_.churn_parallel);
    std::printf("# mix %%: send %u write %u read %u write_imm %u fadd %u cas %u\n", kOpWeights[0],
                kOpWeights[1], kOpWeights[2], kOpWeights[3], kOpWeights[4], kOpWeights[5]);
    std::fflush(stdout);
    t0_ = Clock::now();
    run_main();
    if (o_.churn > 0) run_churn();
    if (!o_.no_bye) farewell_ = say_bye();
    return summarize();
  }

 private:
  static const char* threading_name() {
    const char* t = std::getenv("FI_SOFTRDMA_THREADING");
    return t && *t ? t : "c2";
  }

  void run_main() {
    if (o_.conns == 0) return;
    phase_ = "main";
    // Opened in waves: lwIP's listen backlog holds at most 255 handshakes
    // (SYN received, not yet taken by the engine); SYNs beyond it are
    // dropped and retried a second later, as a kernel's full SYN queue does.
    auto connecting = [&] {
      return static_cast<uint32_t>(std::count_if(conns_.begin(), conns_.end(), [](const auto& c) {
        return c->state() == ClientConn::State::kConnecting;
      }));
    };
    for (uint32_t opened = 0; opened < o_.conns || connecting() > 0; pass(false)) {
      for (uint32_t n = connecting(); opened < o_.conns && n < kConnectWave; ++n)
        open(opened++, o_.max_size, UINT64_MAX);
      report_due();
    }
    // Warm-up counts from when every connection carries traffic.
    const Clock::time_point start = Clock::now();
    const uint64_t ops0 = totals_.ops;
    const auto run_for = std::chrono::duration<double>(o_.duration_s);
    while (!conns_.empty()) {
      const double t = seconds_since(start);
      const bool stop = t >= run_for.count();
      pass(stop);
      if (!stop && report_due()) {
        const bool warm = t >= warmup_secs(o_);
        main_.client_mem.sample(read_mem().rss_kb, warm);
        main_.server_mem.sample(server_rss_kb(), warm);
      }
      reap();
    }
    main_.secs = seconds_since(start);
    main_.ops = totals_.ops - ops0;
  }

  static constexpr uint32_t kConnectWave = 128;  // connects outstanding at once

  void run_churn() {
    phase_ = "churn";
    churn_before_ = Resources::now(node_.eng());
    const Clock::time_point start = Clock::now();
    uint64_t opened = 0;
    while (opened < o_.churn || !conns_.empty()) {
      while (opened < o_.churn && conns_.size() < o_.churn_parallel)
        open(static_cast<uint32_t>(o_.conns + opened++), o_.churn_max_size, o_.churn_ops);
      pass(false);
      reap();
      report_due();
    }
    churn_secs_ = seconds_since(start);
    churn_done_ = opened;
    // What churn must give back: descriptors, memory, engine objects,
    // frames. Closing streams drain over a few more polls: up to 2 s of them.
    for (int i = 0; i < 200; ++i) {
      churn_after_ = Resources::now(node_.eng());
      if (churn_after_.back_to(churn_before_, flat_kb())) break;
      pass(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  uint64_t flat_kb() const { return static_cast<uint64_t>(o_.flat_mib * 1024); }

  void open(uint32_t id, uint32_t max_size, uint64_t limit) {
    auto c = std::make_unique<ClientConn>(node_, o_, id, max_size, limit, &mism_, &totals_);
    c->connect(peer_, o_.seed);
    by_qp_[c->qp()] = c.get();
    by_num_[c->qp()->num()] = c.get();
    conns_.push_back(std::move(c));
    last_progress_ = Clock::now();
  }

  // Drops closed connections (their QPs, MRs and buffers).
  void reap() {
    for (size_t i = 0; i < conns_.size();) {
      if (!conns_[i]->closed()) {
        ++i;
        continue;
      }
      by_qp_.erase(conns_[i]->qp());
      by_num_.erase(conns_[i]->qp()->num());
      conns_[i] = std::move(conns_.back());
      conns_.pop_back();
    }
  }

  // One round: engine I/O, events, completions, then every connection's step.
  void pass(bool stop) {
    const uint64_t ops0 = totals_.ops;
    node_.pump([&](const CmEvent& ev) { on_cm(ev); }, [&](const Wc& wc) { on_wc(wc); });
    for (auto& c : conns_) c->step(stop);
    if (totals_.ops != ops0) last_progress_ = Clock::now();
    check_alive();
  }

  void on_cm(const CmEvent& ev) {
    last_progress_ = Clock::now();
    auto it = by_qp_.find(ev.qp);
    if (it == by_qp_.end()) return;  // a QP already destroyed
    if (ev.type == CmEventType::kUnreachable && ev.status == -ECONNREFUSED &&
        it->second->state() == ClientConn::State::kConnecting) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // not listening yet
      it->second->connect(peer_, o_.seed);
      return;
    }
    if (!it->second->on_cm(ev)) fail(kExitError, "a connection was lost");
  }

  void on_wc(const Wc& wc) {
    auto it = by_num_.find(wc.qp_num);
    if (it == by_num_.end()) return;  // flushed work of a QP already destroyed
    if (!it->second->on_wc(wc)) fail(kExitError, "an operation failed");
  }

  // Stall and deadline: a dead or wedged peer must not hang us.
  void check_alive() {
    const Clock::time_point now = Clock::now();
    if (now > deadline_) fail(kExitError, "timeout");
    if (conns_.empty() || now - last_progress_ < std::chrono::duration<double>(o_.stall_s))
      return;
    for (const auto& c : conns_) std::fprintf(stderr, "  %s\n", c->describe().c_str());
    fail(kExitError, "stalled: no progress for the --stall time (peer dead or engine wedged)");
  }

  uint64_t server_rss_kb() const {
    uint64_t kb = 0;
    for (const auto& c : conns_) kb = std::max(kb, c->server_rss_kb());
    return kb;
  }

  // Prints a report line when one is due; true if it did.
  bool report_due() {
    const Clock::time_point now = Clock::now();
    if (now < next_report_) return false;
    next_report_ = now + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(o_.report_s));
    const double t = seconds_since(t0_);
    uint64_t server_live = 0;
    for (const auto& c : conns_) server_live += c->server_bytes();
    const uint64_t verified = totals_.client_bytes + totals_.server_bytes + server_live;
    const double rate = t > last_report_t_ ? double(totals_.ops - last_report_ops_) /
                                                 (t - last_report_t_) : 0;
    last_report_t_ = t;
    last_report_ops_ = totals_.ops;
    std::printf("[%7.1f s] %-5s conns %4zu ops %11" PRIu64 " (%8.0f/s) verified %9.3f GiB "
                "errors %" PRIu64 " | rss %.1f MiB server %.1f MiB | %s\n",
                t, phase_, conns_.size(), totals_.ops, rate, gib(verified), errors(),
                mib(read_mem().rss_kb), mib(server_rss_kb()), node_.counters().c_str());
    std::fflush(stdout);
    return true;
  }

  uint64_t errors() const {
    return mism_.count() + totals_.server_mismatches + farewell_.mismatches;
  }

  // The bye request: the server answers with its account and exits.
  Farewell say_bye() {
    Farewell f;
    Qp* qp = node_.make_qp(4, 1, 1);
    Hello h;
    h.kind = static_cast<uint8_t>(HelloKind::kBye);
    if (int rc = node_.eng().connect(qp, peer_, &h, sizeof(h)); rc < 0)
      die(kExitError, "connect (bye): %s", std::strerror(-rc));
    const Clock::time_point until = std::min(deadline_, Clock::now() + std::chrono::seconds(10));
    bool answered = false;
    while (!answered && Clock::now() < until) {
      node_.pump([&](const CmEvent& ev) {
        if (ev.qp != qp) return;
        answered = true;
        if (ev.type != CmEventType::kRejected || !decode(ev.private_data, &f))
          std::fprintf(stderr, "srdma_soak client: the bye got %s, not the server's account\n",
                       to_string(ev.type));
      }, [](const Wc&) {});
    }
    node_.eng().destroy_qp(qp);
    if (!answered) std::fprintf(stderr, "srdma_soak client: the server did not answer the bye\n");
    bye_ok_ = answered && f.magic == kMagic;
    return f;
  }

  [[noreturn]] void fail(int code, const char* why) {
    std::fprintf(stderr, "srdma_soak client: %s\n", why);
    failure_ = why;
    std::exit(std::max(code, summarize()));
  }

  // The summary line(s); returns the exit code.
  int summarize() {
    const uint64_t final_kb = live_rss_kb();
    const MemFigures m = read_mem();
    const uint64_t verified = totals_.client_bytes + totals_.server_bytes;
    const double flat = o_.flat_mib;
    const bool client_flat = !kRssJudged || main_.client_mem.growth_mib() <= flat;
    const bool server_flat = !kRssJudged || main_.server_mem.growth_mib() <= flat;
    const bool churn_ok = churn_after_.back_to(churn_before_, flat_kb());
    int code = 0;
    if (errors() > 0 || !client_flat || !server_flat || (churn_done_ && !churn_ok))
      code = kExitMismatch;
    const bool bye_bad = !o_.no_bye && (!bye_ok_ || farewell_.lost > 0 || farewell_.open_conns > 0);
    if (failure_ || bye_bad) code = kExitError;
    if (main_.secs == 0) {
      std::printf("# main: did not finish\n");
    } else {
      std::printf("# main: %.1f s, %u conns, %" PRIu64 " ops (%.0f/s); client rss at warm-up "
                  "%.1f MiB, growth after %.2f MiB; server %.1f MiB, growth %.2f MiB (bound %.1f)\n",
                  main_.secs, o_.conns, main_.ops, double(main_.ops) / main_.secs,
                  mib(main_.client_mem.at_warm_kb), main_.client_mem.growth_mib(),
                  mib(main_.server_mem.at_warm_kb), main_.server_mem.growth_mib(), flat);
    }
    if (churn_done_) {
      std::printf("# churn: %" PRIu64 " connections in %.1f s: %s\n#   before: %s\n#   after:  "
                  "%s\n", churn_done_, churn_secs_, churn_ok ? "all back" : "NOT ALL BACK",
                  churn_before_.describe().c_str(), churn_after_.describe().c_str());
    }
    if (o_.no_bye)
      std::printf("# server: left running (--no-bye)\n");
    else
      std::printf("# server: %" PRIu64 " conns served, %" PRIu64 " ops, %" PRIu64 " mismatches, %"
                  PRIu64 " lost, %" PRIu64 " open at bye, peak rss %.1f MiB, final %.1f MiB%s\n",
                  farewell_.conns, farewell_.ops, farewell_.mismatches, farewell_.lost,
                  farewell_.open_conns, mib(farewell_.peak_rss_kb), mib(farewell_.final_rss_kb),
                  bye_ok_ ? "" : " (no answer)");
    std::printf("SUMMARY duration %.1f s ops %" PRIu64 " bytes_verified %" PRIu64 " (%.2f GiB) "
                "errors %" PRIu64 " out_of_order %" PRIu64 " slow_closes %" PRIu64 " client_rss peak %.1f final %.1f "
                "growth %.2f MiB server_rss peak %.1f final %.1f growth %.2f MiB flat %s "
                "(bound %.1f MiB after %.0f s) churn %" PRIu64 " %s exit %d%s%s\n",
                seconds_since(t0_), totals_.ops, verified, gib(verified), errors(), totals_.ooo, totals_.slow_closes,
                mib(m.hwm_kb), mib(final_kb), main_.client_mem.growth_mib(),
                mib(farewell_.peak_rss_kb), mib(farewell_.final_rss_kb),
                main_.server_mem.growth_mib(),
                !kRssJudged ? "n/a(asan)" : client_flat && server_flat ? "yes" : "NO", flat,
                warmup_secs(o_), churn_done_, churn_done_ ? (churn_ok ? "ok" : "LEAK") : "-",
                code, failure_ ? ": " : "", failure_ ? failure_ : "");
    std::fflush(stdout);
    return code;
  }

  const Options& o_;
  Node node_;
  sockaddr_in peer_{};
  Clock::time_point deadline_, t0_;
  Clock::time_point last_progress_ = Clock::now();
  Clock::time_point next_report_{};
  double last_report_t_ = 0;
  uint64_t last_report_ops_ = 0;
  const char* phase_ = "-";
  std::vector<std::unique_ptr<ClientConn>> conns_;
  std::unordered_map<Qp*, ClientConn*> by_qp_;
  std::unordered_map<uint32_t, ClientConn*> by_num_;
  Mismatches mism_;
  Totals totals_;
  PhaseResult main_;
  double churn_secs_ = 0;
  uint64_t churn_done_ = 0;
  Resources churn_before_, churn_after_;
  Farewell farewell_;
  bool bye_ok_ = false;
  const char* failure_ = nullptr;
};

// ============================================================================
// server
// ============================================================================

// One client connection: its memory, the client's op sequence replayed, and
// the checks in order.
class ServerConn {
 public:
  ServerConn(Node& node, const Hello& h, Mismatches* mism)
      : node_(node), h_(h), lay_(h.max_size, h.depth), gen_(h.seed, h.conn, h.max_size),
        mism_(mism) {
    data_ = alloc_touched(lay_.bytes());
    if (!data_) die(kExitError, "out of memory for connection %u", h.conn);
    ctrl_ = std::make_unique<ServerCtrl>();
    constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead |
                              kAccessRemoteAtomic;
    data_stag_ = node_.reg(data_.get(), lay_.bytes(), kAll);
    ctrl_stag_ = node_.reg(ctrl_.get(), sizeof(ServerCtrl), kAll);
    fill_pattern(data_.get() + lay_.read_src(), lay_.read_len(), gen_.read_seed());
    const uint64_t init = gen_.atomic_init();
    std::memcpy(data_.get() + lay_.atomic(), &init, 8);
    qp_ = node_.make_qp(32, h.depth + 1, static_cast<uint16_t>(h.depth));
    for (uint32_t i = 0; i < h.depth; ++i) post_recv();
  }
  ~ServerConn() {
    node_.eng().destroy_qp(qp_);
    node_.eng().dereg_mr(data_stag_);
    node_.eng().dereg_mr(ctrl_stag_);
  }
  ServerConn(const ServerConn&) = delete;
  ServerConn& operator=(const ServerConn&) = delete;

  Qp* qp() const { return qp_; }
  bool finished() const { return done_posted_; }
  const Credit& credit() const { return live_; }
  Welcome welcome() const {
    Welcome w;
    w.data = {.addr = addr_of(data_.get()), .len = lay_.bytes(), .rkey = data_stag_};
    w.ctrl = {.addr = addr_of(ctrl_.get()), .len = sizeof(ServerCtrl), .rkey = ctrl_stag_};
    return w;
  }
  void set_established() {
    established_ = true;
    last_moved_ = Clock::now();
  }
  // When this connection last showed a sign of its client (for --serve-until-idle).
  Clock::time_point last_moved() const { return last_moved_; }

  // Receive completions queue up until the cursor reaches their operation.
  bool on_wc(const Wc& wc) {
    if (wc.status != WcStatus::kSuccess) {
      // Once our account is out the client closes, which flushes the
      // receives still posted; their completions may be polled before the
      // kDisconnected event (the c2 watchdog runs progress in between).
      if (done_posted_ && wc.status == WcStatus::kWrFlushErr) return true;
      std::fprintf(stderr, "srdma_soak server: connection %u: %s completion failed: %s "
                   "(vendor_err 0x%x)\n", h_.conn, to_string(wc.opcode), to_string(wc.status),
                   wc.vendor_err);
      return false;
    }
    if (wc.opcode == WcOpcode::kRecv || wc.opcode == WcOpcode::kRecvRdmaImm) recvs_.push_back(wc);
    last_moved_ = Clock::now();
    return true;
  }

  // Checks what has arrived, returns credit, finishes once the client ends.
  // Returns true if anything moved.
  bool step(uint64_t rss_kb) {
    if (!established_ || done_posted_) return false;
    const uint64_t before = cursor_;
    advance();
    live_.rss_kb = rss_kb;
    const uint64_t end = load(ctrl_->end);
    if (end && cursor_ + 1 >= end) finish(end);
    if (!final_posted_) send_credit();
    if (cursor_ == before) return false;
    last_moved_ = Clock::now();
    return true;
  }

  std::string describe() const {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "conn %u at op %" PRIu64 " (%s) notify %" PRIu64 " end %"
                  PRIu64 " queued receives %zu", h_.conn, cursor_,
                  op_name(gen_.at(cursor_).op), load(ctrl_->notify), load(ctrl_->end),
                  recvs_.size());
    return buf;
  }

 private:
  void post_recv() {
    RecvWr wr{.wr_id = posted_, .num_sge = 1};
    wr.sg_list[0] = Sge{addr_of(data_.get() + lay_.recv(posted_)),
                        static_cast<uint32_t>(lay_.stride), data_stag_};
    if (int rc = node_.eng().post_recv(qp_, wr); rc < 0)
      die(kExitError, "post_recv: %s", std::strerror(-rc));
    ++posted_;
    live_.recv_posted = posted_;
  }

  // Walks the client's sequence as far as the evidence goes. Reads and
  // atomics need nothing here (the client checks them), so the cursor may
  // run ahead of the client over them; it waits at the next Send or Write.
  void advance() {
    const uint64_t end = load(ctrl_->end);
    const uint64_t issued = std::max(load(ctrl_->notify), end ? end - 1 : 0);
    while (!end || cursor_ + 1 < end) {
      const OpSpec s = gen_.at(cursor_);
      switch (s.op) {
        case Op::kRead:
        case Op::kFetchAdd:
        case Op::kCmpSwap:
          break;
        case Op::kSend:
        case Op::kWriteImm:
          if (recvs_.empty()) return;
          check_recv(s, recvs_.front());
          recvs_.pop_front();
          break;
        case Op::kWrite:
          if (issued <= cursor_) return;
          check_write(s);
          break;
      }
      ++cursor_;
    }
  }

  void check_recv(const OpSpec& s, const Wc& wc) {
    const uint64_t k = cursor_;
    const uint8_t* rx = data_.get() + lay_.recv(recv_done_);
    if (s.op == Op::kSend) {
      if (wc.opcode != WcOpcode::kRecv || wc.byte_len != s.size)
        mism_->report("conn %u op %" PRIu64 " send of %u bytes arrived as %s of %u bytes",
                      h_.conn, k, s.size, to_string(wc.opcode), wc.byte_len);
      else
        mism_->check("send", h_.conn, k, rx, s.size, s.seed);
    } else {
      if (wc.opcode != WcOpcode::kRecvRdmaImm || wc.imm_data != s.imm)
        mism_->report("conn %u op %" PRIu64 " write_imm arrived as %s, immediate 0x%" PRIx64
                      " (expected 0x%" PRIx64 ")", h_.conn, k, to_string(wc.opcode), wc.imm_data,
                      s.imm);
      check_write(s);
    }
    ++recv_done_;
    post_recv();  // the slot just checked is the one reposted
    if (s.op == Op::kSend) count(s.size);
  }

  void check_write(const OpSpec& s) {
    const uint8_t* p = data_.get() + lay_.wslot(writes_done_) + s.remote_off;
    mism_->check(op_name(s.op), h_.conn, cursor_, p, s.size, s.seed);
    ++writes_done_;
    live_.writes_checked = writes_done_;
    count(s.size);
  }

  void count(uint64_t bytes) {
    ++live_.ops_checked;
    live_.bytes_checked += bytes;
    live_.mismatches = mism_->count() - mism0_;
  }

  // The client has completed end - 1 operations: last checks, final account.
  void finish(uint64_t end) {
    if (!final_checked_) {
      final_checked_ = true;
      if (!recvs_.empty())
        mism_->report("conn %u: %zu receives beyond the client's last operation", h_.conn,
                      recvs_.size());
      check_atomic_word(end - 1);
      live_.mismatches = mism_->count() - mism0_;
    }
    if (!final_posted_ && post_credit()) final_posted_ = true;
    if (final_posted_ && !done_posted_) {
      ctrl_->done_src = end;
      if (post_write(&ctrl_->done_src, 8, offsetof(ClientCtrl, done))) done_posted_ = true;
    }
  }

  // Replays the atomics of ops [0, n) and compares the word.
  void check_atomic_word(uint64_t n) {
    uint64_t v = gen_.atomic_init(), compare = 0;
    for (uint64_t k = 0; k < n; ++k) {
      const OpSpec s = gen_.at(k);
      if (is_atomic(s.op)) apply_atomic(s, &v, &compare);
    }
    uint64_t word;
    std::memcpy(&word, data_.get() + lay_.atomic(), 8);
    if (word != v)
      mism_->report("conn %u: atomic word 0x%016" PRIx64 " after %" PRIu64
                    " ops, model 0x%016" PRIx64, h_.conn, word, n, v);
  }

  // Credits move often: send them when they changed and the queue has room.
  void send_credit() {
    if (live_.recv_posted == sent_.recv_posted && live_.writes_checked == sent_.writes_checked &&
        live_.rss_kb == sent_.rss_kb && Clock::now() < next_idle_credit_)
      return;
    if (post_credit()) {
      sent_ = live_;
      next_idle_credit_ = Clock::now() + std::chrono::milliseconds(250);
    }
  }
  bool post_credit() {
    ctrl_->credit_src = live_;
    return post_write(&ctrl_->credit_src, sizeof(Credit), offsetof(ClientCtrl, credit));
  }
  // An unsignaled Write into the client's control block; false if the send
  // queue is full (tried again on a later step).
  bool post_write(const void* src, uint32_t len, size_t peer_off) {
    SendWr wr{.opcode = WrOpcode::kWrite, .flags = 0, .num_sge = 1,
              .remote_addr = h_.ctrl.addr + peer_off, .rkey = h_.ctrl.rkey};
    wr.sg_list[0] = Sge{addr_of(src), len, ctrl_stag_};
    const int rc = node_.eng().post_send(qp_, wr);
    if (rc == -EAGAIN) return false;
    if (rc < 0) die(kExitError, "post_send(credit): %s", std::strerror(-rc));
    return true;
  }

  Node& node_;
  const Hello h_;
  const Layout lay_;
  const OpGen gen_;
  Mismatches* mism_;
  const uint64_t mism0_ = mism_->count();
  Buffer data_;
  std::unique_ptr<ServerCtrl> ctrl_;
  uint32_t data_stag_ = 0, ctrl_stag_ = 0;
  Qp* qp_ = nullptr;
  std::deque<Wc> recvs_;
  uint64_t cursor_ = 0;  // the next operation of the client's to check
  uint64_t posted_ = 0, recv_done_ = 0, writes_done_ = 0;
  Credit live_, sent_;
  Clock::time_point next_idle_credit_{};
  Clock::time_point last_moved_ = Clock::now();
  bool established_ = false, final_checked_ = false, final_posted_ = false, done_posted_ = false;
};

class Server {
 public:
  explicit Server(const Options& o) : o_(o) {
    if (o.timeout_s > 0)
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o.timeout_s));
  }

  int run() {
    listen();
    while (!bye_ && !idle_over()) {
      pass();
      report_due();
      check_alive();
    }
    return farewell();
  }

 private:
  void listen() {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(o_.port);
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    if (int rc = node_.eng().listen(any, 1024, &listener_); rc < 0)
      die(kExitError, "listen on port %u: %s", o_.port, std::strerror(-rc));
    std::printf("# srdma_soak server: listening on port %u (transport %s)\n", o_.port,
                node_.eng().transport_name());
    std::fflush(stdout);
    t0_ = last_progress_ = last_activity_ = Clock::now();
    baseline_ = Resources::now(node_.eng());
  }

  void pass() {
    node_.pump([&](const CmEvent& ev) { on_cm(ev); }, [&](const Wc& wc) { on_wc(wc); });
    bool moved = false;
    for (auto& [qp, c] : conns_) moved |= c->step(rss_kb_);
    if (moved) last_progress_ = Clock::now();
  }

  void on_cm(const CmEvent& ev) {
    last_progress_ = last_activity_ = Clock::now();
    switch (ev.type) {
      case CmEventType::kConnectRequest: return on_request(ev);
      case CmEventType::kEstablished:
        if (auto it = conns_.find(ev.qp); it != conns_.end()) it->second->set_established();
        return;
      case CmEventType::kDisconnected: return on_disconnect(ev);
      default: return;
    }
  }

  void on_request(const CmEvent& ev) {
    Hello h;
    const char* why = nullptr;
    if (!decode(ev.private_data, &h)) why = "not an srdma_soak client";
    else if (h.kind == static_cast<uint8_t>(HelloKind::kBye)) return bye(ev.req);
    else if (h.kind != static_cast<uint8_t>(HelloKind::kData) || h.depth == 0 ||
             h.depth > kMaxDepth || h.max_size < 8 || h.max_size > kMaxSize)
      why = "bad parameters";
    if (why) {
      node_.eng().reject(ev.req, why, std::strlen(why));
      return;
    }
    auto c = std::make_unique<ServerConn>(node_, h, &mism_);
    const Welcome w = c->welcome();
    if (int rc = node_.eng().accept(ev.req, c->qp(), &w, sizeof(w)); rc < 0) {
      std::fprintf(stderr, "srdma_soak server: accept: %s\n", std::strerror(-rc));
      return;
    }
    ++served_;
    by_num_[c->qp()->num()] = c.get();
    conns_[c->qp()] = std::move(c);
  }

  void on_disconnect(const CmEvent& ev) {
    auto it = conns_.find(ev.qp);
    if (it == conns_.end()) return;
    if (!it->second->finished()) return lose(it->second.get(), describe_status(ev.status, ev.term));
    drop(it->second.get());
  }

  void on_wc(const Wc& wc) {
    auto it = by_num_.find(wc.qp_num);
    if (it == by_num_.end()) return;  // flushed work of a QP already destroyed
    if (it->second->on_wc(wc)) return;
    lose(it->second, "a completion failed");
  }

  bool surviving() const { return o_.serve_until_idle_s > 0; }

  // A connection that ended before its checks were done. With
  // --serve-until-idle it is an error event the server survives. The line
  // says how long the client had been silent (for a killed client: its time
  // to detection) and when (epoch seconds, to match a kill's time stamp).
  void lose(ServerConn* c, const std::string& why) {
    ++lost_;
    const double silent = seconds_since(c->last_moved());
    const double epoch = std::chrono::duration<double>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
    std::fprintf(stderr, "srdma_soak server: %s: lost before the end after %.3f s silent (at "
                 "%.3f): %s%s\n", c->describe().c_str(), silent, epoch, why.c_str(),
                 surviving() ? "; survived" : "");
    drop(c);
  }

  // Forgets a connection, keeping its figures.
  void drop(ServerConn* c) {
    closed_ops_ += c->credit().ops_checked;
    closed_bytes_ += c->credit().bytes_checked;
    by_num_.erase(c->qp()->num());
    conns_.erase(c->qp());
    last_activity_ = Clock::now();
    if (conns_.empty() && surviving() && idle_rss_kb_ == 0) idle_rss_kb_ = live_rss_kb();
  }

  // --serve-until-idle: nothing open and nothing asked for in that long.
  bool idle_over() const {
    return surviving() && conns_.empty() &&
           seconds_since(last_activity_) > o_.serve_until_idle_s;
  }

  // The client's last word: reject it with our account, then stop.
  void bye(ConnReq* req) {
    const uint64_t live_kb = live_rss_kb();
    const MemFigures m = read_mem();
    Farewell f;
    f.mismatches = mism_.count();
    f.lost = lost_;
    f.ops = ops();
    f.bytes = bytes();
    f.conns = served_;
    f.peak_rss_kb = m.hwm_kb;
    f.final_rss_kb = live_kb;
    f.open_conns = conns_.size();
    node_.eng().reject(req, &f, sizeof(f));
    bye_ = true;
    farewell_ = f;
  }

  int farewell() {
    // Keep the engine running briefly so that the reject leaves.
    const Clock::time_point until = Clock::now() + std::chrono::milliseconds(500);
    while (Clock::now() < until) {
      node_.pump([](const CmEvent&) {}, [](const Wc&) {});
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // Checked with the listener still open, as it was for the baseline.
    const bool back = !surviving() || resources_back();
    node_.eng().close_listener(listener_);
    if (!back) return summary(nullptr, "resources not back");
    return summary(nullptr);
  }

  // With --serve-until-idle: the engine's objects, held frames and mbufs back
  // to what they were before the first client, descriptors too, and live RSS
  // within --flat-mib of what it was when the server first fell idle (the
  // first clients touch the buffer pools for good). Prints both.
  bool resources_back() {
    Resources now = Resources::now(node_.eng());
    Resources want = baseline_;
    want.rss_kb = idle_rss_kb_ ? idle_rss_kb_ : now.rss_kb;
    const uint64_t slack_kb = static_cast<uint64_t>(o_.flat_mib * 1024);
    // Lingering closes drain over a few more polls: up to 2 s of them.
    for (int i = 0; i < 200 && !now.back_to(want, slack_kb); ++i) {
      node_.pump([](const CmEvent&) {}, [](const Wc&) {});
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      now = Resources::now(node_.eng());
    }
    const bool ok = now.back_to(want, slack_kb);
    std::printf("# server resources: baseline %s; first idle rss %.1f MiB\n"
                "SERVER RESOURCES %s (rss bound +%.1f MiB) %s\n",
                baseline_.describe().c_str(), mib(want.rss_kb), now.describe().c_str(),
                o_.flat_mib, ok ? "back" : "NOT BACK");
    return ok;
  }

  // failure: an error (exit 2); leak: resources not back (exit 1).
  int summary(const char* failure, const char* leak = nullptr) {
    const MemFigures m = read_mem();
    const bool lost_fails = lost_ && !surviving();
    const int code = failure || lost_fails ? kExitError : mism_.count() || leak ? kExitMismatch : 0;
    if (leak) failure = leak;
    std::printf("SERVER SUMMARY duration %.1f s conns %" PRIu64 " ops %" PRIu64
                " bytes_verified %" PRIu64 " mismatches %" PRIu64 " lost %" PRIu64
                " rss peak %.1f final %.1f MiB exit %d%s%s\n",
                seconds_since(t0_), served_, ops(), bytes(), mism_.count(), lost_,
                mib(m.hwm_kb), mib(m.rss_kb), code, failure ? ": " : "", failure ? failure : "");
    std::fflush(stdout);
    return code;
  }

  uint64_t ops() const {
    uint64_t n = closed_ops_;
    for (const auto& [qp, c] : conns_) n += c->credit().ops_checked;
    return n;
  }
  uint64_t bytes() const {
    uint64_t n = closed_bytes_;
    for (const auto& [qp, c] : conns_) n += c->credit().bytes_checked;
    return n;
  }

  void report_due() {
    const Clock::time_point now = Clock::now();
    if (now < next_report_) return;
    next_report_ = now + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(o_.report_s));
    rss_kb_ = read_mem().rss_kb;
    std::printf("[%7.1f s] server conns %4zu ops %11" PRIu64 " verified %9.3f GiB errors %" PRIu64
                " lost %" PRIu64 " | rss %.1f MiB | %s\n",
                seconds_since(t0_), conns_.size(), ops(), gib(bytes()), mism_.count(), lost_,
                mib(rss_kb_), node_.counters().c_str());
    std::fflush(stdout);
  }

  // A client that died (or a wedged engine) must not keep us forever.
  void check_alive() {
    const Clock::time_point now = Clock::now();
    const char* why = nullptr;
    if (deadline_ != Clock::time_point{} && now > deadline_) why = "timeout";
    if (!why && surviving()) return drop_stalled(now);
    // Before the first client there is no peer to be dead yet.
    const bool waiting_first = served_ == 0;
    if (!waiting_first && now - last_progress_ > std::chrono::duration<double>(o_.stall_s))
      why = "stalled: no progress for the --stall time (client dead or engine wedged)";
    if (!why) return;
    for (const auto& [qp, c] : conns_) std::fprintf(stderr, "  %s\n", c->describe().c_str());
    std::fprintf(stderr, "srdma_soak server: %s\n", why);
    std::exit(summary(why));
  }

  // --serve-until-idle: a connection whose client has been silent for
  // --stall (a dead peer lwIP has not given up on yet) is lost; the server
  // goes on.
  void drop_stalled(Clock::time_point now) {
    const auto stall = std::chrono::duration<double>(o_.stall_s);
    for (auto it = conns_.begin(); it != conns_.end();) {
      ServerConn* c = (it++)->second.get();  // lose() erases c's entry
      if (now - c->last_moved() > stall) lose(c, "stalled: no progress for the --stall time");
    }
  }

  const Options& o_;
  Node node_;
  Listener* listener_ = nullptr;
  std::unordered_map<Qp*, std::unique_ptr<ServerConn>> conns_;
  std::unordered_map<uint32_t, ServerConn*> by_num_;  // completions name QPs by number
  Mismatches mism_;
  Clock::time_point deadline_{}, t0_, last_progress_, next_report_{};
  Clock::time_point last_activity_;  // a request, an event or a connection gone
  Resources baseline_;               // before the first client
  uint64_t idle_rss_kb_ = 0;         // live RSS when the server first fell idle
  uint64_t served_ = 0, lost_ = 0, closed_ops_ = 0, closed_bytes_ = 0, rss_kb_ = 0;
  bool bye_ = false;
  Farewell farewell_;
};

}  // namespace
}  // namespace softrdma::soak

int main(int argc, char** argv) {
  using namespace softrdma::soak;
  const Options o = parse_args(argc, argv);
  if (o.server) {
    g_role = "server";
    return Server(o).run();
  }
  return Client(o).run();
}
