// tcp_baseline: plain kernel-TCP ping-pong and stream, the yardstick for
// srdma_perf. Same command-line shape and output columns (also with --csv),
// so the two can be run and compared side by side:
//
//   server:  tcp_baseline [-p port]
//   client:  tcp_baseline [-p port] [-t lat|bw] [-s sizes | -a] [-n iters] [-c] <server-ip>
//
// lat: the client sends a message, the server reads all of it and sends it
// back; half the round trip is reported. bw: the client streams messages,
// the server reads them and acknowledges the last one; MB/s is counted from
// the end of warm-up until that acknowledgement. Both sides busy-poll
// non-blocking sockets with TCP_NODELAY, as srdma_perf busy-polls its engine.
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "stack/tools/tool_common.h"

namespace softrdma::bench {
namespace {

static_assert(std::endian::native == std::endian::little, "the header assumes little-endian");

using Clock = std::chrono::steady_clock;

constexpr uint16_t kDefaultPort = 18516;  // next to srdma_perf's 18515
constexpr int kExitMismatch = 1;
constexpr int kExitError = 2;
constexpr uint64_t kMaxMsgSize = uint64_t{1} << 30;
constexpr uint64_t kAllSizesMax = uint64_t{8} << 20;
constexpr uint64_t kLatIters = 1000;
constexpr uint64_t kBwIters = 5000;
constexpr uint64_t kMaxWarmup = 100;
constexpr uint64_t kMinIters = 2;
constexpr uint32_t kMagic = 0x54435042;  // "BPCT" on the wire
constexpr uint64_t kMaxReports = 8;

[[noreturn]] __attribute__((format(printf, 2, 3))) void die(int code, const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fputs("tcp_baseline: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
  std::exit(code);
}

enum class Kind : uint8_t { kLat, kBw };

struct Options {
  std::string host;
  uint16_t port = kDefaultPort;
  Kind kind = Kind::kLat;
  std::vector<uint64_t> sizes;
  bool all_sizes = false;
  int64_t iters = -1;
  int64_t warmup = -1;
  uint64_t max_bytes = uint64_t{1} << 30;
  bool verify = false;
  bool csv = false;
  double timeout_s = 60;
};

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: tcp_baseline [options]               server: serve one client, then exit\n"
      "       tcp_baseline [options] <server-ip>   client\n"
      "  -p, --port N       TCP port (default %u)\n"
      "  -t, --test T       lat: ping-pong, half round trip | bw: one-way stream\n"
      "  -s, --size LIST    message sizes, comma-separated, K/M/G suffixes (default 8 for\n"
      "                     lat, 64K for bw)\n"
      "  -a, --all          sizes 1, 2, 4 .. 8M\n"
      "  -n, --iters N      measured iterations per size (default %" PRIu64 " lat, %" PRIu64
      " bw)\n"
      "  -w, --warmup N     unmeasured iterations first (default min(%" PRIu64 ", iters/10))\n"
      "      --max-bytes N  cap iterations at N/size per size, at least %" PRIu64
      " (default 1G; 0: no cap)\n"
      "  -c, --check        per-iteration pattern, every byte checked; exit 1 on a mismatch\n"
      "      --csv          machine-readable output (srdma_perf's columns)\n"
      "      --timeout S    give up after S seconds in all (default 60)\n",
      kDefaultPort, kLatIters, kBwIters, kMaxWarmup, kMinIters);
}

[[noreturn]] void bad_usage(const char* what, const char* arg) {
  std::fprintf(stderr, "tcp_baseline: %s: '%s'\n", what, arg);
  usage(stderr);
  std::exit(kExitError);
}

using tools::parse_u64;  // shared with the engine tools

Options parse_args(int argc, char** argv) {
  enum LongOnly { kCsv = 256, kTimeout, kMaxBytes };
  static const option kLong[] = {
      {"port", required_argument, nullptr, 'p'},   {"test", required_argument, nullptr, 't'},
      {"size", required_argument, nullptr, 's'},   {"all", no_argument, nullptr, 'a'},
      {"iters", required_argument, nullptr, 'n'},  {"warmup", required_argument, nullptr, 'w'},
      {"check", no_argument, nullptr, 'c'},        {"csv", no_argument, nullptr, kCsv},
      {"timeout", required_argument, nullptr, kTimeout},
      {"max-bytes", required_argument, nullptr, kMaxBytes},
      {"help", no_argument, nullptr, 'h'},         {nullptr, 0, nullptr, 0}};
  Options o;
  uint64_t v;
  for (int c; (c = getopt_long(argc, argv, "p:t:s:an:w:ch", kLong, nullptr)) != -1;) {
    switch (c) {
      case 'p':
        if (!parse_u64(optarg, &v) || v == 0 || v > 65535) bad_usage("bad port", optarg);
        o.port = static_cast<uint16_t>(v);
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
          if (!parse_u64(item, &v) || v == 0 || v > kMaxMsgSize)
            bad_usage("bad size (1 byte to 1G; a stream has no empty messages)", optarg);
          o.sizes.push_back(v);
          list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        }
        break;
      }
      case 'a': o.all_sizes = true; break;
      case 'n':
        if (!parse_u64(optarg, &v) || v == 0 || v > (uint64_t{1} << 40))
          bad_usage("bad iteration count", optarg);
        o.iters = static_cast<int64_t>(v);
        break;
      case 'w':
        if (!parse_u64(optarg, &v) || v > (uint64_t{1} << 40))
          bad_usage("bad warm-up count", optarg);
        o.warmup = static_cast<int64_t>(v);
        break;
      case 'c': o.verify = true; break;
      case kCsv: o.csv = true; break;
      case kTimeout: {
        char* end = nullptr;
        o.timeout_s = std::strtod(optarg, &end);
        if (!end || *end || !(o.timeout_s > 0) || o.timeout_s > 1e6)
          bad_usage("bad timeout", optarg);
        break;
      }
      case kMaxBytes:
        if (!parse_u64(optarg, &o.max_bytes)) bad_usage("bad --max-bytes", optarg);
        break;
      case 'h': usage(stdout); std::exit(0);
      default: usage(stderr); std::exit(kExitError);
    }
  }
  if (optind < argc) o.host = argv[optind++];
  if (optind < argc) bad_usage("unexpected argument", argv[optind]);
  return o;
}

// --- patterns (as srdma_perf's, so -c means the same in both) --------------

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t mix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t seed_of(uint64_t size, uint64_t index) {
  return mix64(mix64(size) ^ (index * kGolden) ^ 1);
}

uint64_t pattern_word(uint64_t seed, uint64_t i) {
  uint64_t w = (seed + i) * kGolden;
  return w ^ (w >> 29);
}

uint8_t pattern_byte(uint64_t seed, uint64_t off) {
  return static_cast<uint8_t>(pattern_word(seed, off / 8) >> (8 * (off % 8)));
}

void fill(uint8_t* p, uint64_t n, uint64_t seed) {
  const uint64_t words = n / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w = pattern_word(seed, i);
    std::memcpy(p + 8 * i, &w, 8);
  }
  for (uint64_t off = words * 8; off < n; ++off) p[off] = pattern_byte(seed, off);
}

uint64_t first_bad(const uint8_t* p, uint64_t n, uint64_t seed) {
  const uint64_t words = n / 8;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    if (w == pattern_word(seed, i)) continue;
    for (uint64_t off = 8 * i;; ++off)
      if (p[off] != pattern_byte(seed, off)) return off;
  }
  for (uint64_t off = words * 8; off < n; ++off)
    if (p[off] != pattern_byte(seed, off)) return off;
  return n;
}

class Mismatches {
 public:
  explicit Mismatches(const char* side) : side_(side) {}
  void check(const char* what, uint64_t size, uint64_t iter, const uint8_t* p) {
    const uint64_t seed = seed_of(size, iter);
    const uint64_t off = first_bad(p, size, seed);
    if (off == size) return;
    if (count_++ < kMaxReports) {
      std::fprintf(stderr,
                   "tcp_baseline: %s: DATA MISMATCH in %s: size %" PRIu64 ", iteration %" PRIu64
                   ": byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
                   side_, what, size, iter, off, p[off], pattern_byte(seed, off));
    }
  }
  uint64_t count() const { return count_; }

 private:
  const char* side_;
  uint64_t count_ = 0;
};

// --- busy-polled socket I/O ------------------------------------------------

// A connected, non-blocking, TCP_NODELAY socket that never waits past the
// deadline.
class Conn {
 public:
  Conn(int fd, Clock::time_point deadline) : fd_(fd), deadline_(deadline) {
    int one = 1;
    if (::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
      die(kExitError, "TCP_NODELAY: %s", std::strerror(errno));
    if (::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK) < 0)
      die(kExitError, "O_NONBLOCK: %s", std::strerror(errno));
  }
  ~Conn() { ::close(fd_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void send_all(const void* p, uint64_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (uint32_t spins = 0; n > 0;) {
      ssize_t r = ::send(fd_, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) {
        b += r;
        n -= static_cast<uint64_t>(r);
      } else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        die(kExitError, "send: %s", std::strerror(errno));
      } else if (++spins % 1024 == 0) {
        check_deadline("send");
      }
    }
  }
  // Reads exactly n bytes; false on a clean EOF before the first byte.
  bool recv_all(void* p, uint64_t n) {
    auto* b = static_cast<uint8_t*>(p);
    const uint64_t want = n;
    for (uint32_t spins = 0; n > 0;) {
      ssize_t r = ::recv(fd_, b, n, MSG_DONTWAIT);
      if (r > 0) {
        b += r;
        n -= static_cast<uint64_t>(r);
      } else if (r == 0) {
        if (n == want) return false;
        die(kExitError, "the peer closed mid-message");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        die(kExitError, "recv: %s", std::strerror(errno));
      } else if (++spins % 1024 == 0) {
        check_deadline("recv");
      }
    }
    return true;
  }
  void recv_exact(void* p, uint64_t n, const char* what) {
    if (!recv_all(p, n)) die(kExitError, "the peer closed while waiting for %s", what);
  }
  void check_deadline(const char* what) const {
    if (Clock::now() > deadline_) die(kExitError, "timeout in %s", what);
  }

 private:
  int fd_;
  Clock::time_point deadline_;
};

// Per-size header, client → server.
struct Begin {
  uint32_t magic = kMagic;
  uint8_t kind = 0;
  uint8_t verify = 0;
  uint16_t pad = 0;
  uint64_t size = 0;
  uint64_t total = 0;  // iterations including warm-up
};

// Server → client after a size: 0 or the number of mismatches seen.
struct Ack {
  uint64_t errors = 0;
};

struct Buffer {
  explicit Buffer(uint64_t n) : bytes(std::max<uint64_t>(n, 1), 0) {}
  uint8_t* data() { return bytes.data(); }
  std::vector<uint8_t> bytes;
};

// --- output (srdma_perf's format) ------------------------------------------

struct LatSummary {
  double min = 0, median = 0, avg = 0, p99 = 0, max = 0;
};

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

void print_header(const Options& o) {
  if (o.csv) {
    std::printf("%s\n", kCsvHeader);
    return;
  }
  std::printf("# tcp_baseline: %s to %s:%u | kernel TCP, TCP_NODELAY, busy-poll | check %s\n",
              o.kind == Kind::kLat ? "ping-pong latency" : "stream bandwidth", o.host.c_str(),
              o.port, o.verify ? "on (timings include it)" : "off");
  if (o.kind == Kind::kLat) {
    std::printf("# latency in microseconds: half round trip (ping-pong)\n");
    std::printf("#%11s %10s %10s %10s %10s %10s %10s\n", "bytes", "iters", "min", "median", "avg",
                "p99", "max");
  } else {
    std::printf("# bandwidth: one stream; MB/s = 10^6 bytes/s, until the server acknowledges "
                "the last message\n");
    std::printf("#%11s %10s %10s %12s %12s\n", "bytes", "iters", "depth", "MB/s", "Mops/s");
  }
  std::fflush(stdout);
}

void print_lat(const Options& o, uint64_t size, uint64_t n, const LatSummary& s) {
  if (o.csv) {
    std::printf("tcp_baseline,tcp,lat,%" PRIu64 ",%" PRIu64 ",1,0,0,%d,half_rtt,%.3f,%.3f,%.3f,"
                "%.3f,%.3f,,\n",
                size, n, o.verify, s.min, s.median, s.avg, s.p99, s.max);
  } else {
    std::printf(" %11" PRIu64 " %10" PRIu64 " %10.2f %10.2f %10.2f %10.2f %10.2f\n", size, n,
                s.min, s.median, s.avg, s.p99, s.max);
  }
  std::fflush(stdout);
}

void print_bw(const Options& o, uint64_t size, uint64_t n, double secs) {
  const double mb = secs > 0 ? static_cast<double>(size) * n / secs / 1e6 : 0;
  const double mops = secs > 0 ? n / secs / 1e6 : 0;
  if (o.csv) {
    std::printf("tcp_baseline,tcp,bw,%" PRIu64 ",%" PRIu64 ",1,0,0,%d,,,,,,,%.3f,%.4f\n", size, n,
                o.verify, mb, mops);
  } else {
    std::printf(" %11" PRIu64 " %10" PRIu64 " %10d %12.2f %12.4f\n", size, n, 1, mb, mops);
  }
  std::fflush(stdout);
}

// --- the two roles ---------------------------------------------------------

void serve_size(Conn& c, const Begin& b, Mismatches& mism) {
  Buffer buf(b.size);
  const uint8_t ready = 1;
  c.send_all(&ready, 1);
  const uint64_t before = mism.count();
  for (uint64_t k = 0; k < b.total; ++k) {
    c.recv_exact(buf.data(), b.size, "a message");
    if (b.verify) mism.check("message", b.size, k, buf.data());
    if (b.kind == static_cast<uint8_t>(Kind::kLat)) c.send_all(buf.data(), b.size);
  }
  const Ack ack{mism.count() - before};
  c.send_all(&ack, sizeof(ack));
}

int run_server(const Options& o, Clock::time_point deadline) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (lfd < 0 || ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
    die(kExitError, "socket: %s", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(o.port);
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0 || ::listen(lfd, 4) < 0)
    die(kExitError, "listen on port %u: %s", o.port, std::strerror(errno));
  if (!o.csv) {
    std::printf("# tcp_baseline server: listening on port %u\n", o.port);
    std::fflush(stdout);
  }
  ::fcntl(lfd, F_SETFL, ::fcntl(lfd, F_GETFL) | O_NONBLOCK);
  int fd;
  while ((fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)) < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      die(kExitError, "accept: %s", std::strerror(errno));
    if (Clock::now() > deadline) die(kExitError, "timeout waiting for a client");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // nothing is timed yet
  }
  ::close(lfd);
  Conn c(fd, deadline);
  Mismatches mism("server");
  Begin b;
  while (c.recv_all(&b, sizeof(b))) {
    if (b.magic != kMagic || b.kind > 1 || b.size == 0 || b.size > kMaxMsgSize || b.total == 0)
      die(kExitError, "protocol: bad header from the client");
    serve_size(c, b, mism);
  }
  if (!o.csv) std::printf("# tcp_baseline server: done, %" PRIu64 " mismatches\n", mism.count());
  return mism.count() ? kExitMismatch : 0;
}

int connect_to(const Options& o, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(o.host.c_str(), nullptr, &hints, &res); rc != 0 || !res)
    die(kExitError, "cannot resolve %s: %s", o.host.c_str(), gai_strerror(rc));
  sockaddr_in a{};
  std::memcpy(&a, res->ai_addr, sizeof(a));
  freeaddrinfo(res);
  a.sin_port = htons(o.port);
  for (;;) {  // the server may not be listening yet
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die(kExitError, "socket: %s", std::strerror(errno));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    const int err = errno;
    ::close(fd);
    if (err != ECONNREFUSED)
      die(kExitError, "connect to %s:%u: %s", o.host.c_str(), o.port, std::strerror(err));
    if (Clock::now() > deadline) die(kExitError, "timeout waiting for the server to listen");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<uint64_t> resolve_sizes(const Options& o) {
  if (o.all_sizes) {
    std::vector<uint64_t> v;
    for (uint64_t s = 1; s <= kAllSizesMax; s *= 2) v.push_back(s);
    return v;
  }
  if (!o.sizes.empty()) return o.sizes;
  return {o.kind == Kind::kLat ? uint64_t{8} : uint64_t{65536}};
}

int run_client(const Options& o, Clock::time_point deadline) {
  const std::vector<uint64_t> sizes = resolve_sizes(o);
  Conn c(connect_to(o, deadline), deadline);
  print_header(o);
  Mismatches mism("client");
  for (uint64_t size : sizes) {
    uint64_t n = o.iters > 0 ? static_cast<uint64_t>(o.iters)
                             : (o.kind == Kind::kLat ? kLatIters : kBwIters);
    if (o.max_bytes > 0) n = std::min(n, std::max(kMinIters, o.max_bytes / size));
    const uint64_t warm =
        o.warmup >= 0 ? static_cast<uint64_t>(o.warmup) : std::min(kMaxWarmup, n / 10);
    const Begin b{.kind = static_cast<uint8_t>(o.kind), .verify = o.verify, .size = size,
                  .total = n + warm};
    c.send_all(&b, sizeof(b));
    uint8_t ready;
    c.recv_exact(&ready, 1, "the server to be ready");
    Buffer out(size), in(size);
    std::vector<double> samples;
    samples.reserve(n);
    Clock::time_point t_start = Clock::now();
    for (uint64_t k = 0; k < b.total; ++k) {
      if (o.verify) fill(out.data(), size, seed_of(size, k));
      if (o.kind == Kind::kBw) {
        c.send_all(out.data(), size);
        if (k + 1 == warm) t_start = Clock::now();
        continue;
      }
      const Clock::time_point t0 = Clock::now();
      c.send_all(out.data(), size);
      c.recv_exact(in.data(), size, "the echo");
      const Clock::time_point t1 = Clock::now();
      if (k >= warm) samples.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
      if (o.verify) mism.check("echo", size, k, in.data());
    }
    Ack ack;
    c.recv_exact(&ack, sizeof(ack), "the server's acknowledgement");
    if (o.kind == Kind::kBw) {
      print_bw(o, size, n, std::chrono::duration<double>(Clock::now() - t_start).count());
    } else {
      print_lat(o, size, n, summarize(samples, 0.5));
    }
    if (mism.count() || ack.errors) {
      die(kExitMismatch, "DATA VERIFICATION FAILED at size %" PRIu64 ": %" PRIu64
          " bad at the client, %" PRIu64 " at the server", size, mism.count(), ack.errors);
    }
  }
  return 0;
}

}  // namespace
}  // namespace softrdma::bench

int main(int argc, char** argv) {
  using namespace softrdma::bench;
  const Options o = parse_args(argc, argv);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(o.timeout_s));
  return o.host.empty() ? run_server(o, deadline) : run_client(o, deadline);
}
