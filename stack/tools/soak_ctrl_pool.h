// The control blocks of a soak process's connections (the words the peer
// writes by RDMA Write: credits, notices), side by side in chunks. A sweep
// then reads them in one pass over memory, at a fixed stride, instead of
// chasing each connection's objects to learn that nothing changed. Each
// block is its own MR: a peer reaches its connection's block and no other.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "stack/tools/soak_node.h"

namespace softrdma::soak {

template <class T>
class CtrlPool {
 public:
  static constexpr uint32_t kChunk = 256;  // blocks per chunk

  struct Block {
    T* ctrl = nullptr;
    uint32_t stag = 0;
    uint32_t slot = 0;
  };

  explicit CtrlPool(Node& node) : node_(node) {}
  ~CtrlPool() = default;  // the connections gave their blocks back
  CtrlPool(const CtrlPool&) = delete;
  CtrlPool& operator=(const CtrlPool&) = delete;

  // A zeroed block, registered (a new chunk when all are taken).
  Block take() {
    if (free_.empty()) grow();
    const uint32_t slot = free_.back();
    free_.pop_back();
    Chunk& c = chunks_[slot / kChunk];
    ++c.used;
    T* p = new (&c.mem[slot % kChunk]) T{};
    constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    c.stags[slot % kChunk] = node_.reg(p, sizeof(T), kAll);
    return Block{p, c.stags[slot % kChunk], slot};
  }
  // Its chunk's memory goes with its last block: what a process holds when
  // idle stays what it held before its first connection.
  void give(uint32_t slot) {
    Chunk& c = chunks_[slot / kChunk];
    node_.eng().dereg_mr(c.stags[slot % kChunk]);
    free_.push_back(slot);
    if (--c.used > 0) return;
    c.mem.reset();
    std::erase_if(free_, [&](uint32_t s) { return s / kChunk == slot / kChunk; });
  }

  // Calls fn(slot, block) for every block of the chunks in use, taken or
  // not (the caller knows which slots are its connections').
  template <class Fn>
  void scan(Fn fn) const {
    for (uint32_t i = 0; i < chunks_.size(); ++i) {
      const Chunk& c = chunks_[i];
      if (!c.mem) continue;
      for (uint32_t k = 0; k < kChunk; ++k) fn(i * kChunk + k, c.mem[k]);
    }
  }
  uint32_t slots() const { return static_cast<uint32_t>(chunks_.size() * kChunk); }

 private:
  struct Chunk {
    std::unique_ptr<T[]> mem;
    uint32_t stags[kChunk] = {};
    uint32_t used = 0;
  };

  void grow() {
    uint32_t at = 0;
    while (at < chunks_.size() && chunks_[at].mem) ++at;
    if (at == chunks_.size()) chunks_.emplace_back();
    Chunk& c = chunks_[at];
    c.mem.reset(new T[kChunk]());
    for (uint32_t k = kChunk; k > 0; --k) free_.push_back(at * kChunk + k - 1);
  }

  Node& node_;
  std::vector<Chunk> chunks_;
  std::vector<uint32_t> free_;  // slots of chunks in use, lowest last
};

// What a sweep keeps per slot: the connection there (null if none) and the
// peer-written words it last stepped it on (Words: equality comparable).
template <class Conn, class Words>
class SlotTable {
 public:
  void put(uint32_t slot, Conn* c, uint32_t slots) {
    if (conn_.size() < slots) {
      conn_.resize(slots, nullptr);
      seen_.resize(slots);
    }
    conn_[slot] = c;
    seen_[slot] = Words{};
  }
  void drop(uint32_t slot) { conn_[slot] = nullptr; }
  Conn* at(uint32_t slot) const { return slot < conn_.size() ? conn_[slot] : nullptr; }
  // Records words for slot; true if they differ from what it held.
  bool changed(uint32_t slot, const Words& words) {
    if (seen_[slot] == words) return false;
    seen_[slot] = words;
    return true;
  }

 private:
  std::vector<Conn*> conn_;
  std::vector<Words> seen_;
};

}  // namespace softrdma::soak
