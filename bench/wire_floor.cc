// The floor under any transport between two hosts: an 8-octet message
// bounced with no protocol at all, as a raw Ethernet frame on a packet
// socket (what a userspace stack on a packet socket can at best reach), and
// as kernel TCP on the same link, both sides busy-polling. Prints the median
// and 99th percentile half round trip in microseconds.
// usage: wire_floor raw pong|ping <interface> [round trips]
//        wire_floor tcp pong <port> | wire_floor tcp ping <address> <port> [round trips]
// raw needs CAP_NET_RAW (run it in the hosts' namespaces, as bench/wire_floor.sh does).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr uint16_t kEtherType = 0x88b5;  // IEEE 802 local experimental
constexpr int kWarmup = 1000;
constexpr size_t kMsg = 8;

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// A bounce endpoint: send kMsg octets, spin until kMsg arrive.
struct Endpoint {
  virtual ~Endpoint() = default;
  virtual void send() = 0;
  virtual bool recv() = 0;  // false: the peer is gone
};

class RawEndpoint final : public Endpoint {
 public:
  RawEndpoint(const char* ifname, bool pinger) {
    fd_ = ::socket(AF_PACKET, SOCK_RAW, htons(kEtherType));
    if (fd_ < 0) die("socket(AF_PACKET)");
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(kEtherType);
    a.sll_ifindex = static_cast<int>(if_nametoindex(ifname));
    if (a.sll_ifindex == 0) die(ifname);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) die("bind");
    const int one = 1;  // our own frames are not the peer's answer
    if (::setsockopt(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0)
      die("PACKET_IGNORE_OUTGOING");
    std::memset(frame_, 0xff, 6);  // broadcast: no neighbour table
    const uint8_t src[6] = {2, 0, 0, 0, 0, static_cast<uint8_t>(pinger ? 1 : 2)};
    std::memcpy(frame_ + 6, src, 6);  // a bridge drops a zero source
    frame_[12] = kEtherType >> 8;
    frame_[13] = kEtherType & 0xff;
  }
  ~RawEndpoint() override { ::close(fd_); }
  void send() override {
    if (::send(fd_, frame_, sizeof(frame_), 0) != sizeof(frame_)) die("send");
  }
  bool recv() override {
    uint8_t b[2048];
    while (::recv(fd_, b, sizeof(b), MSG_DONTWAIT) < static_cast<ssize_t>(14 + kMsg)) {
    }
    return true;
  }

 private:
  int fd_;
  uint8_t frame_[60] = {};  // the Ethernet minimum; the message rides in it
};

class TcpEndpoint final : public Endpoint {
 public:
  explicit TcpEndpoint(int fd) : fd_(fd) {
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~TcpEndpoint() override { ::close(fd_); }
  void send() override {
    const uint8_t m[kMsg] = {};
    if (::send(fd_, m, kMsg, MSG_NOSIGNAL) != static_cast<ssize_t>(kMsg)) die("send");
  }
  bool recv() override {
    uint8_t b[kMsg];
    for (size_t got = 0; got < kMsg;) {
      const ssize_t r = ::recv(fd_, b, kMsg - got, MSG_DONTWAIT);
      if (r == 0) return false;
      if (r > 0) got += static_cast<size_t>(r);
    }
    return true;
  }

 private:
  int fd_;
};

int tcp_listen_accept(int port) {
  const int l = ::socket(AF_INET, SOCK_STREAM, 0), one = 1;
  ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(l, 1) != 0)
    die("listen");
  const int fd = ::accept(l, nullptr, nullptr);
  if (fd < 0) die("accept");
  ::close(l);
  return fd;
}

int tcp_connect(const char* addr, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, addr, &a.sin_addr) != 1) die(addr);
  for (int tries = 0; tries < 500; ++tries) {  // the server may not listen yet
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    ::close(fd);
    ::usleep(10000);
  }
  die("connect");
}

// A count from the command line (default 20000), refused unless positive.
int round_trips(int argc, char** argv, int at) {
  if (argc <= at) return 20000;
  const int n = std::atoi(argv[at]);
  if (n <= 0) {
    std::fprintf(stderr, "wire_floor: round trips must be a positive number, not %s\n", argv[at]);
    std::exit(2);
  }
  return n;
}

void ping(Endpoint& e, int n) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> half(static_cast<size_t>(n));
  for (int i = -kWarmup; i < n; ++i) {
    const Clock::time_point t0 = Clock::now();
    e.send();
    e.recv();
    if (i >= 0)
      half[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2;
  }
  std::sort(half.begin(), half.end());
  std::printf("median %.2f us p99 %.2f us (half round trip, %d round trips)\n",
              half[half.size() / 2], half[half.size() * 99 / 100], n);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kind = argc > 2 ? argv[1] : "", role = argc > 2 ? argv[2] : "";
  if (kind == "raw" && argc >= 4 && (role == "ping" || role == "pong")) {
    const int n = role == "ping" ? round_trips(argc, argv, 4) : 0;
    RawEndpoint e(argv[3], role == "ping");
    if (role == "ping")
      ping(e, n);
    else
      for (;;) {
        e.recv();
        e.send();
      }
    return 0;
  }
  if (kind == "tcp" && role == "pong" && argc == 4) {
    TcpEndpoint e(tcp_listen_accept(std::atoi(argv[3])));
    while (e.recv()) e.send();
    return 0;
  }
  if (kind == "tcp" && role == "ping" && argc >= 5) {
    const int n = round_trips(argc, argv, 5);
    TcpEndpoint e(tcp_connect(argv[3], std::atoi(argv[4])));
    ping(e, n);
    return 0;
  }
  std::fprintf(
      stderr,
      "usage: wire_floor raw pong|ping <interface> [round trips]\n"
      "       wire_floor tcp pong <port> | wire_floor tcp ping <address> <port> [round trips]\n");
  return 2;
}
