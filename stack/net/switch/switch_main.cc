// softrdma-switch <interface>: owns the interface's NIC for the softrdma
// processes of this host (switch.h). Run as root, once per interface
// (systemd: softrdma-switch@<interface>.service). Idle, it sleeps in
// epoll on the NIC's socket, the ranks' kicks and the control socket.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "stack/common/settings.h"
#include "stack/net/switch/switch.h"

namespace softrdma::net::sw {

namespace {

using Clock = std::chrono::steady_clock;
// Busy polling for this long after the last frame: a reply usually comes
// back within it, and a wake-up costs more than the spin. It must cover a
// round trip through the peer host's switch and rank on a busy host (tens of
// microseconds): with a shorter window the switch sleeps between a request
// and its reply, and every frame pays a wake-up. Linux suggests the same
// 50 us for its own busy polling (net.core.busy_poll).
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr int kControlEvery = 1024;  // passes between control checks while busy
// The longest sleep; without an AF_XDP socket to wait on (never expected)
// or while NIC frames wait for a rank, the shorter one.
constexpr int kSleepMs = 100, kSleepBlindMs = 1;

}  // namespace

void Switch::sleep_until_work() {
  for (auto& r : ranks_)
    if (r->to_switch) r->to_switch->set_sleeping(true);
  bool work = false;
  for (auto& r : ranks_) {
    const uint8_t* d;
    uint32_t len;
    work |= r->to_switch && r->to_switch->peek(&d, &len) != 0;
  }
  // Frames waiting for a rank's ring: look again soon, whoever wakes us.
  if (!work) handle_events(nic_.fd >= 0 && waiting_ == 0 ? kSleepMs : kSleepBlindMs);
  for (auto& r : ranks_)
    if (r->to_switch) r->to_switch->set_sleeping(false);
}

void Switch::run(const volatile bool* stop) {
  Clock::time_point last = Clock::now();
  unsigned pass = 0;
  while (!*stop) {
    const int moved = nic_to_ranks() + ranks_to_nic();
    const Clock::time_point now = Clock::now();
    if (moved > 0) last = now;
    if (++pass % kControlEvery == 0) handle_events(0);
    if (moved == 0) {
      if (now - last > kSpin) {
        sleep_until_work();
        last = Clock::now();
      } else {
        // Spinning, but the ranks come first: on a host with fewer cores
        // than busy processes, the frame we wait for is theirs to send.
        sched_yield();
      }
    }
    sweep_dropped();
  }
}

}  // namespace softrdma::net::sw

namespace {
volatile bool g_stop = false;
void on_signal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: softrdma-switch <interface>\n"
                 "Owns <interface>'s NIC (a packet socket with the kernel's offloads, or\n"
                 "AF_XDP with FI_SOFTRDMA_NIC=af_xdp) for every softrdma process on this\n"
                 "host, which then run as ordinary users. Run as root, one per interface.\n");
    return 2;
  }
  if (const std::string bad = softrdma::settings::check_env(); !bad.empty()) {
    std::fprintf(stderr, "%s", bad.c_str());
    return 2;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "softrdma-switch: needs root (packet sockets, BPF programs, %s)\n",
                 softrdma::net::sw::kDir);
    return 1;
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  softrdma::net::sw::Switch s;
  std::string err;
  if (int rc = s.open(argv[1], &err); rc < 0) {
    std::fprintf(stderr, "softrdma-switch: %s\n", err.c_str());
    return 1;
  }
  std::fprintf(stderr, "softrdma-switch: serving %s at %s\n", argv[1],
               softrdma::net::sw::ctl_path(argv[1]).c_str());
  s.run(&g_stop);
  const auto& c = s.counters();
  std::fprintf(stderr,
               "softrdma-switch: %s: nic_rx=%llu to_rank=%llu from_rank=%llu drop_no_rank=%llu "
               "drop_rank_full=%llu drop_refused=%llu rank_waits=%llu rank_kicks=%llu ranks=%llu\n",
               argv[1], (unsigned long long)c.nic_rx, (unsigned long long)c.to_rank,
               (unsigned long long)c.from_rank, (unsigned long long)c.drop_no_rank,
               (unsigned long long)c.drop_rank_full, (unsigned long long)c.drop_refused,
               (unsigned long long)c.rank_waits, (unsigned long long)c.rank_kicks,
               (unsigned long long)c.ranks_attached);
  return 0;
}
