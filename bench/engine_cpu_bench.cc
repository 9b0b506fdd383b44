// The engine's CPU per small round trip: two QPs over an lwIP pipe link
// (memif-like: lent frames, no checksums) in one process, progressed by ONE
// thread, play 8 B ping-pong with Send/Recv and with RDMA Write. The CPU
// time of the whole process (CLOCK_PROCESS_CPUTIME_ID; no watchdog threads)
// per round trip covers both ends, so it is the cost of two half round trips
// of one engine. Prints the median of the repetitions.
//
//   engine_cpu_bench [iterations per repetition (20000)] [repetitions (7)] [two|one]
//
// two (default): each QP in an Engine of its own, and each engine progressed
// in turn; one: both QPs in one Engine (as a process has one), progressed
// once per turn.
#include <arpa/inet.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "stack/engine.h"
#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/lwip/tests/pipe_link.h"

namespace {

using namespace softrdma;

in_addr ip4(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a;
}

double cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

double wall_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "engine_cpu_bench: %s\n", what);
  std::exit(1);
}

struct Side {
  std::shared_ptr<Engine> eng;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(64, 0);
  Mr* mr = nullptr;
  Wc wc[16];  // reap's: a member, so that a poll does not zero 640 B each time

  // An engine of its own, sending from ip; or a share of `shared`.
  Side(const char* ip, std::shared_ptr<Engine> shared) : eng(std::move(shared)) {
    EngineConfig cfg;
    cfg.watchdog_us = 0;  // only the polling thread spends CPU
    if (!eng) eng = std::make_shared<Engine>(cfg, net::make_lwip_transport({.source = ip4(ip)}));
    if (!eng->ok()) die("no lwIP transport");
    pd = eng->alloc_pd();
    cq = eng->create_cq(1024);
    qp = eng->create_qp({.pd = pd, .send_cq = cq, .recv_cq = cq});
    mr = eng->reg_mr(pd, buf.data(), buf.size(),
                     kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  }
  Sge sge(size_t off, uint32_t len) const {
    return Sge{reinterpret_cast<uint64_t>(buf.data() + off), len, mr->stag};
  }
  void post_recv() {
    RecvWr rw{.wr_id = 1, .num_sge = 1};
    rw.sg_list[0] = sge(32, 8);
    if (eng->post_recv(qp, rw) != 0) die("post_recv");
  }
  void send8(uint64_t seq) {
    std::memcpy(buf.data(), &seq, 8);
    SendWr sw{.wr_id = 2, .opcode = WrOpcode::kSend, .num_sge = 1};
    sw.sg_list[0] = sge(0, 8);
    if (eng->post_send(qp, sw) != 0) die("post_send");
  }
  void write8(uint64_t seq, const Side& peer) {
    std::memcpy(buf.data(), &seq, 8);
    SendWr ww{.wr_id = 3, .opcode = WrOpcode::kWrite, .num_sge = 1,
              .remote_addr = reinterpret_cast<uint64_t>(peer.buf.data() + 32),
              .rkey = peer.mr->stag};
    ww.sg_list[0] = sge(0, 8);
    if (eng->post_send(qp, ww) != 0) die("post_send (write)");
  }
  // Completions reaped; true if a receive completed.
  bool reap() {
    bool recv = false;
    for (int n; (n = eng->poll_cq(cq, wc, 16)) > 0;) {
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess) die("work completion failed");
        recv |= wc[i].opcode == WcOpcode::kRecv;
      }
    }
    return recv;
  }
  uint64_t landed() const {
    uint64_t v;
    std::memcpy(&v, buf.data() + 32, 8);
    return v;
  }
};

// One turn of progress: each engine once.
void progress(Side& a, Side& b) {
  a.eng->progress(0);
  if (b.eng != a.eng) b.eng->progress(0);
}

void connect(Side& a, Side& b) {
  Listener* l = nullptr;
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr = ip4("10.9.0.2");
  if (b.eng->listen(at, 4, &l) != 0) die("listen");
  if (a.eng->connect(a.qp, b.eng->listen_addr(l), nullptr, 0) != 0) die("connect");
  bool a_up = false, b_up = false;
  const double end = wall_ns() + 10e9;
  auto events = [&](Engine* e) {
    CmEvent ev;
    while (e->poll_cm(&ev)) {
      if (ev.type == CmEventType::kConnectRequest) b.eng->accept(ev.req, b.qp, nullptr, 0);
      if (ev.type != CmEventType::kEstablished) continue;
      a_up |= ev.qp == a.qp;
      b_up |= ev.qp == b.qp;
    }
  };
  while (!(a_up && b_up)) {
    if (wall_ns() > end) die("no connection");
    progress(a, b);
    events(a.eng.get());
    if (b.eng != a.eng) events(b.eng.get());
  }
}

// One repetition: iters round trips; returns {cpu ns, wall ns} per round trip.
template <typename Rt>
std::pair<double, double> measure(int iters, Rt&& round_trip) {
  const double c0 = cpu_ns(), w0 = wall_ns();
  for (int i = 0; i < iters; ++i) round_trip(static_cast<uint64_t>(i) + 1);
  return {(cpu_ns() - c0) / iters, (wall_ns() - w0) / iters};
}

void spin(Side& a, Side& b, const auto& done) {
  for (uint64_t n = 1; !done(); ++n) {
    progress(a, b);
    if (n % 1000000 == 0) die("round trip stalled");
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const char* what, int iters, int reps, auto&& round_trip) {
  measure(iters / 10 + 1, round_trip);  // warm-up
  std::vector<double> cpu, wall;
  for (int r = 0; r < reps; ++r) {
    auto [c, w] = measure(iters, round_trip);
    cpu.push_back(c);
    wall.push_back(w);
  }
  std::printf("%-14s cpu/rt median %7.0f ns  (min %7.0f)  wall/rt median %7.0f ns\n", what,
              median(cpu), *std::min_element(cpu.begin(), cpu.end()), median(wall));
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  const std::string mode = argc > 3 ? argv[3] : "two";
  if (iters <= 0 || reps <= 0 || (mode != "one" && mode != "two"))
    die("usage: engine_cpu_bench [iterations] [repetitions] [two|one]");
  auto [e0, e1] = net::testing::make_pipe_pair(net::testing::PipeOptions{});
  net::LwipStack& s = net::LwipStack::get();
  net::LwipLinkOptions lo;
  lo.checksums = net::LinkChecksums::kNone;
  const in_addr mask = ip4("255.255.255.0");
  const int l0 = s.add_link(std::move(e0), ip4("10.9.0.1"), mask, in_addr{}, lo);
  const int l1 = s.add_link(std::move(e1), ip4("10.9.0.2"), mask, in_addr{}, lo);
  if (l0 < 0 || l1 < 0) die("add_link");
  if (s.add_route(ip4("10.9.0.2"), 32, l0) != 0 || s.add_route(ip4("10.9.0.1"), 32, l1) != 0)
    die("add_route");

  std::shared_ptr<Engine> one;
  if (mode == "one") {
    EngineConfig cfg;
    cfg.watchdog_us = 0;
    one = std::make_shared<Engine>(cfg, net::make_lwip_transport());
  }
  Side a("10.9.0.1", one), b("10.9.0.2", one);
  connect(a, b);

  a.post_recv();
  b.post_recv();
  report("send 8 B", iters, reps, [&](uint64_t seq) {
    a.send8(seq);
    bool b_got = false, a_got = false;
    spin(a, b, [&] {
      if (!b_got && b.reap()) {
        b_got = true;
        b.post_recv();
        b.send8(seq);
      }
      if (b_got && a.reap()) a_got = true;
      return a_got;
    });
    a.post_recv();
  });
  a.reap();
  b.reap();

  report("write 8 B", iters, reps, [&](uint64_t seq) {
    a.write8(seq, b);
    bool b_got = false;
    spin(a, b, [&] {
      a.reap();
      b.reap();
      if (!b_got && b.landed() == seq) {
        b_got = true;
        b.write8(seq, a);
      }
      return b_got && a.landed() == seq;
    });
  });
  return 0;
}
