// lwIP transport: finding a received segment's connection by its four-tuple
// in one hash lookup. lwIP 2.1.3's tcp_input scans its list of active pcbs
// (moving each hit to the front); with thousands of connections taking turns
// that scan was most of a process's receive time. CMakeLists.txt patches
// tcp_in.c to ask this index first and to report what its own scan found.
//
// The index is a cache, never the authority: an entry is taken only if its
// pcb is still in an active state with the same four-tuple, else lwIP scans
// as before. A pcb leaves the index when lwIP frees it (the ext-arg destroy
// callback), so no entry outlives its pcb.
#include <cstdint>
#include <vector>

#include "lwip/memp.h"
#include "lwip/tcp.h"
#include "lwip_hooks.h"

namespace {

// Open addressing with linear probing over twice as many slots as lwIP has
// pcbs. An erased entry leaves a tombstone, so a live entry never moves
// between rebuilds and its index can ride in the pcb's ext arg.
class Index {
 public:
  static constexpr uint32_t kSlots = 2 * MEMP_NUM_TCP_PCB;  // a power of two
  static_assert((kSlots & (kSlots - 1)) == 0);

  struct Key {
    uint64_t addrs = 0;  // local << 32 | remote (network byte order values)
    uint32_t ports = 0;  // local << 16 | remote
    bool operator==(const Key&) const = default;
  };

  tcp_pcb* find(const Key& k) const {
    for (uint32_t i = home(k);; i = (i + 1) & (kSlots - 1)) {
      const Entry& e = slots_[i];
      if (e.state == State::kEmpty) return nullptr;
      if (e.state == State::kLive && e.key == k) return e.pcb;
    }
  }

  // Files pcb under k and returns its slot, or the slot of k's entry with
  // the pcb it held before (in *old).
  uint32_t put(const Key& k, tcp_pcb* pcb, tcp_pcb** old) {
    *old = nullptr;
    if (live_ + dead_ >= kSlots / 4 * 3) rebuild();
    uint32_t free = kSlots;
    for (uint32_t i = home(k);; i = (i + 1) & (kSlots - 1)) {
      Entry& e = slots_[i];
      if (e.state == State::kLive && e.key == k) {
        *old = e.pcb;
        e.pcb = pcb;
        return i;
      }
      if (e.state == State::kDead && free == kSlots) free = i;
      if (e.state == State::kEmpty) {
        if (free == kSlots) {
          free = i;
        } else {
          --dead_;
        }
        slots_[free] = Entry{k, pcb, State::kLive};
        ++live_;
        return free;
      }
    }
  }

  void erase(uint32_t slot) {
    slots_[slot].state = State::kDead;
    --live_;
    ++dead_;
  }

  tcp_pcb* at(uint32_t slot) const { return slots_[slot].pcb; }

  // Tombstones gone; every live pcb is told its new slot.
  template <class Moved>
  void set_on_move(Moved fn) { on_move_ = fn; }

 private:
  enum class State : uint8_t { kEmpty, kLive, kDead };
  struct Entry {
    Key key;
    tcp_pcb* pcb = nullptr;
    State state = State::kEmpty;
  };

  static uint32_t home(const Key& k) {
    uint64_t h = (k.addrs ^ (uint64_t{k.ports} * 0x9E3779B97F4A7C15ULL)) * 0xBF58476D1CE4E5B9ULL;
    return static_cast<uint32_t>(h >> 40) & (kSlots - 1);
  }

  void rebuild() {
    std::vector<Entry> live;
    live.reserve(live_);
    for (const Entry& e : slots_)
      if (e.state == State::kLive) live.push_back(e);
    slots_.assign(kSlots, Entry{});
    live_ = dead_ = 0;
    for (const Entry& e : live) {
      tcp_pcb* old = nullptr;
      on_move_(e.pcb, put(e.key, e.pcb, &old));
    }
  }

  std::vector<Entry> slots_ = std::vector<Entry>(kSlots);
  uint32_t live_ = 0, dead_ = 0;
  void (*on_move_)(tcp_pcb*, uint32_t) = nullptr;
};

Index::Key key_of(u16_t local_port, u16_t remote_port, const ip_addr_t* local,
                  const ip_addr_t* remote) {
  return Index::Key{
      uint64_t{ip4_addr_get_u32(ip_2_ip4(local))} << 32 | ip4_addr_get_u32(ip_2_ip4(remote)),
      uint32_t{local_port} << 16 | remote_port};
}

u8_t ext_id() {
  static const u8_t id = tcp_ext_arg_alloc_id();
  return id;
}

// A pcb's ext arg: its slot + 1 (0: it owns no entry).
void* tag(uint32_t slot) { return reinterpret_cast<void*>(uintptr_t{slot} + 1); }

// Leaked on purpose, like the stack: pcbs may be freed during exit.
Index& index() {
  static Index* idx = [] {
    auto* i = new Index;
    i->set_on_move([](tcp_pcb* pcb, uint32_t slot) { tcp_ext_arg_set(pcb, ext_id(), tag(slot)); });
    return i;
  }();
  return *idx;
}

void on_destroyed(u8_t /*id*/, void* data) {
  if (data != nullptr) index().erase(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(data) - 1));
}

const tcp_ext_arg_callbacks kCallbacks{&on_destroyed, nullptr};

bool active_state(const tcp_pcb* pcb) {
  return pcb->state != CLOSED && pcb->state != LISTEN && pcb->state != TIME_WAIT;
}

}  // namespace

extern "C" struct tcp_pcb* softrdma_lwip_find_active(u16_t src_port, u16_t dest_port,
                                                     const ip_addr_t* src, const ip_addr_t* dest,
                                                     u8_t netif_idx) {
  tcp_pcb* pcb = index().find(key_of(dest_port, src_port, dest, src));
  if (pcb == nullptr || !active_state(pcb) || pcb->local_port != dest_port ||
      pcb->remote_port != src_port || !ip_addr_cmp(&pcb->local_ip, dest) ||
      !ip_addr_cmp(&pcb->remote_ip, src)) {
    return nullptr;
  }
  if (pcb->netif_idx != NETIF_NO_INDEX && pcb->netif_idx != netif_idx) return nullptr;
  return pcb;
}

extern "C" void softrdma_lwip_found_active(struct tcp_pcb* pcb) {
  const u8_t id = ext_id();
  tcp_pcb* old = nullptr;
  const uint32_t slot = index().put(
      key_of(pcb->local_port, pcb->remote_port, &pcb->local_ip, &pcb->remote_ip), pcb, &old);
  // The tuple's earlier pcb (in TIME-WAIT, or closed but not yet freed) no
  // longer owns the entry: its destroy must not erase it.
  if (old != nullptr && old != pcb) tcp_ext_arg_set(old, id, nullptr);
  tcp_ext_arg_set_callbacks(pcb, id, &kCallbacks);
  tcp_ext_arg_set(pcb, id, tag(slot));
}
