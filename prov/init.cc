// Provider entry: fi_prov_ini, the provider record and its parameters. Kept
// cheap: libfabric calls this in every process that touches it (fi_info,
// every MPI rank); the engine and its transport start at fi_fabric.
#include <cstdio>
#include <mutex>
#include <string>

#include "prov/prov.h"
#include "stack/common/settings.h"

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

// Every FI_SOFTRDMA_* setting, so that `fi_info -e` lists them with what
// they accept and their defaults. The provider and the engine read them
// through the settings registry, not fi_param_get: one parser, which
// refuses a bad value by name (check_settings).
static void define_params() {
  for (const settings::Setting& s : settings::all()) {
    const enum fi_param_type type = s.type == settings::Type::kBool  ? FI_PARAM_BOOL
                                    : s.type == settings::Type::kInt  ? FI_PARAM_INT
                                    : s.type == settings::Type::kSize ? FI_PARAM_SIZE_T
                                                                      : FI_PARAM_STRING;
    // A format string to libfabric: the help may hold a '%'.
    fi_param_define(&g_prov, s.name, type, "%s", settings::describe(s).c_str());
  }
}

bool check_settings() {
  const std::string errors = settings::check_env();
  if (errors.empty()) return true;
  static std::mutex mu;
  static std::string printed;
  std::lock_guard g(mu);
  if (errors != printed) std::fprintf(stderr, "%s\n", errors.c_str());
  printed = errors;
  return false;
}

}  // namespace softrdma::prov

extern "C" FI_EXT_INI {
  softrdma::prov::define_params();
  return &softrdma::prov::g_prov;
}
