#include "stack/net/dpdk/eal.h"

#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "stack/common/settings.h"

namespace softrdma::net {
namespace {

enum class EalState { kNone, kDone, kCleanedUp };

struct Eal {
  std::mutex mu;
  EalState state = EalState::kNone;
  int result = 0;
  std::vector<std::string> args;  // backs argv: EAL may keep the pointers
  std::vector<char*> argv;
  std::atomic<int> holds{0};
};

Eal& eal() {
  static Eal* e = new Eal;  // never destroyed: ports may close during exit
  return *e;
}

std::set<pid_t> thread_ids() {
  std::set<pid_t> ids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ids.insert(static_cast<pid_t>(std::atoi(e->d_name)));
    closedir(d);
  }
  return ids;
}

std::vector<std::string> build_args(const EalOptions& o, int lcore_cpu) {
  std::vector<std::string> a = {"softrdma"};
  // One lcore (0, on the first CPU the caller may run on, whatever its
  // number); no -s/-S, so no service cores. The mapping only names the main
  // lcore: the caller's affinity is restored after init.
  a.push_back("--lcores=0@" + std::to_string(lcore_cpu));
  if (!o.hugepages) a.push_back("--no-huge");
  a.push_back("-m");
  a.push_back(std::to_string(o.memory_mb));
  if (!o.pci) a.push_back("--no-pci");
  // No shared config or hugepage files, so ranks never collide and a crash
  // leaves nothing behind. --no-huge means legacy memory, which EAL refuses
  // with --in-memory; --no-shconf is the part of it that applies.
  a.push_back(o.hugepages ? "--in-memory" : "--no-shconf");
  a.push_back("--no-telemetry");
  a.push_back("--file-prefix=softrdma-" + std::to_string(getpid()));
  if (!o.log_level.empty()) a.push_back("--log-level=" + o.log_level);
  std::istringstream extra(o.extra_args);
  for (std::string w; extra >> w;) a.push_back(w);
  return a;
}

}  // namespace

EalOptions EalOptions::from_env() {
  EalOptions o;
  o.extra_args = settings::get_string(settings::Id::kEalArgs);
  o.hugepages = settings::get_bool(settings::Id::kHugepages);
  const std::string d = settings::get_string(settings::Id::kDevargs);
  o.pci = !d.empty() && d.substr(0, 4) != "net_";
  // Only that device: the PCI scan must not touch the host's other NICs.
  if (o.pci && o.extra_args.find("-a ") == std::string::npos &&
      o.extra_args.find("--allow") == std::string::npos)
    o.extra_args += std::string(o.extra_args.empty() ? "" : " ") + "-a " + d;
  return o;
}

int dpdk_eal_init(const EalOptions& options) {
  Eal& e = eal();
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.state == EalState::kDone) return e.result;
  if (e.state == EalState::kCleanedUp) return -ESHUTDOWN;

  cpu_set_t saved;
  CPU_ZERO(&saved);
  if (pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) != 0) {
    e.state = EalState::kDone;
    e.result = -EINVAL;
    return e.result;
  }
  int first_cpu = 0;
  while (first_cpu < CPU_SETSIZE && !CPU_ISSET(first_cpu, &saved)) ++first_cpu;

  e.args = build_args(options, first_cpu);
  for (std::string& a : e.args) e.argv.push_back(a.data());
  e.argv.push_back(nullptr);

  // EAL parses with getopt; the host program may be mid-way through its own.
  const int saved_optind = optind, saved_opterr = opterr, saved_optopt = optopt;
  char* const saved_optarg = optarg;
  // Logs to stderr only: EAL's default stream also copies to syslog and
  // writes to stdout, which belongs to the application.
  rte_openlog_stream(stderr);

  const std::set<pid_t> threads_before = thread_ids();
  const int rc = rte_eal_init(static_cast<int>(e.args.size()), e.argv.data());
  const int err = rte_errno;

  optind = saved_optind;
  opterr = saved_opterr;
  optopt = saved_optopt;
  optarg = saved_optarg;
  pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  // EAL's own threads (eal-intr-thread, which serves memif's control
  // channel) get the CPUs EAL left over; let them float like the caller.
  for (pid_t tid : thread_ids())
    if (!threads_before.count(tid)) sched_setaffinity(tid, sizeof(saved), &saved);
  // EAL makes /var/run/dpdk/<prefix> even without shared config; it stays
  // empty (no multi-process, no telemetry), so do not leave one per run.
  rmdir(rte_eal_get_runtime_dir());

  e.state = EalState::kDone;
  e.result = rc >= 0 ? 0 : (err > 0 ? -err : -EINVAL);
  return e.result;
}

int dpdk_eal_cleanup() {
  Eal& e = eal();
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.state != EalState::kDone) return 0;
  if (e.holds.load() != 0) return -EBUSY;
  e.state = EalState::kCleanedUp;
  if (e.result != 0) return 0;
  const int rc = rte_eal_cleanup();
  return rc < 0 ? -rte_errno : 0;
}

bool dpdk_eal_hold() {
  Eal& e = eal();
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.state != EalState::kDone || e.result != 0) return false;
  e.holds.fetch_add(1);
  return true;
}

void dpdk_eal_release() { eal().holds.fetch_sub(1); }

int dpdk_thread_register() {
  if (rte_lcore_id() != LCORE_ID_ANY) return 0;
  {
    Eal& e = eal();
    std::lock_guard<std::mutex> lock(e.mu);
    if (e.state != EalState::kDone || e.result != 0) return -ENODEV;
  }
  return rte_thread_register() == 0 ? 0 : -rte_errno;
}

void dpdk_thread_unregister() {
  if (rte_lcore_id() != LCORE_ID_ANY && rte_lcore_id() != rte_get_main_lcore())
    rte_thread_unregister();
}

std::vector<std::string> dpdk_eal_args() {
  Eal& e = eal();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.args;
}

}  // namespace softrdma::net
