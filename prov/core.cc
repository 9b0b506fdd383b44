// The provider's core: one per process, made with its engine by the first
// fi_fabric and destroyed with it when the last fabric closes. A static
// lock covers both ends, so a fabric opened while the last one closes gets
// a new engine only after the old one is gone (lwIP, the memif mesh and
// DPDK's EAL exist once per process).
#include <mutex>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

struct Registry {
  std::mutex mu;
  std::weak_ptr<Core> core;
};

// Never destroyed: a fabric may close from another library's destructor at
// exit, after this one's statics are gone.
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

std::shared_ptr<Core> Core::acquire(int* err) {
  Registry& r = registry();
  std::lock_guard g(r.mu);
  if (std::shared_ptr<Core> core = r.core.lock()) return core;
  auto core = std::make_shared<Core>();
  core->engine = std::make_unique<Engine>(EngineConfig::from_env());
  if (!core->engine->ok()) {  // the reason went to stderr
    *err = -FI_ENODEV;
    return nullptr;
  }
  r.core = core;
  return core;
}

void Core::release(std::shared_ptr<Core>* core) {
  std::lock_guard g(registry().mu);
  core->reset();
}

Core::~Core() {
  auto_stop = true;
  if (auto_thread.joinable()) auto_thread.join();
}

}  // namespace softrdma::prov
