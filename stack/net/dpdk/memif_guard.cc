// DPDK 22.11's memif driver tears a link down on EAL's interrupt thread
// (memif_disconnect, when the peer's control socket closes): it clears the
// link's CONNECTED flag, then unmaps the shared regions. A burst checks the
// flag only on entry, so a thread inside one (preempted there, say) touches
// unmapped memory when it goes on: a survivor could crash when its peer is
// SIGKILLed mid-transfer.
//
// Without patching DPDK, the guard closes that window: the memif driver's
// import of munmap (its GOT slot) is pointed at guarded_munmap, which first
// waits until no thread is inside a marked burst. Bursts mark themselves
// with a per-thread flag (plain stores); the waiter issues membarrier(), a
// full barrier on every thread of the process, before it reads the flags.
// So a burst either sees the cleared flag and returns at once, or is seen
// and waited for (the asymmetric Dekker pattern of userspace RCU). Kernels
// without membarrier get a fence in every burst instead.
#include "stack/net/dpdk/memif_guard.h"

#include <elf.h>
#include <link.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace softrdma::net::memif_guard {
namespace detail {

std::atomic<bool> g_asymmetric{false};

namespace {
// Leaked on purpose: EAL's interrupt thread may tear a link down (and so
// walk the list) while exit() runs the static destructors.
std::mutex& g_mu = *new std::mutex;  // the slot list
std::vector<Slot*>& g_slots = *new std::vector<Slot*>;

struct Owned {
  Slot slot;
  Owned() {
    slot.tid = static_cast<int>(::gettid());
    std::lock_guard<std::mutex> g(g_mu);
    g_slots.push_back(&slot);
  }
  ~Owned() {
    std::lock_guard<std::mutex> g(g_mu);
    std::erase(g_slots, &slot);
  }
};
}  // namespace

Slot& slot() {
  thread_local Owned owned;
  return owned.slot;
}

}  // namespace detail

namespace {

std::mutex g_install_mu;
bool g_installed = false;

long membarrier(int cmd) { return ::syscall(__NR_membarrier, cmd, 0, 0); }

int guarded_munmap(void* addr, size_t len) {
  quiesce();
  return ::munmap(addr, len);
}

struct Found {
  const char* lib;
  ElfW(Addr) base = 0;
  const ElfW(Phdr)* phdr = nullptr;
  ElfW(Half) phnum = 0;
  bool hit = false;
};

int find_lib(dl_phdr_info* info, size_t, void* arg) {
  auto* f = static_cast<Found*>(arg);
  if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, f->lib) == nullptr) return 0;
  f->base = info->dlpi_addr;
  f->phdr = info->dlpi_phdr;
  f->phnum = info->dlpi_phnum;
  f->hit = true;
  return 1;
}

// The address of the object's GOT slot for `name` (a PLT or GLOB_DAT
// relocation), or null.
void** got_slot(const Found& f, const char* name) {
  const ElfW(Dyn)* dyn = nullptr;
  for (ElfW(Half) i = 0; i < f.phnum; ++i) {
    if (f.phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(f.base + f.phdr[i].p_vaddr);
  }
  if (dyn == nullptr) return nullptr;
  // glibc relocates these d_ptr entries in place; an unrelocated one is an offset.
  auto abs = [&f](ElfW(Addr) p) { return p < f.base ? p + f.base : p; };
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  ElfW(Addr) jmprel = 0, rela = 0;
  size_t jmprel_size = 0, rela_size = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(abs(d->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(abs(d->d_un.d_ptr)); break;
      case DT_JMPREL: jmprel = abs(d->d_un.d_ptr); break;
      case DT_PLTRELSZ: jmprel_size = d->d_un.d_val; break;
      case DT_RELA: rela = abs(d->d_un.d_ptr); break;
      case DT_RELASZ: rela_size = d->d_un.d_val; break;
      default: break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return nullptr;
  for (auto [table, size] : {std::pair{jmprel, jmprel_size}, std::pair{rela, rela_size}}) {
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
    for (size_t i = 0; table != 0 && i < size / sizeof(ElfW(Rela)); ++i) {
      const auto type = ELF64_R_TYPE(r[i].r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      if (std::strcmp(strtab + symtab[ELF64_R_SYM(r[i].r_info)].st_name, name) == 0)
        return reinterpret_cast<void**>(f.base + r[i].r_offset);
    }
  }
  return nullptr;
}

// Is addr inside the object's RELRO range (read-only once relocated)?
bool in_relro(const Found& f, const void* addr) {
  const auto a = reinterpret_cast<ElfW(Addr)>(addr);
  for (ElfW(Half) i = 0; i < f.phnum; ++i) {
    if (f.phdr[i].p_type != PT_GNU_RELRO) continue;
    const ElfW(Addr) lo = f.base + f.phdr[i].p_vaddr;
    if (a >= lo && a < lo + f.phdr[i].p_memsz) return true;
  }
  return false;
}

bool patch(void** slot, void* to, bool relro) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  void* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page - 1));
  if (relro && ::mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, to, __ATOMIC_SEQ_CST);
  if (relro) ::mprotect(start, page, PROT_READ);
  return true;
}

}  // namespace

bool install() {
#if defined(__x86_64__)
  std::lock_guard<std::mutex> g(g_install_mu);
  if (g_installed) return true;
  Found f{.lib = "librte_net_memif"};
  dl_iterate_phdr(&find_lib, &f);
  if (!f.hit) return false;
  void** slot = got_slot(f, "munmap");
  if (slot == nullptr) return false;
  detail::g_asymmetric.store(membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0);
  if (!patch(slot, reinterpret_cast<void*>(&guarded_munmap), in_relro(f, slot))) return false;
  g_installed = true;
  return true;
#else
  return false;
#endif
}

bool installed() {
  std::lock_guard<std::mutex> g(g_install_mu);
  return g_installed;
}

void quiesce() {
  if (!detail::g_asymmetric.load() || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    std::atomic_thread_fence(std::memory_order_seq_cst);
  const detail::Slot* own = &detail::slot();  // a teardown run inside our own burst
  std::lock_guard<std::mutex> g(detail::g_mu);
  for (detail::Slot* s : detail::g_slots) {
    // Bursts last microseconds; a wait of seconds means a burst that never
    // ends (a bug): say so once, with the thread, since memif's teardown
    // (and so every later memif control call) waits behind it.
    const auto said = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    bool told = false;
    while (s != own && s->in.load(std::memory_order_acquire) != 0) {
      std::this_thread::yield();
      if (!told && std::chrono::steady_clock::now() > said) {
        told = true;
        std::fprintf(stderr, "softrdma: memif teardown has waited 2 s for a burst of thread %d\n",
                     s->tid);
      }
    }
  }
}

}  // namespace softrdma::net::memif_guard
