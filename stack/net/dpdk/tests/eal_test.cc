// EAL start-up from a library: once per process, thread-safe, and leaving
// the process as it was (CPU affinity, signal dispositions).
//
// One test body on purpose: EAL state is per process, so the steps below
// depend on their order.
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_service.h>

#include "stack/net/dpdk/eal.h"

namespace softrdma::net {
namespace {

cpu_set_t thread_affinity() {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(s), &s), 0);
  return s;
}

bool same_action(const struct sigaction& a, const struct sigaction& b) {
  return a.sa_handler == b.sa_handler && a.sa_flags == b.sa_flags;
}

bool has_arg(const std::vector<std::string>& args, const std::string& a) {
  return std::find(args.begin(), args.end(), a) != args.end();
}

TEST(DpdkEal, InitOnceKeepsAffinityAndSignalsThenCleansUp) {
  ASSERT_EQ(dpdk_eal_args().size(), 0u);
  ASSERT_FALSE(dpdk_eal_hold());  // nothing to hold before init

  // Every CPU this process may use, so that EAL's pinning would show.
  cpu_set_t wide;
  CPU_ZERO(&wide);
  ASSERT_EQ(sched_getaffinity(0, sizeof(wide), &wide), 0);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(wide), &wide), 0);
  const int ncpu = CPU_COUNT(&wide);

  // A handler of our own for SIGTERM, default for SIGINT: both must survive.
  struct sigaction mine {};
  mine.sa_handler = [](int) {};
  ASSERT_EQ(sigaction(SIGTERM, &mine, nullptr), 0);
  std::vector<struct sigaction> before(NSIG);
  for (int s = 1; s < NSIG; ++s) sigaction(s, nullptr, &before[s]);

  // Two threads race to initialise; both see one result and keep affinity.
  const cpu_set_t main_before = thread_affinity();
  int other_result = 1;
  bool other_affinity_kept = false;
  std::thread other([&] {
    const cpu_set_t b = thread_affinity();
    other_result = dpdk_eal_init();
    const cpu_set_t a = thread_affinity();
    other_affinity_kept = CPU_EQUAL(&a, &b);
  });
  const int result = dpdk_eal_init();
  other.join();
  ASSERT_EQ(result, 0);
  EXPECT_EQ(other_result, 0);
  EXPECT_TRUE(other_affinity_kept);
  const cpu_set_t main_after = thread_affinity();
  EXPECT_TRUE(CPU_EQUAL(&main_before, &main_after))
      << "CPUs before " << CPU_COUNT(&main_before) << ", after " << CPU_COUNT(&main_after);
  EXPECT_EQ(CPU_COUNT(&main_after), ncpu);

  // EAL's own threads (eal-intr-thread) float over the same CPUs.
  int threads = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      cpu_set_t t;
      CPU_ZERO(&t);
      ASSERT_EQ(sched_getaffinity(std::atoi(e->d_name), sizeof(t), &t), 0);
      EXPECT_TRUE(CPU_EQUAL(&t, &wide)) << "thread " << e->d_name;
      ++threads;
    }
    closedir(d);
  }
  EXPECT_GE(threads, 2);

  // Different options later change nothing and return the first result.
  EalOptions other_options;
  other_options.memory_mb = 1;
  other_options.extra_args = "--this-is-not-an-eal-option";
  EXPECT_EQ(dpdk_eal_init(other_options), 0);

  for (int s = 1; s < NSIG; ++s) {
    struct sigaction now {};
    sigaction(s, nullptr, &now);
    EXPECT_TRUE(same_action(before[s], now)) << "signal " << s << " (" << strsignal(s) << ")";
  }
  struct sigaction term {}, intr{};
  sigaction(SIGTERM, nullptr, &term);
  sigaction(SIGINT, nullptr, &intr);
  EXPECT_EQ(term.sa_handler, mine.sa_handler);
  EXPECT_EQ(intr.sa_handler, SIG_DFL);

  // One lcore on the first allowed CPU, no service cores, quiet, private.
  const auto args = dpdk_eal_args();
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &wide)) ++first_cpu;
  EXPECT_TRUE(has_arg(args, "--lcores=0@" + std::to_string(first_cpu)));
  for (const char* a : {"--no-huge", "--no-pci", "--no-shconf", "--no-telemetry"})
    EXPECT_TRUE(has_arg(args, a)) << a;
  EXPECT_TRUE(has_arg(args, "--file-prefix=softrdma-" + std::to_string(getpid())));
  EXPECT_EQ(rte_lcore_count(), 1u);
  EXPECT_EQ(rte_service_lcore_count(), 0);
  EXPECT_EQ(rte_eal_process_type(), RTE_PROC_PRIMARY);

  // A registered thread gets an lcore id and keeps its affinity.
  std::thread reg([&] {
    const cpu_set_t b = thread_affinity();
    EXPECT_EQ(rte_lcore_id(), LCORE_ID_ANY);
    EXPECT_EQ(dpdk_thread_register(), 0);
    EXPECT_NE(rte_lcore_id(), LCORE_ID_ANY);
    EXPECT_EQ(dpdk_thread_register(), 0);
    const cpu_set_t a = thread_affinity();
    EXPECT_TRUE(CPU_EQUAL(&a, &b));
    dpdk_thread_unregister();
    EXPECT_EQ(rte_lcore_id(), LCORE_ID_ANY);
  });
  reg.join();

  // Cleanup waits for holders, then EAL is gone for good.
  ASSERT_TRUE(dpdk_eal_hold());
  EXPECT_EQ(dpdk_eal_cleanup(), -EBUSY);
  dpdk_eal_release();
  EXPECT_EQ(dpdk_eal_cleanup(), 0);
  EXPECT_EQ(dpdk_eal_init(), -ESHUTDOWN);
  EXPECT_FALSE(dpdk_eal_hold());

  signal(SIGTERM, SIG_DFL);
}

}  // namespace
}  // namespace softrdma::net
