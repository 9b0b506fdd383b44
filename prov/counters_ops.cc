// FI_SOFTRDMA_COUNTERS_OPS (fi_ext_softrdma.h): the engine's counters
// through fi_open_ops on the fabric or a domain.
#include <algorithm>
#include <cstring>

#include "prov/fi_ext_softrdma.h"
#include "prov/prov.h"

namespace softrdma::prov {

namespace {

int read_counters(fid* f, softrdma_counters* out, size_t out_size) {
  if (f == nullptr || out == nullptr) return -FI_EINVAL;
  Core* core = nullptr;
  if (f->fclass == FI_CLASS_FABRIC) core = from_fid<Fabric>(f)->core.get();
  if (f->fclass == FI_CLASS_DOMAIN) core = &from_fid<Domain>(f)->core();
  if (core == nullptr) return -FI_EINVAL;
  const Counters c = core->engine->counters();  // the process's one engine
  std::memcpy(out, &c, std::min(out_size, sizeof(c)));
  return 0;
}

fi_softrdma_counters_ops g_counters_ops = {sizeof(fi_softrdma_counters_ops), read_counters};

}  // namespace

bool open_counters_ops(const char* name, void** ops) {
  if (name == nullptr || std::strcmp(name, FI_SOFTRDMA_COUNTERS_OPS) != 0) return false;
  *ops = &g_counters_ops;
  return true;
}

}  // namespace softrdma::prov
