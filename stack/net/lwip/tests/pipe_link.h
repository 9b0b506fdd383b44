// An in-process FrameLink pair for tests: frames one end transmits are
// received by the other. Buffers come from one pool shared by both ends and
// carry the kFramePrivSize scratch area the stack keeps its pbuf in, like
// mbufs. Optional fault injection (seeded, per transmitting end): drop,
// duplicate, reorder (swap with the frame queued just before) and corrupt
// (flip one octet past the Ethernet header), each with its own rate; and an
// optional eventfd that turns readable when frames arrive (interrupt mode).
// Like memif, an end takes lent frames (tx_lend) and copies them into a
// buffer only when its batch is pushed, then says it is done with them.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "stack/net/frame_link.h"

namespace softrdma::net::testing {

struct PipeOptions {
  uint32_t mtu = 1500;
  size_t buffers = 16384;  // shared by both ends; frames held by a stack count
  bool wait_fd = false;    // provide rx_wait_fd()
  bool lend = true;        // take lent frames (tx_lend), as memif ports do
};

struct PipeFaults {
  double drop = 0, duplicate = 0, reorder = 0, corrupt = 0;  // per-frame rates
  uint64_t seed = 1;
};

struct PipeFaultCounts {
  uint64_t dropped = 0, duplicated = 0, reordered = 0, corrupted = 0;
};

class PipeLink;

// State shared by the two ends: the buffer pool and both receive queues.
class PipeCore {
 public:
  explicit PipeCore(const PipeOptions& o) : opt_(o), slot_size_(kFramePrivSize + o.mtu + 14) {
    slot_size_ = (slot_size_ + 63) & ~size_t{63};
    mem_ = std::make_unique<uint8_t[]>(slot_size_ * o.buffers + 64);
    auto base = reinterpret_cast<uintptr_t>(mem_.get());
    base_ = reinterpret_cast<uint8_t*>((base + 63) & ~uintptr_t{63});
    free_.reserve(o.buffers);
    for (size_t i = 0; i < o.buffers; ++i) free_.push_back(static_cast<uint32_t>(i));
    len_.assign(o.buffers, 0);
  }

  uint8_t* priv(uint32_t slot) { return base_ + size_t{slot} * slot_size_; }
  uint8_t* data(uint32_t slot) { return priv(slot) + kFramePrivSize; }

  bool alloc(uint32_t* slot) {
    if (free_.empty()) return false;
    *slot = free_.back();
    free_.pop_back();
    return true;
  }
  void release(uint32_t slot) { free_.push_back(slot); }

  std::mutex mu;
  PipeOptions opt_;
  size_t slot_size_;
  std::unique_ptr<uint8_t[]> mem_;
  uint8_t* base_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> len_;
  std::deque<uint32_t> rxq[2];  // frames waiting for end 0 / end 1
  // rxq[i].size() after its last change: an empty poll (most polls) answers
  // without the mutex, as a shared-memory ring's does.
  std::atomic<size_t> queued[2]{};
  void queue_changed(int i) { queued[i].store(rxq[i].size(), std::memory_order_release); }
  int evfd[2] = {-1, -1};
};

class PipeLink final : public FrameLink {
  // A queued frame: its buffer, and the lent frame that fills it at push.
  struct Tx {
    uint32_t slot;
    const uint8_t* lent;
    TxDone done;
    void* ctx;
  };

 public:
  PipeLink(std::shared_ptr<PipeCore> core, int side, std::string name)
      : core_(std::move(core)), side_(side), name_(std::move(name)) {
    mac_[0] = 0x02;
    mac_[5] = static_cast<uint8_t>(next_mac()++);
    if (core_->opt_.wait_fd) {
      core_->evfd[side_] = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    }
  }
  ~PipeLink() override {
    std::lock_guard g(core_->mu);
    for (uint32_t s : core_->rxq[side_]) core_->release(s);
    core_->rxq[side_].clear();
    core_->queue_changed(side_);
    discard_locked();
    if (core_->evfd[side_] >= 0) ::close(core_->evfd[side_]);
    core_->evfd[side_] = -1;
  }

  int rx_burst(RxFrame* out, int max) override {
    if (core_->queued[side_].load(std::memory_order_acquire) == 0) return 0;
    std::lock_guard g(core_->mu);
    auto& q = core_->rxq[side_];
    int n = 0;
    while (n < max && !q.empty()) {
      uint32_t s = q.front();
      q.pop_front();
      out[n] = RxFrame{reinterpret_cast<void*>(uintptr_t{s} + 1), core_->data(s), core_->len_[s],
                       core_->priv(s)};
      ctr_.rx_packets++;
      ctr_.rx_bytes += core_->len_[s];
      ++n;
    }
    core_->queue_changed(side_);
    return n;
  }
  void rx_release(void* handle) override {
    std::lock_guard g(core_->mu);
    core_->release(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle) - 1));
  }

  uint8_t* tx_begin(uint32_t len, void** handle) override {
    std::lock_guard g(core_->mu);
    uint32_t s;
    if (tx_full_ || len > core_->opt_.mtu + 14 || !core_->alloc(&s)) {
      ctr_.tx_dropped++;
      return nullptr;
    }
    *handle = reinterpret_cast<void*>(uintptr_t{s} + 1);
    return core_->data(s);
  }
  void tx_commit(void* handle, uint32_t len) override {
    std::lock_guard g(core_->mu);
    uint32_t s = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle) - 1);
    core_->len_[s] = len;
    ctr_.tx_packets++;
    ctr_.tx_bytes += len;
    batch_.push_back(Tx{s, nullptr, nullptr, nullptr});
    if (batch_.size() >= 32) push_locked();
  }
  // The frame's buffer is taken now (as memif's carrier mbuf is), filled
  // when the batch is pushed.
  int tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) override {
    std::lock_guard g(core_->mu);
    if (!core_->opt_.lend || len > core_->opt_.mtu + 14) return 0;
    uint32_t s;
    if (tx_full_ || !core_->alloc(&s)) {
      ctr_.tx_dropped++;
      return -ENOBUFS;
    }
    core_->len_[s] = len;
    ctr_.tx_packets++;
    ctr_.tx_bytes += len;
    batch_.push_back(Tx{s, frame, done, ctx});
    if (batch_.size() >= 32) push_locked();
    return 1;
  }
  void tx_flush() override {
    if (batch_.empty()) return;  // only this end's sender touches batch_
    std::lock_guard g(core_->mu);
    push_locked();
  }
  void tx_discard() override {
    std::lock_guard g(core_->mu);
    discard_locked();
  }

  const uint8_t* mac() const override { return mac_; }
  uint32_t mtu() const override { return core_->opt_.mtu; }
  bool link_up() const override { return up_; }
  bool trusted_checksums() const override { return trusted_ && faults_.corrupt == 0; }
  int rx_wait_fd() override { return core_->evfd[side_]; }
  void rx_wait_arm() override {
    std::lock_guard g(core_->mu);
    int fd = core_->evfd[side_];
    if (fd < 0) return;
    uint64_t v;
    while (::read(fd, &v, sizeof(v)) > 0) {
    }
    if (!core_->rxq[side_].empty()) signal(side_);
  }
  const std::string& name() const override { return name_; }
  LinkCounters counters() const override {
    std::lock_guard g(core_->mu);
    return ctr_;
  }

  // Test controls (any thread).
  void set_faults(const PipeFaults& f) {
    std::lock_guard g(core_->mu);
    faults_ = f;
    rng_.seed(f.seed);
  }
  // Drops the next n frames this end transmits (deterministic loss).
  void drop_next(int n) {
    std::lock_guard g(core_->mu);
    drop_next_ = n;
  }
  // While full, this end refuses every frame as if out of buffers.
  void set_tx_full(bool full) {
    std::lock_guard g(core_->mu);
    tx_full_ = full;
  }
  void set_link_up(bool up) { up_ = up; }
  void set_trusted(bool t) { trusted_ = t; }
  PipeFaultCounts fault_counts() const {
    std::lock_guard g(core_->mu);
    return fc_;
  }

 private:
  static int& next_mac() {
    static int n = 1;
    return n;
  }

  bool chance(double rate) {
    return rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < rate;
  }

  void signal(int side) {
    int fd = core_->evfd[side];
    if (fd < 0) return;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(fd, &one, sizeof(one));
  }

  void enqueue(uint32_t s) {
    auto& q = core_->rxq[1 - side_];
    if (!q.empty() && chance(faults_.reorder)) {
      q.insert(q.end() - 1, s);
      fc_.reordered++;
    } else {
      q.push_back(s);
    }
  }

  void discard_locked() {
    for (const Tx& t : batch_) {
      if (t.lent != nullptr) t.done(const_cast<uint8_t*>(t.lent), t.ctx);
      core_->release(t.slot);
    }
    batch_.clear();
  }

  // A lent frame is copied into its buffer now and given back to its
  // owner, as memif does inside tx_burst.
  void take(const Tx& t) {
    if (t.lent == nullptr) return;
    std::memcpy(core_->data(t.slot), t.lent, core_->len_[t.slot]);
    t.done(const_cast<uint8_t*>(t.lent), t.ctx);
  }

  void push_locked() {
    auto& q = core_->rxq[1 - side_];
    bool was_empty = q.empty();
    for (const Tx& t : batch_) {
      take(t);
      const uint32_t s = t.slot;
      if (drop_next_ > 0) {
        --drop_next_;
        fc_.dropped++;
        core_->release(s);
        continue;
      }
      if (chance(faults_.drop)) {
        fc_.dropped++;
        core_->release(s);
        continue;
      }
      if (chance(faults_.corrupt) && core_->len_[s] > 14) {
        uint32_t off = 14 + static_cast<uint32_t>(rng_() % (core_->len_[s] - 14));
        core_->data(s)[off] ^= static_cast<uint8_t>(1 + rng_() % 255);
        fc_.corrupted++;
      }
      uint32_t d;
      if (chance(faults_.duplicate) && core_->alloc(&d)) {
        std::memcpy(core_->data(d), core_->data(s), core_->len_[s]);
        core_->len_[d] = core_->len_[s];
        enqueue(s);
        enqueue(d);
        fc_.duplicated++;
        continue;
      }
      enqueue(s);
    }
    batch_.clear();
    core_->queue_changed(1 - side_);
    if (was_empty && !q.empty()) signal(1 - side_);
  }

  std::shared_ptr<PipeCore> core_;
  int side_;
  std::string name_;
  uint8_t mac_[6] = {};
  bool up_ = true;
  bool trusted_ = true;
  std::vector<Tx> batch_;
  PipeFaults faults_;
  std::mt19937_64 rng_{1};
  int drop_next_ = 0;
  bool tx_full_ = false;
  PipeFaultCounts fc_;
  LinkCounters ctr_;
};

// Two connected ends.
inline std::pair<std::unique_ptr<PipeLink>, std::unique_ptr<PipeLink>> make_pipe_pair(
    const PipeOptions& o = {}, const std::string& name = "pipe") {
  auto core = std::make_shared<PipeCore>(o);
  return {std::make_unique<PipeLink>(core, 0, name + "0"),
          std::make_unique<PipeLink>(core, 1, name + "1")};
}

}  // namespace softrdma::net::testing
