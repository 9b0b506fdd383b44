#include "stack/net/fault_link.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "stack/common/settings.h"
#include "stack/net/pcap_link.h"

namespace softrdma::net {
namespace {

constexpr uint32_t kEthHeader = 14;  // corrupt past it: a bad MAC is just a drop

// Ethernet II / IPv4 (RFC 791) / TCP (RFC 9293 3.1) fields a reset rewrites.
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint8_t kIpProtoTcp = 6;
constexpr uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04;
constexpr uint32_t kIpv4Min = 20, kTcpMin = 20;

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
// RFC 1071 ones' complement sum of big-endian 16-bit words.
uint32_t sum16(const uint8_t* p, uint32_t len, uint32_t acc = 0) {
  for (; len > 1; p += 2, len -= 2) acc += get16(p);
  if (len) acc += static_cast<uint32_t>(p[0]) << 8;
  return acc;
}
uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(~acc);
}

// Rewrites an IPv4 TCP segment in place into a RST with the segment's own
// sequence number (the receiver's next expected one when it arrives in
// order, so RFC 5961 accepts it), no payload and valid checksums. Returns
// the new frame length, or 0 for a frame that is not such a segment.
uint32_t make_reset(uint8_t* f, uint32_t len) {
  if (len < kEthHeader + kIpv4Min || get16(f + 12) != kEtherTypeIpv4) return 0;
  uint8_t* ip = f + kEthHeader;
  const uint32_t ihl = (ip[0] & 0x0f) * 4u;
  if ((ip[0] >> 4) != 4 || ihl < kIpv4Min || ip[9] != kIpProtoTcp) return 0;
  if ((get16(ip + 6) & 0x3fff) != 0) return 0;  // a fragment
  uint8_t* tcp = ip + ihl;
  if (len < kEthHeader + ihl + kTcpMin) return 0;
  const uint32_t thl = (tcp[12] >> 4) * 4u;
  if (thl < kTcpMin || len < kEthHeader + ihl + thl) return 0;
  if (tcp[13] & (kTcpSyn | kTcpFin | kTcpRst)) return 0;
  tcp[13] = static_cast<uint8_t>((tcp[13] & 0x10) | kTcpRst);  // keep ACK, drop PSH/URG
  put16(tcp + 14, 0);  // window
  put16(tcp + 18, 0);  // urgent pointer
  const auto ip_len = static_cast<uint16_t>(ihl + thl);
  put16(ip + 2, ip_len);
  put16(ip + 10, 0);
  put16(ip + 10, fold(sum16(ip, ihl)));
  put16(tcp + 16, 0);
  uint32_t pseudo = sum16(ip + 12, 8) + kIpProtoTcp + thl;  // addresses, protocol, length
  put16(tcp + 16, fold(sum16(tcp, thl, pseudo)));
  return kEthHeader + ip_len;
}

class FaultLink;
struct Totals {
  std::mutex mu;
  FaultCounters closed;  // of links already gone
  std::set<const FaultLink*> live;
  bool used = false;  // a fault link ever existed: report at exit
};
Totals& totals();

class FaultLink final : public ForwardingLink {
 public:
  FaultLink(std::unique_ptr<FrameLink> inner, const FaultRates& r)
      : ForwardingLink(inner.get()),
        owned_(std::move(inner)),
        rates_(r),
        rx_rng_(r.seed ^ static_cast<uint64_t>(getpid()) << 32),
        tx_rng_((r.seed ^ static_cast<uint64_t>(getpid()) << 32) * 0x9E3779B97F4A7C15ull + 1) {
    std::lock_guard<std::mutex> lock(totals().mu);
    totals().live.insert(this);
    totals().used = true;
  }
  ~FaultLink() override {
    if (held_.handle != nullptr) release_held();
    inner_->tx_flush();
    Totals& t = totals();
    std::lock_guard<std::mutex> lock(t.mu);
    t.live.erase(this);
    t.closed += counters_now();
  }

  // Receive: drop, corrupt or reset frames as they come off the port.
  int rx_burst(RxFrame* out, int max) override {
    const int n = inner_->rx_burst(out, max);
    int kept = 0;
    for (int i = 0; i < n; ++i) {
      if (roll(rx_rng_, rates_.drop)) {
        inner_->rx_release(out[i].handle);
        ++dropped_;
        continue;
      }
      if (out[i].len > kEthHeader && roll(rx_rng_, rates_.corrupt)) {
        // The frame is ours until rx_release: its buffer is writable.
        auto* data = const_cast<uint8_t*>(out[i].data);
        const uint32_t bit = std::uniform_int_distribution<uint32_t>(
            kEthHeader * 8, out[i].len * 8 - 1)(rx_rng_);
        data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        ++corrupted_;
      } else if (roll(rx_rng_, rates_.reset)) {
        // The frame is ours until rx_release: its buffer is writable.
        if (uint32_t len = make_reset(const_cast<uint8_t*>(out[i].data), out[i].len)) {
          out[i].len = len;
          ++reset_;
        }
      }
      out[kept++] = out[i];
    }
    return kept;
  }

  // Transmit: duplicate or hold back frames as they are committed.
  uint8_t* tx_begin(uint32_t len, void** handle) override {
    uint8_t* data = inner_->tx_begin(len, handle);
    if (data != nullptr) open_tx_.emplace_back(*handle, data);
    return data;
  }
  void tx_commit(void* handle, uint32_t len) override {
    const uint8_t* data = take_open(handle);
    if (held_.handle == nullptr && roll(tx_rng_, rates_.reorder)) {
      held_ = {handle, len};
      return;
    }
    inner_->tx_commit(handle, len);
    if (data != nullptr && roll(tx_rng_, rates_.dup)) {
      void* copy = nullptr;
      if (uint8_t* d = inner_->tx_begin(len, &copy); d != nullptr) {
        std::memcpy(d, data, len);
        inner_->tx_commit(copy, len);
        ++duplicated_;
      }
    }
    if (held_.handle != nullptr) {
      release_held();
      ++reordered_;
    }
  }
  // A frame is held back within one burst at most: the stack flushes after
  // every burst, and a reorder must not turn into a loss.
  void tx_flush() override {
    if (held_.handle != nullptr) release_held();
    inner_->tx_flush();
  }

  bool trusted_checksums() const override {
    return rates_.corrupt == 0 && inner_->trusted_checksums();
  }
  // A corrupt frame is dropped by the receiver's checksum: a loss as well.
  bool lossless() const override {
    return rates_.drop == 0 && rates_.corrupt == 0 && rates_.reset == 0 && inner_->lossless();
  }

  FaultCounters counters_now() const {
    return {dropped_.load(), duplicated_.load(), reordered_.load(), corrupted_.load(),
            reset_.load()};
  }

 private:
  static bool roll(std::mt19937_64& rng, double p) {
    return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < p;
  }
  const uint8_t* take_open(void* handle) {
    for (auto& e : open_tx_) {
      if (e.first == handle) {
        const uint8_t* d = e.second;
        e = open_tx_.back();
        open_tx_.pop_back();
        return d;
      }
    }
    return nullptr;
  }
  void release_held() {
    inner_->tx_commit(held_.handle, held_.len);
    held_.handle = nullptr;
  }

  std::unique_ptr<FrameLink> owned_;
  const FaultRates rates_;
  std::mt19937_64 rx_rng_, tx_rng_;  // rx and tx may run on different threads
  std::vector<std::pair<void*, const uint8_t*>> open_tx_;  // begun, not committed
  struct Held {
    void* handle = nullptr;
    uint32_t len = 0;
  } held_;
  std::atomic<uint64_t> dropped_{0}, duplicated_{0}, reordered_{0}, corrupted_{0}, reset_{0};
};

// Never destroyed: links may close during static destruction.
Totals& totals() {
  static Totals* t = [] {
    auto* p = new Totals;
    std::atexit([] {
      if (!totals().used) return;
      const FaultCounters c = fault_totals();
      std::fprintf(stderr,
                   "softrdma: faults injected: dropped %llu duplicated %llu reordered %llu "
                   "corrupted %llu reset %llu\n",
                   static_cast<unsigned long long>(c.dropped),
                   static_cast<unsigned long long>(c.duplicated),
                   static_cast<unsigned long long>(c.reordered),
                   static_cast<unsigned long long>(c.corrupted),
                   static_cast<unsigned long long>(c.reset));
    });
    return p;
  }();
  return *t;
}

}  // namespace

std::unique_ptr<FrameLink> with_faults(std::unique_ptr<FrameLink> inner, const FaultRates& rates) {
  if (!rates.any()) return inner;
  return std::make_unique<FaultLink>(std::move(inner), rates);
}

std::unique_ptr<FrameLink> with_faults_from_env(std::unique_ptr<FrameLink> inner) {
  const std::string v = settings::get_string(settings::Id::kFaults);
  if (v.empty()) return inner;
  FaultRates r;
  std::string err;
  if (!parse_fault_rates(v, &r, &err)) {
    std::fprintf(stderr, "softrdma: FI_SOFTRDMA_FAULTS=%s ignored: %s\n", v.c_str(), err.c_str());
    return inner;
  }
  return with_faults(std::move(inner), r);
}

FaultCounters fault_totals() {
  Totals& s = totals();
  std::lock_guard<std::mutex> lock(s.mu);
  FaultCounters c = s.closed;
  for (const FaultLink* l : s.live) c += l->counters_now();
  return c;
}

FaultCounters fault_counters(const FrameLink& link) {
  if (const auto* f = dynamic_cast<const FaultLink*>(&link)) return f->counters_now();
  return {};
}

std::unique_ptr<FrameLink> with_env_decorators(std::unique_ptr<FrameLink> port) {
  return with_pcap_from_env(with_faults_from_env(std::move(port)));
}

}  // namespace softrdma::net
