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

#include "stack/tests/mesh_common.h"
#include "stack/tests/mesh_requester.h"
#include "stack/tests/mesh_responder.h"

namespace softrdma::mesh {
namespace {

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
