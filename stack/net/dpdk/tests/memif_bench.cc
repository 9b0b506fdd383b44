// Raw memif frame ping-pong and bulk throughput through open_dpdk_port, no
// TCP/IP stack: the floor under whatever the stack adds.
//
//   dpdk_memif_bench inproc pp|bulk               two ports, two threads
//   dpdk_memif_bench server|client pp|bulk SOCK   one port each, run both
//
// Options after the mode: iters=N (pp round trips, default 20000),
// bytes=N (bulk, default 1 GiB), size=N (bulk frame, default 1514),
// mtu=N (port MTU, default 1500; size up to mtu + 14),
// cpu=N (pin the measuring thread; inproc pins the peer to cpu+1).
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stack/net/dpdk/eal.h"
#include "stack/net/dpdk/port.h"

using softrdma::net::FrameLink;
using softrdma::net::RxFrame;

namespace {

constexpr uint16_t kEtherType = 0x88b5;  // IEEE local experimental
constexpr uint8_t kKindData = 1, kKindDone = 2;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

struct Config {
  std::string role, test, sock;
  long iters = 20000, warmup = 1000;
  uint64_t bytes = uint64_t{1} << 30;
  uint32_t size = 1514;
  uint32_t mtu = 1500;
  int cpu = -1;
};

bool send_frame(FrameLink& l, uint32_t len, uint8_t kind, bool flush = true) {
  void* h;
  uint8_t* p = l.tx_begin(len, &h);
  if (p == nullptr) return false;
  std::memset(p, 0xff, 6);
  std::memcpy(p + 6, l.mac(), 6);
  p[12] = kEtherType >> 8;
  p[13] = kEtherType & 0xff;
  p[14] = kind;
  l.tx_commit(h, len);
  if (flush) l.tx_flush();
  return true;
}

bool wait_up(FrameLink& l) {
  const uint64_t end = now_ns() + 10'000'000'000;
  while (!l.link_up())
    if (now_ns() > end) return false;
  return true;
}

// Echoes every frame back until a kKindDone arrives.
void echo_loop(FrameLink& l) {
  RxFrame f[32];
  for (;;) {
    const int n = l.rx_burst(f, 32);
    bool done = false;
    for (int i = 0; i < n; ++i) {
      done |= f[i].data[14] == kKindDone;
      send_frame(l, f[i].len, f[i].data[14], false);
      l.rx_release(f[i].handle);
    }
    if (n) l.tx_flush();
    if (done) return;
  }
}

void pingpong_client(FrameLink& l, const Config& c) {
  RxFrame f[32];
  std::vector<uint64_t> rtt;
  rtt.reserve(c.iters);
  for (long i = 0; i < c.warmup + c.iters; ++i) {
    uint64_t t0;
    int n;
    // A memif server's first frames are lost until the client polls once,
    // so a ping unanswered for 10 ms is sent again (only ever in warm-up).
    do {
      t0 = now_ns();
      send_frame(l, 64, kKindData);
      while ((n = l.rx_burst(f, 32)) == 0 && now_ns() - t0 < 10'000'000) {
      }
    } while (n == 0);
    const uint64_t t1 = now_ns();
    for (int k = 0; k < n; ++k) l.rx_release(f[k].handle);
    if (i >= c.warmup) rtt.push_back(t1 - t0);
  }
  send_frame(l, 64, kKindDone);
  std::sort(rtt.begin(), rtt.end());
  std::printf("pp 64B: %ld round trips, median %.2f us, p99 %.2f us, min %.2f us\n", c.iters,
              rtt[rtt.size() / 2] / 1e3, rtt[rtt.size() * 99 / 100] / 1e3, rtt[0] / 1e3);
}

// Sender side of bulk: frames as fast as the ring takes them, then kKindDone
// repeated until the receiver answers with its own kKindDone.
void bulk_sender(FrameLink& l, const Config& c) {
  const uint64_t frames = c.bytes / c.size;
  for (uint64_t i = 0; i < frames; ++i) {
    while (!send_frame(l, c.size, kKindData, false)) l.tx_flush();
  }
  l.tx_flush();
  RxFrame f[32];
  for (;;) {
    send_frame(l, 64, kKindDone);
    const uint64_t end = now_ns() + 1'000'000;
    while (now_ns() < end) {
      const int n = l.rx_burst(f, 32);
      bool done = false;
      for (int i = 0; i < n; ++i) {
        done |= f[i].data[14] == kKindDone;
        l.rx_release(f[i].handle);
      }
      if (done) {
        const auto k = l.counters();
        std::printf("bulk sender: %lu frames sent, %lu dropped\n", (unsigned long)k.tx_packets,
                    (unsigned long)k.tx_dropped);
        return;
      }
    }
  }
}

void bulk_receiver(FrameLink& l, const Config& c) {
  RxFrame f[64];
  uint64_t bytes = 0, frames = 0, t0 = 0;
  for (;;) {
    const int n = l.rx_burst(f, 64);
    bool done = false;
    for (int i = 0; i < n; ++i) {
      if (f[i].data[14] == kKindDone) {
        done = true;
      } else {
        if (t0 == 0) t0 = now_ns();
        bytes += f[i].len;
        ++frames;
      }
      l.rx_release(f[i].handle);
    }
    if (done) break;
  }
  const double s = (now_ns() - t0) / 1e9;
  send_frame(l, 64, kKindDone);
  std::printf("bulk %u B frames: %lu frames, %.1f MB in %.3f s = %.1f Gbit/s (%.2f Mpps)\n", c.size,
              (unsigned long)frames, bytes / 1e6, s, bytes * 8 / s / 1e9, frames / s / 1e6);
  const auto k = l.counters();
  std::printf("receiver counters: rx %lu dropped %lu\n", (unsigned long)k.rx_packets,
              (unsigned long)k.rx_dropped);
}

std::unique_ptr<FrameLink> open_port(const std::string& role, const std::string& sock, int idx,
                                     uint32_t mtu) {
  softrdma::net::PortOptions o;
  o.mtu = mtu;
  o.devargs = "net_memif" + std::to_string(idx) + ",role=" + role + ",socket=" + sock + ",id=0";
  o.start_timeout_ms = 10000;
  std::string err;
  auto l = softrdma::net::open_dpdk_port(o, &err);
  if (!l) std::fprintf(stderr, "open %s: %s\n", o.devargs.c_str(), err.c_str());
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s inproc|server|client pp|bulk [SOCK] [k=v...]\n", argv[0]);
    return 2;
  }
  Config c;
  c.role = argv[1];
  c.test = argv[2];
  int a = 3;
  c.sock = "/run/softrdma/bench-" + std::to_string(getpid()) + ".sock";
  if (c.role != "inproc" && a < argc && std::strchr(argv[a], '=') == nullptr) c.sock = argv[a++];
  for (; a < argc; ++a) {
    std::string kv = argv[a];
    const auto eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "iters") c.iters = std::stol(v);
    if (k == "bytes") c.bytes = std::stoull(v);
    if (k == "size") c.size = std::stoul(v);
    if (k == "mtu") c.mtu = std::stoul(v);
    if (k == "cpu") c.cpu = std::stoi(v);
  }
  softrdma::net::EalOptions eo;
  eo.memory_mb = 512;
  if (softrdma::net::dpdk_eal_init(eo) != 0) return 1;
  pin(c.cpu);
  softrdma::net::dpdk_thread_register();

  if (c.role == "inproc") {
    auto server = open_port("server", c.sock, 0, c.mtu);
    auto client = open_port("client", c.sock, 1, c.mtu);
    if (!server || !client || !wait_up(*server) || !wait_up(*client)) return 1;
    std::thread peer([&] {
      pin(c.cpu >= 0 ? c.cpu + 1 : -1);
      softrdma::net::dpdk_thread_register();
      if (c.test == "pp")
        echo_loop(*client);
      else
        bulk_receiver(*client, c);
    });
    if (c.test == "pp")
      pingpong_client(*server, c);
    else
      bulk_sender(*server, c);
    peer.join();
    return 0;
  }
  auto link = open_port(c.role, c.sock, 0, c.mtu);
  if (!link || !wait_up(*link)) return 1;
  const bool measuring = c.role == "client";
  if (c.test == "pp")
    measuring ? pingpong_client(*link, c) : echo_loop(*link);
  else
    measuring ? bulk_sender(*link, c) : bulk_receiver(*link, c);
  // Let the peer see the last frames before the link goes away.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return 0;
}
