// Provider entry: fi_prov_ini, the provider record and its parameters. Kept
// cheap: libfabric calls this in every process that touches it (fi_info,
// every MPI rank); the engine and its transport start at fi_fabric.
#include "prov/prov.h"

namespace softrdma::prov {

struct fi_provider g_prov = {
    .version = FI_VERSION(0, 1),
    .fi_version = FI_VERSION(1, 17),
    .context = {},
    .name = "softrdma",
    .getinfo = getinfo,
    .fabric = fabric_open,
    .cleanup = [] {},
};

// FI_SOFTRDMA_* parameters, listed by `fi_info -e`. The engine reads the
// same variables itself (EngineConfig::from_env); defining them here makes
// them visible and documented through libfabric.
static void define_params() {
  struct P {
    const char* name;
    enum fi_param_type type;
    const char* help;
  };
  static const P kParams[] = {
      {"transport", FI_PARAM_STRING, "Byte-stream transport under iWARP: dpdk (default) | kernel"},
      {"addr", FI_PARAM_STRING,
       "IPv4 address[/prefix] of this process on a configured DPDK port (FI_SOFTRDMA_DEVARGS); "
       "without one, the on-host memif mesh gives each process its own"},
      {"devargs", FI_PARAM_STRING,
       "DPDK port instead of the on-host memif mesh: net_af_packet0,iface=veth0 | "
       "net_af_xdp0,iface=... | a PCI address"},
      {"gateway", FI_PARAM_STRING, "IPv4 gateway of the configured port"},
      {"netns", FI_PARAM_STRING, "Network namespace the configured port's interface lives in"},
      {"mtu", FI_PARAM_INT, "Link MTU of the memif mesh (default 9000)"},
      {"mbufs", FI_PARAM_INT, "DPDK mbufs in the process's pool (default 16384)"},
      {"hugepages", FI_PARAM_BOOL, "Let DPDK use hugepages (default 0: --no-huge)"},
      {"eal_args", FI_PARAM_STRING, "Extra DPDK EAL arguments"},
      {"threading", FI_PARAM_STRING,
       "c2 (default): progress in the application's calls; c1: an I/O thread; c3: a receive "
       "thread, the application transmits"},
      {"watchdog_us", FI_PARAM_INT,
       "c2: progress on a helper thread when the application has not for this long (default 1000; 0 off)"},
      {"pcap", FI_PARAM_STRING, "Write every frame of the DPDK path to this pcap file"},
      {"faults", FI_PARAM_STRING,
       "Inject faults on the DPDK path: drop=P,dup=P,reorder=P,corrupt=P,seed=N"},
      {"rundir", FI_PARAM_STRING, "Directory of the on-host mesh's rendezvous sockets"},
      {"debug", FI_PARAM_BOOL, "Print connection and link set-up details to stderr"},
      {"connect_timeout_ms", FI_PARAM_INT,
       "How long fi_connect retries while a DPDK mesh link to a live peer comes up (default 30000)"},
      {"crc", FI_PARAM_BOOL, "Ask for MPA CRC32c (default 1; on if either side asks)"},
      {"markers", FI_PARAM_BOOL, "Ask the peer to insert MPA markers (default 0)"},
      {"mpa_rev", FI_PARAM_INT, "MPA revision to offer: 1 or 2 (RFC 6581, default)"},
      {"rtr", FI_PARAM_STRING, "RFC 6581 ready-to-receive message: write|read|send|none"},
      {"tx_size", FI_PARAM_SIZE_T, "Default transmit queue depth (default 256)"},
      {"rx_size", FI_PARAM_SIZE_T, "Default receive queue depth (default 256)"},
      {"inject_size", FI_PARAM_SIZE_T, "Largest fi_inject payload (default 512)"},
      {"stats", FI_PARAM_STRING,
       "Write the engine's counters (docs/counters.md) when a fabric closes: stderr or a "
       "file to append to; also fi_open_ops(FI_SOFTRDMA_COUNTERS_OPS)"},
  };
  for (const P& p : kParams) fi_param_define(&g_prov, p.name, p.type, p.help);
}

}  // namespace softrdma::prov

extern "C" FI_EXT_INI {
  softrdma::prov::define_params();
  return &softrdma::prov::g_prov;
}
