// DPDK's environment (EAL) started from inside a library: at most once per
// process, on demand, without taking the process over. By default it uses
// no hugepages, no PCI scan, no shared runtime files and no telemetry; it
// installs no signal handlers and leaves the calling thread's CPU affinity
// as it found it (EAL pins its main thread to one core, and two MPI ranks
// must not end up sharing that core).
//
// Public API free of DPDK headers, so callers need none of libdpdk's flags.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace softrdma::net {

struct EalOptions {
  bool hugepages = false;             // else --no-huge (anonymous memory)
  bool pci = false;                   // else --no-pci
  size_t memory_mb = 256;             // -m
  std::string log_level = "*:error";  // --log-level (pattern:level)
  std::string extra_args;             // whitespace-separated, appended last

  // The defaults, changed by the environment: FI_SOFTRDMA_EAL_ARGS (extra
  // arguments, e.g. "-a 0000:3b:00.0"), FI_SOFTRDMA_HUGEPAGES=1, and PCI on
  // when FI_SOFTRDMA_DEVARGS names a PCI device rather than a vdev (net_*).
  static EalOptions from_env();
};

// Initialises the EAL once; thread-safe. Returns 0 or a negative errno, and
// every later call returns the first call's result whatever its options.
// Ports opened without an explicit init start it with EalOptions::from_env().
// After dpdk_eal_cleanup() it returns -ESHUTDOWN: DPDK cannot restart.
int dpdk_eal_init(const EalOptions& options = {});

// rte_eal_cleanup(); -EBUSY (and nothing done) while holds are taken, i.e.
// while ports are open. 0 if the EAL was never started.
int dpdk_eal_cleanup();

// Users of DPDK objects (open ports) hold the EAL so cleanup cannot pull
// memory from under them. dpdk_eal_hold fails (false) unless initialised.
bool dpdk_eal_hold();
void dpdk_eal_release();

// Gives the calling thread an EAL lcore id (rte_thread_register) so mbuf
// allocation and freeing go through the per-lcore mempool cache instead of
// the shared ring. Idempotent per thread; 0 or a negative errno. The thread's
// CPU affinity is not changed.
int dpdk_thread_register();
// Returns a registered thread's lcore id (there are RTE_MAX_LCORE, 128);
// call before such a thread exits.
void dpdk_thread_unregister();

// The argv given to rte_eal_init (empty before init), for logs and tests.
std::vector<std::string> dpdk_eal_args();

}  // namespace softrdma::net
