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
      {"addr", FI_PARAM_STRING, "IPv4 address endpoints bind to (default 127.0.0.1)"},
      {"connect_timeout_ms", FI_PARAM_INT,
       "How long fi_connect retries while a DPDK mesh link to a live peer comes up (default 30000)"},
      {"crc", FI_PARAM_BOOL, "Ask for MPA CRC32c (default 1; on if either side asks)"},
      {"markers", FI_PARAM_BOOL, "Ask the peer to insert MPA markers (default 0)"},
      {"mpa_rev", FI_PARAM_INT, "MPA revision to offer: 1 or 2 (RFC 6581, default)"},
      {"rtr", FI_PARAM_STRING, "RFC 6581 ready-to-receive message: write|read|send|none"},
      {"tx_size", FI_PARAM_SIZE_T, "Default transmit queue depth (default 256)"},
      {"rx_size", FI_PARAM_SIZE_T, "Default receive queue depth (default 256)"},
      {"inject_size", FI_PARAM_SIZE_T, "Largest fi_inject payload (default 512)"},
  };
  for (const P& p : kParams) fi_param_define(&g_prov, p.name, p.type, p.help);
}

}  // namespace softrdma::prov

extern "C" FI_EXT_INI {
  softrdma::prov::define_params();
  return &softrdma::prov::g_prov;
}
