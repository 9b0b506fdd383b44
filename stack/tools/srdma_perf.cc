// srdma_perf: latency and bandwidth of the SoftRDMA engine, in the manner of
// perftest's ib_send_lat / ib_write_bw / ib_read_lat.
//
//   server:  srdma_perf [-p port] [--crc 0|1] [--markers]
//   client:  srdma_perf [-p port] [-o op] [-t lat|bw] [-s sizes | -a] [-c] ... <server-ip>
//
// The client chooses the test. Its parameters and buffers reach the server in
// the MPA Request's private data; the server answers with its buffers in the
// Reply's. During the run each side writes small control messages into the
// other's mailbox with RDMA Writes, so control never consumes a posted
// receive. For every message size:
//
//   client                          server
//   BEGIN(size, iterations) ----->  posts receives, fills sources, resets flags
//                <--------------    READY
//   ... the measured operations: ping-pong, or a window of -d in flight ...
//   END -------------------------->  (all data has landed: one stream, in order)
//                <--------------    DONE(mismatches the server found)
//
// Bandwidth flow control: iWARP has no receiver-not-ready retry, so a Send
// that finds no posted receive kills the connection. The server writes its
// running count of posted receives into the client's credit word and the
// client holds message m back until m < credit. Verified Write runs use the
// same word for ring slots the server has checked; the client says how far it
// has written with small Writes into the server's notify word.
#include <arpa/inet.h>
#include <getopt.h>
#include <netdb.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "stack/engine.h"
#include "stack/tools/tool_common.h"

namespace softrdma::perf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "patterns and the private-data layout assume a little-endian host");

using namespace softrdma::tools;  // Clock, patterns, parse_u64, buffers

constexpr uint16_t kDefaultPort = 18515;
constexpr int kExitMismatch = 1;  // data verification failed
constexpr int kExitError = 2;     // usage, CM or completion error, timeout
constexpr uint64_t kMaxMsgSize = uint64_t{1} << 30;
constexpr uint64_t kAllSizesMax = uint64_t{8} << 20;        // -a: up to 8 MiB
constexpr uint64_t kVerifyRingBytes = uint64_t{128} << 20;  // -c bw: ring per direction
constexpr uint64_t kMaxRegion = uint64_t{8} << 30;
constexpr uint32_t kMaxDepth = 4096;
constexpr uint32_t kMaxSizes = 64;
constexpr uint64_t kLatIters = 1000;
constexpr uint64_t kBwIters = 5000;
constexpr uint64_t kMaxWarmup = 100;
constexpr uint64_t kMinIters = 2;
constexpr uint32_t kMagic = 0x53525046;  // "FPRS" on the wire
constexpr uint32_t kProtoVersion = 1;
constexpr size_t kNotifyRing = 8;  // > slots / notify batch + 2, see issue_bw
constexpr uint64_t kMaxReports = 8;  // mismatches printed in detail

[[noreturn]] __attribute__((format(printf, 2, 3))) void die(int code, const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fputs("srdma_perf: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::exit(code);
}

// --- what to run -----------------------------------------------------------

enum class Op : uint8_t { kSend, kWrite, kRead, kWriteImm, kFetchAdd, kCmpSwap };
enum class Kind : uint8_t { kLat, kBw };
constexpr uint8_t kOpCount = 6;

struct OpName {
  Op op;
  const char* name;
};
constexpr OpName kOpNames[] = {{Op::kSend, "send"},          {Op::kWrite, "write"},
                               {Op::kRead, "read"},          {Op::kWriteImm, "write_imm"},
                               {Op::kFetchAdd, "fadd"},      {Op::kCmpSwap, "cas"}};

const char* op_name(Op op) {
  for (const OpName& e : kOpNames)
    if (e.op == op) return e.name;
  return "?";
}

bool parse_op(std::string_view s, Op* out) {
  for (const OpName& e : kOpNames) {
    if (s == e.name) {
      *out = e.op;
      return true;
    }
  }
  return false;
}

bool is_atomic(Op op) { return op == Op::kFetchAdd || op == Op::kCmpSwap; }
// Every message of these consumes a receive the server posted.
bool uses_recv(Op op) { return op == Op::kSend || op == Op::kWriteImm; }
// Reads and atomics are answered by the responder's engine alone, so their
// latency is one full round trip; Sends and Writes ping-pong (half of one).
bool full_rtt(Op op) { return op == Op::kRead || is_atomic(op); }

// Sizes that make sense: atomics move 8 bytes; a polled Write needs a last
// byte to poll.
bool size_meaningful(Op op, Kind kind, uint64_t size) {
  if (is_atomic(op)) return size == 8;
  if (op == Op::kWrite && kind == Kind::kLat) return size > 0;
  return size <= kMaxMsgSize;
}

struct Options {
  std::string host;  // empty: server
  uint16_t port = kDefaultPort;
  Op op = Op::kSend;
  Kind kind = Kind::kLat;
  std::vector<uint64_t> sizes;
  bool all_sizes = false;
  int64_t iters = -1;  // -1: the default for the test kind
  int64_t warmup = -1;
  uint64_t max_bytes = uint64_t{1} << 30;
  bool verify = false;
  uint32_t depth = 128;
  EngineConfig engine = EngineConfig::from_env();
  bool crc_set = false;
  bool csv = false;
  double timeout_s = 60;
  double linger_s = 0;
};

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: srdma_perf [options]               server: serve one client, then exit\n"
      "       srdma_perf [options] <server-ip>   client: run the test against a server\n"
      "The client chooses the test; the server takes it from the connection request.\n"
      "  -p, --port N       TCP port (default %u)\n"
      "  -o, --op OP        send | write | read | write_imm | fadd | cas (default send)\n"
      "  -t, --test T       lat: one at a time (send/write/write_imm ping-pong, half round\n"
      "                     trip; read/atomics full round trip) | bw: -d in flight\n"
      "  -s, --size LIST    message sizes, comma-separated, K/M/G suffixes (default 8 for\n"
      "                     lat, 64K for bw; atomics: 8)\n"
      "  -a, --all          sizes 0 (where meaningful), 1, 2, 4 .. 8M\n"
      "  -n, --iters N      measured iterations per size (default %" PRIu64 " lat, %" PRIu64
      " bw)\n"
      "  -w, --warmup N     unmeasured iterations first (default min(%" PRIu64
      ", iters/10))\n"
      "      --max-bytes N  cap iterations at N/size per size, at least %" PRIu64
      " (default 1G; 0: no cap)\n"
      "  -c, --check        fill every message with a per-iteration pattern and check every\n"
      "                     byte at the receiver/reader; exit 1 on a mismatch\n"
      "  -d, --depth N      bw: operations in flight (default 128)\n"
      "      --crc 0|1      MPA CRC (default: FI_SOFTRDMA_CRC, else on); on if either side asks\n"
      "      --markers      ask the peer to insert MPA markers\n"
      "      --csv          machine-readable output\n"
      "      --timeout S    give up after S seconds in all (default 60)\n"
      "      --linger S     keep running the engine S seconds after the connection closed\n"
      "                     (FI_SOFTRDMA_PCAP writes its buffer once a second while links\n"
      "                     are polled; without this the capture's last frames are lost)\n"
      "Exit: 0 ok, 1 data mismatch, 2 error or timeout.\n",
      kDefaultPort, kLatIters, kBwIters, kMaxWarmup, kMinIters);
}

[[noreturn]] void bad_usage(const char* what, const char* arg) {
  std::fprintf(stderr, "srdma_perf: %s: '%s'\n", what, arg);
  usage(stderr);
  std::exit(kExitError);
}

uint64_t parse_count(const char* arg, const char* what) {
  uint64_t v;
  if (!parse_u64(arg, &v)) bad_usage(what, arg);
  return v;
}

Options parse_args(int argc, char** argv) {
  enum LongOnly { kCrc = 256, kMarkers, kCsv, kTimeout, kMaxBytes, kLinger };
  static const option kLong[] = {
      {"port", required_argument, nullptr, 'p'},   {"op", required_argument, nullptr, 'o'},
      {"test", required_argument, nullptr, 't'},   {"size", required_argument, nullptr, 's'},
      {"all", no_argument, nullptr, 'a'},          {"iters", required_argument, nullptr, 'n'},
      {"warmup", required_argument, nullptr, 'w'}, {"check", no_argument, nullptr, 'c'},
      {"depth", required_argument, nullptr, 'd'},  {"crc", required_argument, nullptr, kCrc},
      {"markers", no_argument, nullptr, kMarkers}, {"csv", no_argument, nullptr, kCsv},
      {"timeout", required_argument, nullptr, kTimeout},
      {"max-bytes", required_argument, nullptr, kMaxBytes},
      {"linger", required_argument, nullptr, kLinger},
      {"help", no_argument, nullptr, 'h'},         {nullptr, 0, nullptr, 0}};
  Options o;
  for (int c; (c = getopt_long(argc, argv, "p:o:t:s:an:w:cd:h", kLong, nullptr)) != -1;) {
    switch (c) {
      case 'p': {
        uint64_t v = parse_count(optarg, "bad port");
        if (v == 0 || v > 65535) bad_usage("bad port", optarg);
        o.port = static_cast<uint16_t>(v);
        break;
      }
      case 'o':
        if (!parse_op(optarg, &o.op)) bad_usage("unknown operation", optarg);
        break;
      case 't':
        if (std::string_view(optarg) == "lat") {
          o.kind = Kind::kLat;
        } else if (std::string_view(optarg) == "bw") {
          o.kind = Kind::kBw;
        } else {
          bad_usage("test must be lat or bw", optarg);
        }
        break;
      case 's': {
        std::string_view list(optarg);
        while (!list.empty()) {
          size_t comma = list.find(',');
          std::string item(list.substr(0, comma));
          uint64_t v;
          if (!parse_u64(item, &v) || v > kMaxMsgSize) bad_usage("bad size (max 1G)", optarg);
          o.sizes.push_back(v);
          list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        }
        break;
      }
      case 'a': o.all_sizes = true; break;
      case 'n': {
        uint64_t v = parse_count(optarg, "bad iteration count");
        if (v == 0 || v > (uint64_t{1} << 40)) bad_usage("bad iteration count", optarg);
        o.iters = static_cast<int64_t>(v);
        break;
      }
      case 'w': {
        uint64_t v = parse_count(optarg, "bad warm-up count");
        if (v > (uint64_t{1} << 40)) bad_usage("bad warm-up count", optarg);
        o.warmup = static_cast<int64_t>(v);
        break;
      }
      case 'c': o.verify = true; break;
      case 'd': {
        uint64_t v = parse_count(optarg, "bad depth");
        if (v == 0 || v > kMaxDepth) bad_usage("depth must be 1..4096", optarg);
        o.depth = static_cast<uint32_t>(v);
        break;
      }
      case kCrc:
        if (std::string_view(optarg) != "0" && std::string_view(optarg) != "1")
          bad_usage("--crc takes 0 or 1", optarg);
        o.engine.crc = optarg[0] == '1';
        o.crc_set = true;
        break;
      case kMarkers: o.engine.markers = true; break;
      case kCsv: o.csv = true; break;
      case kTimeout: {
        char* end = nullptr;
        o.timeout_s = std::strtod(optarg, &end);
        if (!end || *end || !(o.timeout_s > 0) || o.timeout_s > 1e6)
          bad_usage("bad timeout", optarg);
        break;
      }
      case kMaxBytes: o.max_bytes = parse_count(optarg, "bad --max-bytes"); break;
      case kLinger: {
        char* end = nullptr;
        o.linger_s = std::strtod(optarg, &end);
        if (!end || *end || !(o.linger_s >= 0) || o.linger_s > 60) bad_usage("bad linger", optarg);
        break;
      }
      case 'h': usage(stdout); std::exit(0);
      default: usage(stderr); std::exit(kExitError);
    }
  }
  if (optind < argc) o.host = argv[optind++];
  if (optind < argc) bad_usage("unexpected argument", argv[optind]);
  return o;
}

// The message sizes the client runs, in order.
std::vector<uint64_t> resolve_sizes(const Options& o) {
  std::vector<uint64_t> out;
  if (o.all_sizes) {
    if (size_meaningful(o.op, o.kind, 0)) out.push_back(0);
    for (uint64_t s = 1; s <= kAllSizesMax; s *= 2)
      if (size_meaningful(o.op, o.kind, s)) out.push_back(s);
  } else if (!o.sizes.empty()) {
    for (uint64_t s : o.sizes) {
      if (!size_meaningful(o.op, o.kind, s)) {
        die(kExitError, "size %" PRIu64 " does not fit %s %s (%s)", s, op_name(o.op),
            o.kind == Kind::kLat ? "lat" : "bw",
            is_atomic(o.op) ? "atomics move 8 bytes" : "the receiver polls the last byte");
      }
      out.push_back(s);
    }
  } else {
    out.push_back(is_atomic(o.op) || o.kind == Kind::kLat ? 8 : 65536);
  }
  if (out.size() > kMaxSizes) die(kExitError, "at most %u sizes per run", kMaxSizes);
  return out;
}

// --- data patterns ---------------------------------------------------------

// Which way a pattern travels, so that an echo cannot pass for an answer.
enum class Dir : uint64_t { kToServer = 1, kToClient = 2, kReadSource = 3 };

uint64_t seed_of(uint64_t size, uint64_t index, Dir dir) {
  return mix64(mix64(size) ^ (index * kGolden) ^ static_cast<uint64_t>(dir));
}

// A message's expected bytes: the pattern, and for polled Writes a last byte
// (the tag) that differs from the previous iteration's and is never 0.
struct Expect {
  uint64_t seed = 0;
  int tag = -1;

  uint8_t byte(uint64_t off, uint64_t n) const {
    if (tag >= 0 && off + 1 == n) return static_cast<uint8_t>(tag);
    return static_cast<uint8_t>(pattern_word(seed, off / 8) >> (8 * (off % 8)));
  }
};

uint8_t tag_of(uint64_t k) { return static_cast<uint8_t>(1 + k % 255); }

void fill(uint8_t* p, uint64_t n, const Expect& e) {
  const uint64_t words = n / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w = pattern_word(e.seed, i);
    std::memcpy(p + 8 * i, &w, 8);
  }
  for (uint64_t off = words * 8; off < n; ++off) p[off] = e.byte(off, n);
  if (e.tag >= 0 && n > 0) p[n - 1] = static_cast<uint8_t>(e.tag);
}

// Offset of the first byte that differs from e, or n.
uint64_t first_bad(const uint8_t* p, uint64_t n, const Expect& e) {
  const uint64_t words = n / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    if (w == pattern_word(e.seed, i)) continue;
    for (uint64_t off = 8 * i; off < 8 * i + 8; ++off)  // maybe only the tag differs
      if (p[off] != e.byte(off, n)) return off;
  }
  for (uint64_t off = words * 8; off < n; ++off)
    if (p[off] != e.byte(off, n)) return off;
  return n;
}

// Counts bad messages; the first few are printed in detail.
class Mismatches {
 public:
  explicit Mismatches(const char* side) : side_(side) {}

  bool check(const char* what, uint64_t size, uint64_t iter, const uint8_t* p, const Expect& e) {
    uint64_t off = first_bad(p, size, e);
    if (off == size) return true;
    if (count_ < kMaxReports) {
      std::fprintf(stderr,
                   "srdma_perf: %s: DATA MISMATCH in %s: size %" PRIu64 ", iteration %" PRIu64
                   ": byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
                   side_, what, size, iter, off, p[off], e.byte(off, size));
    }
    ++count_;
    return false;
  }
  __attribute__((format(printf, 2, 3))) void report(const char* fmt, ...) {
    if (count_ < kMaxReports) {
      va_list ap;
      va_start(ap, fmt);
      std::fprintf(stderr, "srdma_perf: %s: MISMATCH: ", side_);
      std::vfprintf(stderr, fmt, ap);
      std::fputc('\n', stderr);
      va_end(ap);
    }
    ++count_;
  }
  uint64_t count() const { return count_; }

 private:
  const char* side_;
  uint64_t count_ = 0;
};

// The operand sequence of an atomics run. Both sides derive it from (size,
// base), so the client checks every value returned and the server the final
// word.
class AtomicSeq {
 public:
  struct Step {
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint64_t expect = 0;  // the original value the operation must return
  };

  AtomicSeq() = default;
  AtomicSeq(Op op, uint64_t size, uint64_t base)
      : op_(op), value_(mix64(mix64(size) ^ base ^ 0xA7011C5ull)) {}

  uint64_t value() const { return value_; }
  Step next() {
    Step s;
    s.expect = value_;
    if (op_ == Op::kFetchAdd) {
      s.compare_add = mix64(k_++) | 1;
      value_ += s.compare_add;
    } else {
      s.compare_add = value_;
      s.swap = mix64(value_);
      value_ = s.swap;
    }
    return s;
  }

 private:
  Op op_ = Op::kFetchAdd;
  uint64_t value_ = 0;
  uint64_t k_ = 0;
};

// --- the wire between the two tools ----------------------------------------

struct Region {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint32_t rkey = 0;
  uint32_t pad = 0;
};

// Client → server, in the MPA Request's private data.
struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kProtoVersion;
  uint8_t op = 0;
  uint8_t kind = 0;
  uint8_t verify = 0;
  uint8_t pad = 0;
  uint32_t depth = 0;
  uint32_t slots = 0;
  uint32_t n_sizes = 0;
  uint64_t stride = 0;
  Region data, ctrl;
};

// Server → client, in the MPA Reply's private data.
struct Welcome {
  uint32_t magic = kMagic;
  uint32_t version = kProtoVersion;
  Region data, ctrl;
};
static_assert(sizeof(Hello) <= Engine::kMaxPrivateData);
static_assert(sizeof(Welcome) <= Engine::kMaxPrivateData);

template <class T>
bool decode(const std::vector<uint8_t>& pd, T* out) {
  if (pd.size() != sizeof(T)) return false;
  std::memcpy(out, pd.data(), sizeof(T));
  return true;
}

enum class MsgType : uint32_t { kNone, kBegin, kReady, kEnd, kDone };

const char* to_string(MsgType t) {
  switch (t) {
    case MsgType::kNone: return "none";
    case MsgType::kBegin: return "BEGIN";
    case MsgType::kReady: return "READY";
    case MsgType::kEnd: return "END";
    case MsgType::kDone: return "DONE";
  }
  return "?";
}

// One control message; it travels as one small Write, so it is placed whole
// within one progress call on the thread that reads it.
struct CtrlMsg {
  uint64_t seq = 0;
  MsgType type = MsgType::kNone;
  uint32_t pad = 0;
  uint64_t size = 0;
  uint64_t total = 0;  // iterations including warm-up
  uint64_t warm = 0;
  uint64_t base = 0;    // flow-controlled messages before this size
  uint64_t errors = 0;  // kDone: mismatches the server found in this size
  // seq again, last: the message has arrived once this matches. A Write may
  // be placed in pieces (an MPA marker or a TCP segment boundary can fall
  // inside it), in stream order, and with c1/c3 an engine thread places
  // while this one reads: seq alone showed the fields of the old message.
  uint64_t seq_end = 0;
};

// Each side's control MR. The peer writes credit, notify and inbox; the rest
// are the sources of our own control Writes.
struct alignas(64) CtrlBlock {
  uint64_t credit = 0;
  uint64_t notify = 0;
  alignas(64) CtrlMsg inbox;
  alignas(64) CtrlMsg outbox;
  uint64_t credit_src = 0;
  uint64_t notify_src[kNotifyRing] = {};
};

// Buffer layout, the same on both sides: `slots` receive slots (rx) then
// `slots` source slots (tx), each `stride` bytes.
struct Geometry {
  uint64_t stride = 64;
  uint32_t slots = 1;
  uint32_t depth = 1;
  Kind kind = Kind::kLat;
  Op op = Op::kSend;
  bool verify = false;

  uint64_t bytes() const { return 2 * uint64_t{slots} * stride; }
  // Operations the client keeps in flight. Verified runs and atomics give
  // each in-flight operation its own slot.
  uint32_t window() const {
    if (kind == Kind::kLat) return 1;
    return verify || is_atomic(op) ? std::min(depth, slots) : depth;
  }
  // Receives the server keeps posted in bandwidth runs.
  uint32_t recv_window() const { return verify ? slots : depth; }
};

Geometry geometry_for(const Options& o, const std::vector<uint64_t>& sizes) {
  Geometry g;
  g.kind = o.kind;
  g.op = o.op;
  g.verify = o.verify;
  g.depth = o.kind == Kind::kBw ? o.depth : 1;
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  g.stride = (std::max<uint64_t>(largest, 8) + 63) & ~uint64_t{63};
  if (o.kind == Kind::kBw) {
    if (is_atomic(o.op)) {
      g.slots = o.depth;
    } else if (o.verify) {
      g.slots = static_cast<uint32_t>(
          std::clamp<uint64_t>(kVerifyRingBytes / g.stride, 1, uint64_t{o.depth}));
    }
  }
  return g;
}

// Per-size plan: how many iterations, how many of them warm-up.
struct SizeRun {
  uint64_t size = 0;
  uint64_t total = 0;
  uint64_t warm = 0;
  uint64_t base = 0;
  uint64_t measured() const { return total - warm; }
};

SizeRun plan_for(const Options& o, uint64_t size) {
  uint64_t n = o.iters > 0 ? static_cast<uint64_t>(o.iters)
                           : (o.kind == Kind::kLat ? kLatIters : kBwIters);
  if (o.max_bytes > 0 && size > 0) n = std::min(n, std::max(kMinIters, o.max_bytes / size));
  const uint64_t warm =
      o.warmup >= 0 ? static_cast<uint64_t>(o.warmup) : std::min(kMaxWarmup, n / 10);
  return SizeRun{.size = size, .total = n + warm, .warm = warm, .base = 0};
}

Buffer alloc_buffer(uint64_t n) {
  Buffer b = alloc_touched(n);  // every page touched before anything is timed
  if (!b) die(kExitError, "cannot allocate %" PRIu64 " bytes", n);
  return b;
}

// --- engine plumbing shared by both roles ----------------------------------

// One QP, its buffers, the control mailbox, and waits that never outlast the
// global deadline.
class Endpoint {
 public:
  Endpoint(const EngineConfig& cfg, Clock::time_point deadline)
      : deadline_(deadline), eng_(cfg), pd_(eng_.alloc_pd()) {}

  Engine& engine() { return eng_; }
  Qp* qp() const { return qp_; }
  const Geometry& geometry() const { return g_; }
  std::vector<Wc>& wcs() { return wcs_; }
  // Moves the collected completions into *out (posting may pump meanwhile).
  void take(std::vector<Wc>* out) {
    out->clear();
    out->swap(wcs_);
  }
  bool established() const { return established_; }
  // Exit code for a connection that dies under us (a mismatch already seen
  // must not be reported as a mere error).
  void set_lost_code(int code) { lost_code_ = code; }

  // Allocates and registers the buffers, then creates the QP.
  void setup(const Geometry& g) {
    g_ = g;
    data_ = alloc_buffer(g.bytes());
    ctrl_ = std::make_unique<CtrlBlock>();
    constexpr uint32_t kAll =
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    data_stag_ = register_mr(data_.get(), g.bytes(), kAll);
    ctrl_stag_ =
        register_mr(ctrl_.get(), sizeof(CtrlBlock), kAccessLocalWrite | kAccessRemoteWrite);
    // Room for the data window plus control, credit and notify Writes.
    const uint32_t sq = g.window() + static_cast<uint32_t>(kNotifyRing) + 16;
    const uint32_t rq = (g.kind == Kind::kBw ? g.depth : 1) + 4;
    const uint16_t rd = static_cast<uint16_t>(g.kind == Kind::kBw ? g.depth : 16);
    cq_ = eng_.create_cq(2 * (sq + rq) + 64);
    qp_ = eng_.create_qp({.pd = pd_, .send_cq = cq_, .recv_cq = cq_, .sq_depth = sq,
                          .rq_depth = rq, .ord = rd, .ird = rd});
    if (!qp_) die(kExitError, "create_qp failed");
  }

  Region data_region() const {
    return {.addr = addr_of(data_.get()), .len = g_.bytes(), .rkey = data_stag_};
  }
  Region ctrl_region() const {
    return {.addr = addr_of(ctrl_.get()), .len = sizeof(CtrlBlock), .rkey = ctrl_stag_};
  }
  // False if the peer's regions cannot hold what the geometry puts there.
  bool set_peer(const Region& data, const Region& ctrl) {
    peer_data_ = data;
    peer_ctrl_ = ctrl;
    return data.len >= g_.bytes() && ctrl.len >= sizeof(CtrlBlock);
  }

  uint8_t* rx(uint64_t slot) { return data_.get() + slot * g_.stride; }
  uint8_t* tx(uint64_t slot) { return data_.get() + (g_.slots + slot) * g_.stride; }
  uint64_t peer_rx(uint64_t slot) const { return peer_data_.addr + slot * g_.stride; }
  uint64_t peer_tx(uint64_t slot) const {
    return peer_data_.addr + (g_.slots + slot) * g_.stride;
  }

  // A signaled data operation: local [p, p+len), remote at raddr.
  SendWr data_wr(WrOpcode op, uint64_t id, const uint8_t* p, uint64_t len, uint64_t raddr) const {
    SendWr wr{.wr_id = id, .opcode = op, .num_sge = 1, .remote_addr = raddr,
              .rkey = peer_data_.rkey};
    wr.sg_list[0] = Sge{addr_of(p), static_cast<uint32_t>(len), data_stag_};
    return wr;
  }

  void post(const SendWr& wr) {
    for (;;) {
      int rc = eng_.post_send(qp_, wr);
      if (rc == 0) return;
      if (rc != -EAGAIN)
        die(kExitError, "post_send(%s): %s", to_string(wr.opcode), std::strerror(-rc));
      pump();
      check_deadline("send queue space");
    }
  }
  // A receive into [p, p+len); len 0 with p null takes no buffer at all.
  void post_recv(uint8_t* p, uint64_t len, uint64_t id) {
    RecvWr wr{.wr_id = id, .num_sge = p ? 1 : 0};
    if (p) wr.sg_list[0] = Sge{addr_of(p), static_cast<uint32_t>(len), data_stag_};
    for (;;) {
      int rc = eng_.post_recv(qp_, wr);
      if (rc == 0) return;
      if (rc != -EAGAIN) die(kExitError, "post_recv: %s", std::strerror(-rc));
      pump();
      check_deadline("receive queue space");
    }
  }

  // One busy pass: I/O, CM events, completions (successful ones go to wcs()).
  void pump() {
    eng_.progress(0);
    CmEvent ev;
    while (eng_.poll_cm(&ev)) on_cm(ev);
    Wc buf[32];
    for (int n; (n = eng_.poll_cq(cq_, buf, 32)) > 0;)
      for (int i = 0; i < n; ++i) on_wc(buf[i]);
  }
  void check_deadline(const char* what) const {
    if (Clock::now() > deadline_) die(kExitError, "timeout waiting for %s", what);
  }
  // Busy-waits for pred, looking at the clock only every 64th pass: a clock
  // read in every pass would sit in the round trip being measured.
  template <class Pred>
  void wait(const char* what, Pred pred) {
    for (uint32_t i = 1; !pred(); ++i) {
      pump();
      if (i % 64 == 0) check_deadline(what);
    }
  }
  // The first completion of the given kind among those collected, or null.
  const Wc* find_wc(WcOpcode op) const {
    for (const Wc& wc : wcs_)
      if (wc.opcode == op) return &wc;
    return nullptr;
  }
  Wc wait_wc(WcOpcode op, const char* what) {
    wait(what, [&] { return find_wc(op) != nullptr; });
    Wc wc = *find_wc(op);
    wcs_.clear();  // the rest are local completions of our own posts
    return wc;
  }

  // --- control mailbox ---
  void send_ctrl(CtrlMsg m) {
    m.seq = m.seq_end = ++tx_seq_;
    ctrl_->outbox = m;
    ctrl_write(&ctrl_->outbox, sizeof(CtrlMsg), offsetof(CtrlBlock, inbox));
  }
  bool ctrl_arrived() const { return load(ctrl_->inbox.seq_end) > rx_seq_; }
  CtrlMsg wait_ctrl(MsgType type) {
    wait(to_string(type), [&] { return ctrl_arrived(); });
    ++rx_seq_;
    CtrlMsg m = ctrl_->inbox;
    if (m.seq != rx_seq_ || m.type != type) {
      die(kExitError, "protocol: expected %s #%" PRIu64 ", got %s #%" PRIu64, to_string(type),
          rx_seq_, to_string(m.type), m.seq);
    }
    return m;
  }
  // The credit source is updated in place: if an older credit Write is
  // still queued it carries the newer value, which is just as true.
  void write_credit(uint64_t v) {
    ctrl_->credit_src = v;
    ctrl_write(&ctrl_->credit_src, sizeof(uint64_t), offsetof(CtrlBlock, credit));
  }
  uint64_t credit() const { return load(ctrl_->credit); }
  // Notify sources rotate: each value must reach the peer exactly as posted.
  void write_notify(uint64_t v, uint64_t n) {
    uint64_t& src = ctrl_->notify_src[n % kNotifyRing];
    src = v;
    ctrl_write(&src, sizeof(uint64_t), offsetof(CtrlBlock, notify));
  }
  uint64_t notify() const { return load(ctrl_->notify); }

  // --- teardown ---
  // Active side: orderly close, then a short wait for the peer's end so our
  // exit does not cut off bytes still queued.
  void close_active() {
    closing_ = true;
    eng_.disconnect(qp_);
    const Clock::time_point until = std::min(deadline_, Clock::now() + std::chrono::seconds(5));
    while (qp_->conn() && Clock::now() < until) pump();
  }
  // Passive side: the peer closes.
  void await_close() {
    closing_ = true;
    wait("the client to disconnect", [&] { return disconnected_; });
  }
  // After the close: the engine keeps running (links polled) for a while.
  void linger(double secs) {
    const Clock::time_point until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(secs));
    while (Clock::now() < until) {
      pump();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

 private:
  // Registers [p, p+len) and returns its STag (the only part of the MR the
  // tool needs: local key and, sent to the peer, remote key).
  uint32_t register_mr(void* p, uint64_t len, uint32_t access) {
    const Mr* mr = eng_.reg_mr(pd_, p, len, access);
    if (!mr) die(kExitError, "memory registration of %" PRIu64 " bytes failed", len);
    return mr->stag;
  }

  void ctrl_write(const void* src, size_t len, size_t peer_off) {
    SendWr wr{.opcode = WrOpcode::kWrite, .flags = 0, .num_sge = 1,
              .remote_addr = peer_ctrl_.addr + peer_off, .rkey = peer_ctrl_.rkey};
    wr.sg_list[0] = Sge{addr_of(src), static_cast<uint32_t>(len), ctrl_stag_};
    post(wr);
  }

  void on_cm(const CmEvent& ev) {
    switch (ev.type) {
      case CmEventType::kConnectRequest: {
        static const char kBusy[] = "busy";
        eng_.reject(ev.req, kBusy, sizeof(kBusy));
        return;
      }
      case CmEventType::kEstablished:
        established_ = true;
        return;
      case CmEventType::kDisconnected:
        disconnected_ = true;
        if (closing_) return;
        die(lost_code_, "connection lost: %s", describe_status(ev.status, ev.term).c_str());
      default:
        die(kExitError, "unexpected CM event %s", to_string(ev.type));
    }
  }
  void on_wc(const Wc& wc) {
    if (wc.status != WcStatus::kSuccess) {
      if (closing_) return;  // flushed by the teardown
      die(lost_code_, "%s completion failed: %s (vendor_err 0x%x)", to_string(wc.opcode),
          to_string(wc.status), wc.vendor_err);
    }
    wcs_.push_back(wc);
  }

  Clock::time_point deadline_;
  Engine eng_;
  Pd* pd_;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  Geometry g_;
  Buffer data_;
  std::unique_ptr<CtrlBlock> ctrl_;
  uint32_t data_stag_ = 0;
  uint32_t ctrl_stag_ = 0;
  Region peer_data_, peer_ctrl_;
  std::vector<Wc> wcs_;
  uint64_t tx_seq_ = 0;
  uint64_t rx_seq_ = 0;
  bool established_ = false;
  bool disconnected_ = false;
  bool closing_ = false;
  int lost_code_ = kExitError;
};

// --- output ----------------------------------------------------------------

struct LatSummary {
  double min = 0, median = 0, avg = 0, p99 = 0, max = 0;
};

// Round-trip samples (ns) → microseconds, scaled (0.5 for half round trips).
LatSummary summarize(std::vector<double>& ns, double scale) {
  LatSummary s;
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  const size_t n = ns.size();
  const double k = scale / 1000.0;
  double sum = 0;
  for (double v : ns) sum += v;
  const size_t p99 = std::clamp<size_t>(static_cast<size_t>(std::ceil(0.99 * n)), 1, n) - 1;
  s.min = ns.front() * k;
  s.max = ns.back() * k;
  s.median = (n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2) * k;
  s.avg = sum / n * k;
  s.p99 = ns[p99] * k;
  return s;
}

constexpr char kCsvHeader[] =
    "tool,op,test,bytes,iters,depth,crc,markers,verify,lat_kind,min_us,median_us,avg_us,"
    "p99_us,max_us,mb_s,mops";

class Report {
 public:
  Report(const Options& o, const Geometry& g, const iwarp::MpaResult& mpa)
      : o_(o), window_(g.window()), crc_(mpa.crc), markers_(mpa.rx_markers || mpa.tx_markers) {}

  void header(const char* transport) const {
    if (o_.csv) {
      std::printf("%s\n", kCsvHeader);
      return;
    }
    std::printf("# srdma_perf: %s %s to %s:%u | transport %s | crc %s | markers %s | check %s\n",
                op_name(o_.op), o_.kind == Kind::kLat ? "latency" : "bandwidth", o_.host.c_str(),
                o_.port, transport, crc_ ? "on" : "off", markers_ ? "on" : "off",
                o_.verify ? "on (timings include it)" : "off");
    if (o_.kind == Kind::kLat) {
      std::printf("# latency in microseconds: %s\n",
                  full_rtt(o_.op) ? "full round trip (one operation and its response)"
                                  : "half round trip (ping-pong)");
      std::printf("#%11s %10s %10s %10s %10s %10s %10s\n", "bytes", "iters", "min", "median",
                  "avg", "p99", "max");
    } else {
      std::printf("# bandwidth with %u in flight; MB/s = 10^6 bytes/s, until the server confirms "
                  "the last message\n",
                  window_);
      std::printf("#%11s %10s %10s %12s %12s\n", "bytes", "iters", "depth", "MB/s", "Mops/s");
    }
    std::fflush(stdout);
  }

  void lat(uint64_t size, uint64_t n, const LatSummary& s) const {
    if (o_.csv) {
      std::printf("srdma_perf,%s,lat,%" PRIu64 ",%" PRIu64 ",1,%d,%d,%d,%s,%.3f,%.3f,%.3f,%.3f,"
                  "%.3f,,\n",
                  op_name(o_.op), size, n, crc_, markers_, o_.verify,
                  full_rtt(o_.op) ? "rtt" : "half_rtt", s.min, s.median, s.avg, s.p99, s.max);
    } else {
      std::printf(" %11" PRIu64 " %10" PRIu64 " %10.2f %10.2f %10.2f %10.2f %10.2f\n", size, n,
                  s.min, s.median, s.avg, s.p99, s.max);
    }
    std::fflush(stdout);
  }

  void bw(uint64_t size, uint64_t n, double secs) const {
    const double mb = secs > 0 ? static_cast<double>(size) * n / secs / 1e6 : 0;
    const double mops = secs > 0 ? n / secs / 1e6 : 0;
    if (o_.csv) {
      std::printf("srdma_perf,%s,bw,%" PRIu64 ",%" PRIu64 ",%u,%d,%d,%d,,,,,,,%.3f,%.4f\n",
                  op_name(o_.op), size, n, window_, crc_, markers_, o_.verify, mb, mops);
    } else {
      std::printf(" %11" PRIu64 " %10" PRIu64 " %10u %12.2f %12.4f\n", size, n, window_, mb, mops);
    }
    std::fflush(stdout);
  }

 private:
  const Options& o_;
  uint32_t window_;
  bool crc_;
  bool markers_;
};

sockaddr_in resolve(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  std::string err;
  if (!resolve_ipv4(host, port, &a, &err))
    die(kExitError, "cannot resolve %s: %s", host.c_str(), err.c_str());
  return a;
}

void warn_crc(const Options& o, const iwarp::MpaResult& mpa, const char* peer) {
  if (o.crc_set && o.engine.crc != mpa.crc) {
    std::fprintf(stderr, "srdma_perf: warning: CRC is %s: the %s asked for it (used if either "
                 "side asks)\n", mpa.crc ? "on" : "off", peer);
  }
}

// --- client ----------------------------------------------------------------

class Client {
 public:
  Client(const Options& o, Clock::time_point deadline)
      : o_(o), sizes_(resolve_sizes(o)), ep_(o.engine, deadline),
        mism_("client") {}

  int run() {
    ep_.setup(geometry_for(o_, sizes_));
    connect();
    report_ = std::make_unique<Report>(o_, ep_.geometry(), ep_.qp()->mpa());
    report_->header(ep_.engine().transport_name());
    for (uint64_t size : sizes_) run_size(size);
    ep_.close_active();
    ep_.linger(o_.linger_s);
    return 0;
  }

 private:
  // Connects, retrying while the server is not listening yet.
  void connect() {
    const sockaddr_in peer = resolve(o_.host, o_.port);
    const Geometry& g = ep_.geometry();
    Hello h;
    h.op = static_cast<uint8_t>(o_.op);
    h.kind = static_cast<uint8_t>(o_.kind);
    h.verify = o_.verify;
    h.depth = g.depth;
    h.slots = g.slots;
    h.n_sizes = static_cast<uint32_t>(sizes_.size());
    h.stride = g.stride;
    h.data = ep_.data_region();
    h.ctrl = ep_.ctrl_region();
    Engine& eng = ep_.engine();
    for (;;) {
      if (int rc = eng.connect(ep_.qp(), peer, &h, sizeof(h)); rc < 0)
        die(kExitError, "connect: %s", std::strerror(-rc));
      CmEvent ev;
      for (;;) {
        eng.progress(1000);
        if (eng.poll_cm(&ev)) break;
        ep_.check_deadline("the connection");
      }
      if (ev.type == CmEventType::kEstablished) {
        Welcome w;
        if (!decode(ev.private_data, &w) || w.magic != kMagic || w.version != kProtoVersion)
          die(kExitError, "the peer is not a matching srdma_perf server");
        if (!ep_.set_peer(w.data, w.ctrl)) die(kExitError, "the server's buffers are too small");
        warn_crc(o_, ep_.qp()->mpa(), "server");
        return;
      }
      if (ev.type == CmEventType::kRejected) {
        std::string why(ev.private_data.begin(), ev.private_data.end());
        die(kExitError, "rejected by the server: %s", why.c_str());
      }
      if (ev.type != CmEventType::kUnreachable || ev.status != -ECONNREFUSED) {
        die(kExitError, "cannot connect to %s:%u: %s (%s)", o_.host.c_str(), o_.port,
            to_string(ev.type), describe_status(ev.status, 0).c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // not listening yet
      ep_.check_deadline("the server to listen");
    }
  }

  void run_size(uint64_t size) {
    SizeRun r = plan_for(o_, size);
    r.base = base_;
    if (o_.op == Op::kWrite && o_.kind == Kind::kLat) ep_.rx(0)[size - 1] = 0;
    post_seq_ = done_seq_ = AtomicSeq(o_.op, size, r.base);
    const uint64_t mism0 = mism_.count();
    ep_.send_ctrl({.type = MsgType::kBegin, .size = size, .total = r.total, .warm = r.warm,
                   .base = r.base});
    ep_.wait_ctrl(MsgType::kReady);
    uint64_t server_errors = 0;
    if (o_.kind == Kind::kLat) {
      std::vector<double> samples = run_lat(r);
      server_errors = finish_size();
      report_->lat(size, r.measured(), summarize(samples, full_rtt(o_.op) ? 1.0 : 0.5));
    } else {
      double secs = run_bw(r, &server_errors);
      report_->bw(size, r.measured(), secs);
    }
    base_ += r.total;
    const uint64_t ours = mism_.count() - mism0;
    if (ours || server_errors) {
      ep_.set_lost_code(kExitMismatch);
      die(kExitMismatch, "DATA VERIFICATION FAILED at size %" PRIu64 ": %" PRIu64
          " bad at the client, %" PRIu64 " at the server", size, ours, server_errors);
    }
  }

  // END → DONE; returns the server's mismatch count.
  uint64_t finish_size() {
    ep_.send_ctrl({.type = MsgType::kEnd});
    return ep_.wait_ctrl(MsgType::kDone).errors;
  }

  std::vector<double> run_lat(const SizeRun& r) {
    std::vector<double> samples;
    samples.reserve(r.measured());
    for (uint64_t k = 0; k < r.total; ++k) {
      double ns = lat_once(r, k);
      if (k >= r.warm) samples.push_back(ns);
    }
    return samples;
  }

  // One timed operation (and its answer); returns the round trip in ns.
  double lat_once(const SizeRun& r, uint64_t k) {
    const uint64_t n = r.size;
    const bool check = o_.verify;
    uint8_t* const in = ep_.rx(0);
    uint8_t* const out = ep_.tx(0);
    Clock::time_point t0, t1;
    switch (o_.op) {
      case Op::kSend: {
        ep_.post_recv(in, n, k);
        const Expect e{seed_of(n, k, Dir::kToServer)};
        if (check) fill(out, n, e);
        const SendWr wr = ep_.data_wr(WrOpcode::kSend, k, out, n, 0);
        t0 = Clock::now();
        ep_.post(wr);
        const Wc wc = ep_.wait_wc(WcOpcode::kRecv, "the echoed send");
        t1 = Clock::now();
        if (check && wc.byte_len != n)
          mism_.report("echo %" PRIu64 " has %u bytes, sent %" PRIu64, k, wc.byte_len, n);
        if (check) mism_.check("send echo", n, k, in, e);
        break;
      }
      case Op::kWrite: {
        const uint8_t tag = tag_of(k);
        if (check) {
          fill(out, n, {seed_of(n, k, Dir::kToServer), tag});
        } else {
          out[n - 1] = tag;
        }
        const SendWr wr = ep_.data_wr(WrOpcode::kWrite, k, out, n, ep_.peer_rx(0));
        const uint8_t& flag = in[n - 1];
        t0 = Clock::now();
        ep_.post(wr);
        ep_.wait("the server's write", [&] { return load(flag) == tag; });
        t1 = Clock::now();
        if (check)
          mism_.check("write from the server", n, k, in, {seed_of(n, k, Dir::kToClient), tag});
        in[n - 1] = 0;
        ep_.wcs().clear();
        break;
      }
      case Op::kWriteImm: {
        ep_.post_recv(nullptr, 0, k);
        if (check) fill(out, n, {seed_of(n, k, Dir::kToServer)});
        SendWr wr = ep_.data_wr(WrOpcode::kWriteWithImm, k, out, n, ep_.peer_rx(0));
        wr.imm_data = k;
        t0 = Clock::now();
        ep_.post(wr);
        const Wc wc = ep_.wait_wc(WcOpcode::kRecvRdmaImm, "the server's write_imm");
        t1 = Clock::now();
        if (check && wc.imm_data != k)
          mism_.report("immediate data %" PRIu64 ", expected %" PRIu64, wc.imm_data, k);
        if (check)
          mism_.check("write_imm from the server", n, k, in, {seed_of(n, k, Dir::kToClient)});
        break;
      }
      case Op::kRead: {
        if (check) std::memset(in, static_cast<int>(mix64(k)), n);  // stale data must not pass
        const SendWr wr = ep_.data_wr(WrOpcode::kRead, k, in, n, ep_.peer_tx(0));
        t0 = Clock::now();
        ep_.post(wr);
        ep_.wait_wc(WcOpcode::kRead, "the read response");
        t1 = Clock::now();
        if (check) mism_.check("read", n, k, in, {seed_of(n, 0, Dir::kReadSource)});
        break;
      }
      case Op::kFetchAdd:
      case Op::kCmpSwap: {
        const AtomicSeq::Step s = post_seq_.next();
        const uint64_t poison = ~s.expect;
        std::memcpy(in, &poison, 8);
        const SendWr wr = atomic_wr(k, in, s);
        t0 = Clock::now();
        ep_.post(wr);
        ep_.wait_wc(o_.op == Op::kFetchAdd ? WcOpcode::kFetchAdd : WcOpcode::kCmpSwap,
                    "the atomic response");
        t1 = Clock::now();
        if (check) check_atomic(k, in, s.expect);
        break;
      }
    }
    return std::chrono::duration<double, std::nano>(t1 - t0).count();
  }

  SendWr atomic_wr(uint64_t k, const uint8_t* result, const AtomicSeq::Step& s) const {
    SendWr wr = ep_.data_wr(
        o_.op == Op::kFetchAdd ? WrOpcode::kAtomicFetchAdd : WrOpcode::kAtomicCmpSwap, k,
        result, 8, ep_.peer_rx(0));
    wr.compare_add = s.compare_add;
    wr.swap = s.swap;
    return wr;
  }

  void check_atomic(uint64_t k, const uint8_t* result, uint64_t expect) {
    uint64_t got;
    std::memcpy(&got, result, 8);
    if (got != expect) {
      mism_.report("%s %" PRIu64 " returned 0x%016" PRIx64 ", expected 0x%016" PRIx64,
                   op_name(o_.op), k, got, expect);
    }
  }

  // Keeps the window full; returns the seconds from the end of warm-up until
  // the server confirmed the last message.
  double run_bw(const SizeRun& r, uint64_t* server_errors) {
    const Geometry& g = ep_.geometry();
    const uint32_t window = g.window();
    const bool flow = uses_recv(o_.op) || (o_.op == Op::kWrite && o_.verify);
    notify_batch_ = std::max<uint32_t>(1, g.slots / 2);
    uint64_t posted = 0, done = 0;
    Clock::time_point t_start = Clock::now();
    while (done < r.total) {
      // Warm-up drains before the clock starts: no measured operation is
      // posted before it (with fewer operations than the window, all of
      // them would otherwise be in flight, or done, by then).
      const uint64_t limit = done < r.warm ? r.warm : r.total;
      while (posted < limit && posted - done < window &&
             (!flow || r.base + posted < ep_.credit())) {
        issue_bw(r, posted++);
      }
      ep_.pump();
      ep_.check_deadline("the bandwidth run");
      ep_.take(&batch_);
      for (const Wc& wc : batch_) {
        complete_bw(r, done, wc);
        if (++done == r.warm) t_start = Clock::now();
      }
    }
    *server_errors = finish_size();
    return seconds_since(t_start);
  }

  void issue_bw(const SizeRun& r, uint64_t k) {
    const uint64_t n = r.size;
    const uint64_t slot = k % ep_.geometry().slots;
    const bool check = o_.verify;
    switch (o_.op) {
      case Op::kSend:
        if (check) fill(ep_.tx(slot), n, {seed_of(n, k, Dir::kToServer)});
        ep_.post(ep_.data_wr(WrOpcode::kSend, k, ep_.tx(slot), n, 0));
        return;
      case Op::kWrite:
      case Op::kWriteImm: {
        if (check) fill(ep_.tx(slot), n, {seed_of(n, k, Dir::kToServer)});
        const bool imm = o_.op == Op::kWriteImm;
        SendWr wr = ep_.data_wr(imm ? WrOpcode::kWriteWithImm : WrOpcode::kWrite, k, ep_.tx(slot),
                                n, ep_.peer_rx(slot));
        wr.imm_data = k;
        ep_.post(wr);
        // Plain Writes tell the server nothing: say how far we got, in
        // batches, so it can check slots before they are reused.
        if (!imm && check && ((k + 1) % notify_batch_ == 0 || k + 1 == r.total))
          ep_.write_notify(r.base + k + 1, notifies_++);
        return;
      }
      case Op::kRead:
        if (check) std::memset(ep_.rx(slot), static_cast<int>(mix64(k)), n);
        ep_.post(ep_.data_wr(WrOpcode::kRead, k, ep_.rx(slot), n, ep_.peer_tx(slot)));
        return;
      case Op::kFetchAdd:
      case Op::kCmpSwap:
        ep_.post(atomic_wr(k, ep_.rx(slot), post_seq_.next()));
        return;
    }
  }

  // Completions arrive in posting order (one QP, one send queue).
  void complete_bw(const SizeRun& r, uint64_t k, const Wc& wc) {
    if (!o_.verify) return;
    const uint64_t slot = k % ep_.geometry().slots;
    if (o_.op == Op::kRead) {
      if (wc.byte_len != r.size)
        mism_.report("read %" PRIu64 " completed %u bytes, expected %" PRIu64, k, wc.byte_len,
                     r.size);
      mism_.check("read", r.size, k, ep_.rx(slot), {seed_of(r.size, slot, Dir::kReadSource)});
    } else if (is_atomic(o_.op)) {
      check_atomic(k, ep_.rx(slot), done_seq_.next().expect);
    }
  }

  const Options& o_;
  std::vector<uint64_t> sizes_;
  Endpoint ep_;
  Mismatches mism_;
  std::unique_ptr<Report> report_;
  AtomicSeq post_seq_, done_seq_;
  std::vector<Wc> batch_;
  uint64_t base_ = 0;  // flow-controlled messages of earlier sizes
  uint32_t notify_batch_ = 1;
  uint64_t notifies_ = 0;
};

// --- server ----------------------------------------------------------------

class Server {
 public:
  Server(const Options& o, Clock::time_point deadline)
      : o_(o), ep_(o.engine, deadline), mism_("server") {}

  int run() {
    accept_client();
    for (uint32_t i = 0; i < hello_.n_sizes; ++i) run_size();
    ep_.await_close();
    ep_.linger(o_.linger_s);
    if (!o_.csv) std::printf("# srdma_perf server: done, %" PRIu64 " mismatches\n", mism_.count());
    return mism_.count() ? kExitMismatch : 0;
  }

 private:
  // Why a Hello cannot be served, or null.
  static const char* hello_problem(const Hello& h) {
    if (h.magic != kMagic || h.version != kProtoVersion) return "not a matching srdma_perf client";
    if (h.op >= kOpCount || h.kind > 1) return "unknown test";
    if (h.depth == 0 || h.depth > kMaxDepth || h.slots == 0 || h.slots > kMaxDepth)
      return "bad depth";
    if (h.stride == 0 || h.stride % 64 || h.stride > kMaxMsgSize + 64) return "bad message size";
    if (h.n_sizes == 0 || h.n_sizes > kMaxSizes) return "bad size count";
    if (2 * h.slots * h.stride > kMaxRegion) return "buffers too large";
    return nullptr;
  }

  void accept_client() {
    Engine& eng = ep_.engine();
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_port = htons(o_.port);
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    Listener* l = nullptr;
    if (int rc = eng.listen(any, 16, &l); rc < 0)
      die(kExitError, "listen on port %u: %s", o_.port, std::strerror(-rc));
    if (!o_.csv) {
      std::printf("# srdma_perf server: listening on port %u (transport %s)\n", o_.port,
                  eng.transport_name());
      std::fflush(stdout);
    }
    ConnReq* req = nullptr;
    while (!req) {
      eng.progress(10000);  // idle until a client comes: nothing is timed yet
      ep_.check_deadline("a client");
      CmEvent ev;
      while (!req && eng.poll_cm(&ev)) {
        if (ev.type != CmEventType::kConnectRequest) continue;
        const char* why = decode(ev.private_data, &hello_) ? hello_problem(hello_)
                                                           : "not a matching srdma_perf client";
        if (why) {
          std::fprintf(stderr, "srdma_perf: rejected a client: %s\n", why);
          eng.reject(ev.req, why, std::strlen(why));
          continue;
        }
        req = ev.req;
      }
    }
    Geometry g;
    g.stride = hello_.stride;
    g.slots = hello_.slots;
    g.depth = hello_.depth;
    g.kind = static_cast<Kind>(hello_.kind);
    g.op = static_cast<Op>(hello_.op);
    g.verify = hello_.verify != 0;
    ep_.setup(g);
    if (!ep_.set_peer(hello_.data, hello_.ctrl)) {
      static const char kWhy[] = "client buffers too small";
      eng.reject(req, kWhy, sizeof(kWhy) - 1);
      die(kExitError, "%s", kWhy);
    }
    Welcome w;
    w.data = ep_.data_region();
    w.ctrl = ep_.ctrl_region();
    if (int rc = eng.accept(req, ep_.qp(), &w, sizeof(w)); rc < 0)
      die(kExitError, "accept: %s", std::strerror(-rc));
    eng.close_listener(l);
    ep_.wait("the client's RTR", [&] { return ep_.established(); });
    const iwarp::MpaResult& mpa = ep_.qp()->mpa();
    warn_crc(o_, mpa, "client");
    if (!o_.csv) {
      std::printf("# srdma_perf server: client: %s %s, %u sizes, check %s, crc %s, markers %s\n",
                  op_name(g.op), g.kind == Kind::kLat ? "lat" : "bw", hello_.n_sizes,
                  g.verify ? "on" : "off", mpa.crc ? "on" : "off",
                  mpa.rx_markers || mpa.tx_markers ? "on" : "off");
      std::fflush(stdout);
    }
  }

  void run_size() {
    const CtrlMsg b = ep_.wait_ctrl(MsgType::kBegin);
    const Geometry& g = ep_.geometry();
    if (b.size > g.stride || !size_meaningful(g.op, g.kind, b.size) || b.total == 0 ||
        b.warm >= b.total || b.base != base_)
      die(kExitError, "protocol: bad BEGIN (size %" PRIu64 ")", b.size);
    const SizeRun r{.size = b.size, .total = b.total, .warm = b.warm, .base = b.base};
    const uint64_t mism0 = mism_.count();
    prepare(r);
    ep_.send_ctrl({.type = MsgType::kReady});
    serve(r);
    ep_.wait_ctrl(MsgType::kEnd);
    finish(r);
    const uint64_t errors = mism_.count() - mism0;
    if (errors) ep_.set_lost_code(kExitMismatch);
    ep_.send_ctrl({.type = MsgType::kDone, .errors = errors});
    base_ += r.total;
  }

  bool lat() const { return ep_.geometry().kind == Kind::kLat; }
  Op op() const { return ep_.geometry().op; }
  bool check() const { return ep_.geometry().verify; }

  // Before READY: receives, sources, flags, and the first credit.
  void prepare(const SizeRun& r) {
    const Geometry& g = ep_.geometry();
    ep_.wcs().clear();
    switch (op()) {
      case Op::kSend:
      case Op::kWriteImm:
        if (lat()) {
          post_data_recv(r, 0);
          return;
        }
        posted_ = 0;
        while (posted_ < std::min<uint64_t>(g.recv_window(), r.total)) post_data_recv(r, posted_++);
        ep_.write_credit(r.base + posted_);
        return;
      case Op::kWrite:
        if (lat()) {
          ep_.rx(0)[r.size - 1] = 0;
        } else if (check()) {
          verified_ = r.base;
          ep_.write_credit(r.base + g.slots);
        }
        return;
      case Op::kRead:
        if (check())
          for (uint32_t s = 0; s < g.slots; ++s)
            fill(ep_.tx(s), r.size, {seed_of(r.size, s, Dir::kReadSource)});
        return;
      case Op::kFetchAdd:
      case Op::kCmpSwap: {
        const uint64_t v = AtomicSeq(op(), r.size, r.base).value();
        std::memcpy(ep_.rx(0), &v, 8);
        return;
      }
    }
  }

  void post_data_recv(const SizeRun& r, uint64_t j) {
    if (op() == Op::kSend) {
      ep_.post_recv(ep_.rx(j % ep_.geometry().slots), r.size, j);
    } else {
      ep_.post_recv(nullptr, 0, j);  // Immediate Data takes a receive, no buffer
    }
  }

  // The server's part of the measured phase; returns with END due next.
  void serve(const SizeRun& r) {
    if (lat()) {
      if (op() == Op::kSend || op() == Op::kWrite || op() == Op::kWriteImm)
        for (uint64_t k = 0; k < r.total; ++k) pong(r, k);
      return;
    }
    if (uses_recv(op())) return receive_bw(r);
    if (op() == Op::kWrite && check()) {
      while (!ep_.ctrl_arrived()) {
        ep_.pump();
        ep_.check_deadline("END");
        verify_notified(r);
      }
      verify_notified(r);  // END follows every Write and notify on the stream
      if (verified_ != r.base + r.total) {
        mism_.report("writes notified up to %" PRIu64 " of %" PRIu64, verified_ - r.base,
                     r.total);
      }
    }
  }

  // Answers ping k of a latency run.
  void pong(const SizeRun& r, uint64_t k) {
    const uint64_t n = r.size;
    uint8_t* const in = ep_.rx(0);
    uint8_t* const out = ep_.tx(0);
    switch (op()) {
      case Op::kSend: {
        const Wc wc = ep_.wait_wc(WcOpcode::kRecv, "the client's send");
        if (check() && wc.byte_len != n)
          mism_.report("send %" PRIu64 " has %u bytes, expected %" PRIu64, k, wc.byte_len, n);
        if (check()) mism_.check("send", n, k, in, {seed_of(n, k, Dir::kToServer)});
        if (k + 1 < r.total) post_data_recv(r, k + 1);  // before the echo frees the client
        ep_.post(ep_.data_wr(WrOpcode::kSend, k, in, n, 0));
        return;
      }
      case Op::kWrite: {
        const uint8_t tag = tag_of(k);
        const uint8_t& flag = in[n - 1];
        ep_.wait("the client's write", [&] { return load(flag) == tag; });
        if (check()) mism_.check("write", n, k, in, {seed_of(n, k, Dir::kToServer), tag});
        in[n - 1] = 0;
        if (check()) {
          fill(out, n, {seed_of(n, k, Dir::kToClient), tag});
        } else {
          out[n - 1] = tag;
        }
        ep_.wcs().clear();
        ep_.post(ep_.data_wr(WrOpcode::kWrite, k, out, n, ep_.peer_rx(0)));
        return;
      }
      case Op::kWriteImm: {
        const Wc wc = ep_.wait_wc(WcOpcode::kRecvRdmaImm, "the client's write_imm");
        if (check() && wc.imm_data != k)
          mism_.report("immediate data %" PRIu64 ", expected %" PRIu64, wc.imm_data, k);
        if (check()) mism_.check("write_imm", n, k, in, {seed_of(n, k, Dir::kToServer)});
        if (k + 1 < r.total) post_data_recv(r, k + 1);
        if (check()) fill(out, n, {seed_of(n, k, Dir::kToClient)});
        SendWr wr = ep_.data_wr(WrOpcode::kWriteWithImm, k, out, n, ep_.peer_rx(0));
        wr.imm_data = k;
        ep_.post(wr);
        return;
      }
      default:
        return;
    }
  }

  // Bandwidth Sends / Write-with-Immediate: check, repost, return credit.
  void receive_bw(const SizeRun& r) {
    const Geometry& g = ep_.geometry();
    const uint64_t batch = std::max<uint64_t>(1, g.recv_window() / 4);
    const WcOpcode want = op() == Op::kSend ? WcOpcode::kRecv : WcOpcode::kRecvRdmaImm;
    uint64_t received = 0, unreported = 0;
    while (received < r.total) {
      ep_.pump();
      ep_.check_deadline("the client's messages");
      ep_.take(&batch_);
      for (const Wc& wc : batch_) {
        if (wc.opcode != want) continue;
        const uint64_t k = received++;
        if (check()) {
          const uint64_t slot = k % g.slots;
          if (want == WcOpcode::kRecv && wc.byte_len != r.size)
            mism_.report("send %" PRIu64 " has %u bytes, expected %" PRIu64, k, wc.byte_len,
                         r.size);
          if (want == WcOpcode::kRecvRdmaImm && wc.imm_data != k)
            mism_.report("immediate data %" PRIu64 ", expected %" PRIu64, wc.imm_data, k);
          mism_.check(op_name(op()), r.size, k, ep_.rx(slot), {seed_of(r.size, k, Dir::kToServer)});
        }
        if (posted_ < r.total) {  // the slot just checked is the one reposted
          post_data_recv(r, posted_++);
          ++unreported;
        }
      }
      if (unreported >= batch || (unreported > 0 && posted_ == r.total)) {
        ep_.write_credit(r.base + posted_);
        unreported = 0;
      }
    }
  }

  // Verified bandwidth Writes: check what the client says it has written,
  // then release those slots.
  void verify_notified(const SizeRun& r) {
    const uint64_t upto = ep_.notify();
    if (upto <= verified_) return;
    if (upto > r.base + r.total) die(kExitError, "protocol: notify past the end of the run");
    const uint32_t slots = ep_.geometry().slots;
    for (uint64_t m = verified_; m < upto; ++m) {
      const uint64_t k = m - r.base;
      mism_.check("write", r.size, k, ep_.rx(k % slots), {seed_of(r.size, k, Dir::kToServer)});
    }
    verified_ = upto;
    ep_.write_credit(verified_ + slots);
  }

  // After END: what can only be checked once all operations are done.
  void finish(const SizeRun& r) {
    if (!is_atomic(op()) || !check()) return;
    AtomicSeq seq(op(), r.size, r.base);
    for (uint64_t k = 0; k < r.total; ++k) seq.next();
    uint64_t word;
    std::memcpy(&word, ep_.rx(0), 8);
    if (word != seq.value()) {
      mism_.report("%s target word is 0x%016" PRIx64 " after %" PRIu64
                   " ops, expected 0x%016" PRIx64,
                   op_name(op()), word, r.total, seq.value());
    }
  }

  const Options& o_;
  Endpoint ep_;
  Mismatches mism_;
  Hello hello_;
  uint64_t base_ = 0;
  uint64_t posted_ = 0;    // receive_bw: receives posted this size
  uint64_t verified_ = 0;  // verified Writes: messages checked (cumulative)
  std::vector<Wc> batch_;
};

}  // namespace
}  // namespace softrdma::perf

int main(int argc, char** argv) {
  using namespace softrdma::perf;
  const Options o = parse_args(argc, argv);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(o.timeout_s));
  if (o.host.empty()) return Server(o, deadline).run();
  return Client(o, deadline).run();
}
