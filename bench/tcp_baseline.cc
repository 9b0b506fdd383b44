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
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "stack/tools/addresses.h"
#include "stack/tools/message_check.h"
#include "stack/tools/result_table.h"
#include "stack/tools/run_options.h"
#include "stack/tools/tool_common.h"
#include "stack/tools/tool_die.h"

namespace softrdma::bench {
namespace {

using namespace softrdma::tools;  // the table, the shared command line, checks

static_assert(std::endian::native == std::endian::little, "the header assumes little-endian");

constexpr uint16_t kDefaultPort = 18516;  // next to srdma_perf's 18515
constexpr uint32_t kMagic = 0x54435042;  // "BPCT" on the wire

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

const RunOptionRules kRules{
    .program = "tcp_baseline", .usage = usage, .min_size = 1,
    .size_error = "bad size (1 byte to 1G; a stream has no empty messages)"};

RunOptions parse_args(int argc, char** argv) {
  std::vector<option> longs = run_long_options();
  longs.push_back({nullptr, 0, nullptr, 0});
  RunOptions o;
  o.port = kDefaultPort;
  for (int c; (c = getopt_long(argc, argv, kRunShortOptions, longs.data(), nullptr)) != -1;) {
    if (parse_run_option(c, optarg, kRules, &o)) continue;
    usage(stderr);
    std::exit(kExitError);
  }
  parse_run_operands(argc, argv, kRules, &o);
  return o;
}

// Messages of iteration k: the pattern srdma_perf sends to its server, so -c
// means the same in both.
Expect expect_of(uint64_t size, uint64_t k) { return {seed_of(size, k, Dir::kToServer)}; }

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

struct MsgBuffer {
  explicit MsgBuffer(uint64_t n) : bytes(std::max<uint64_t>(n, 1), 0) {}
  uint8_t* data() { return bytes.data(); }
  std::vector<uint8_t> bytes;
};

void print_header(const RunOptions& o) {
  if (o.csv) {
    print_csv_header();
    return;
  }
  std::printf("# tcp_baseline: %s to %s:%u | kernel TCP, TCP_NODELAY, busy-poll | check %s\n",
              o.kind == Kind::kLat ? "ping-pong latency" : "stream bandwidth", o.host.c_str(),
              o.port, o.verify ? "on (timings include it)" : "off");
  print_table_head(o.kind, "half round trip (ping-pong)", ": one stream", "acknowledges");
}

RowTags row_tags(const RunOptions& o) {
  return {.csv = o.csv, .tool = "tcp_baseline", .op = "tcp", .depth = 1, .verify = o.verify};
}

// --- the two roles ---------------------------------------------------------

void serve_size(Conn& c, const Begin& b, Mismatches& mism) {
  MsgBuffer buf(b.size);
  const uint8_t ready = 1;
  c.send_all(&ready, 1);
  const uint64_t before = mism.count();
  for (uint64_t k = 0; k < b.total; ++k) {
    c.recv_exact(buf.data(), b.size, "a message");
    if (b.verify) mism.check("message", b.size, k, buf.data(), expect_of(b.size, k));
    if (b.kind == static_cast<uint8_t>(Kind::kLat)) c.send_all(buf.data(), b.size);
  }
  const Ack ack{mism.count() - before};
  c.send_all(&ack, sizeof(ack));
}

int run_server(const RunOptions& o, Clock::time_point deadline) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (lfd < 0 || ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
    die(kExitError, "socket: %s", std::strerror(errno));
  const sockaddr_in a = any_address(o.port);
  if (::bind(lfd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) < 0 || ::listen(lfd, 4) < 0)
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

int connect_to(const RunOptions& o, Clock::time_point deadline) {
  const sockaddr_in a = resolve_or_die(o.host, o.port);
  for (;;) {  // the server may not be listening yet
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die(kExitError, "socket: %s", std::strerror(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) return fd;
    const int err = errno;
    ::close(fd);
    if (err != ECONNREFUSED)
      die(kExitError, "connect to %s:%u: %s", o.host.c_str(), o.port, std::strerror(err));
    if (Clock::now() > deadline) die(kExitError, "timeout waiting for the server to listen");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<uint64_t> resolve_sizes(const RunOptions& o) {
  if (o.all_sizes) {
    std::vector<uint64_t> v;
    for (uint64_t s = 1; s <= kAllSizesMax; s *= 2) v.push_back(s);
    return v;
  }
  if (!o.sizes.empty()) return o.sizes;
  return {o.kind == Kind::kLat ? uint64_t{8} : uint64_t{65536}};
}

int run_client(const RunOptions& o, Clock::time_point deadline) {
  const std::vector<uint64_t> sizes = resolve_sizes(o);
  Conn c(connect_to(o, deadline), deadline);
  print_header(o);
  Mismatches mism("client");
  for (uint64_t size : sizes) {
    const IterPlan plan = plan_iterations(o, size);
    const uint64_t warm = plan.warm, n = plan.total - warm;
    const Begin b{.kind = static_cast<uint8_t>(o.kind), .verify = o.verify, .size = size,
                  .total = n + warm};
    c.send_all(&b, sizeof(b));
    uint8_t ready;
    c.recv_exact(&ready, 1, "the server to be ready");
    MsgBuffer out(size), in(size);
    std::vector<double> samples;
    samples.reserve(n);
    Clock::time_point t_start = Clock::now();
    for (uint64_t k = 0; k < b.total; ++k) {
      if (o.verify) fill(out.data(), size, expect_of(size, k));
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
      if (o.verify) mism.check("echo", size, k, in.data(), expect_of(size, k));
    }
    Ack ack;
    c.recv_exact(&ack, sizeof(ack), "the server's acknowledgement");
    if (o.kind == Kind::kBw) {
      print_bw_row(row_tags(o), size, n, seconds_since(t_start));
    } else {
      print_lat_row(row_tags(o), size, n, summarize(samples, 0.5));
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
  using namespace softrdma;
  tools::set_tool_name("tcp_baseline");
  const tools::RunOptions o = bench::parse_args(argc, argv);
  const tools::Clock::time_point deadline = tools::deadline_after(o.timeout_s);
  return o.host.empty() ? bench::run_server(o, deadline) : bench::run_client(o, deadline);
}
