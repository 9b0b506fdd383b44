#include "stack/net/kernel_arp_link.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "stack/net/host_addr.h"

namespace softrdma::net {

namespace {

constexpr uint16_t kEthArp = 0x0806;
constexpr uint16_t kArpRequest = 1, kArpReply = 2;
constexpr size_t kArpFrame = 14 + 28;

// A reply made here and lent to the stack like a received frame.
struct SynthFrame {
  alignas(64) uint8_t priv[kFramePrivSize];
  uint8_t data[64];
};

class KernelArpLink final : public ForwardingLink {
 public:
  KernelArpLink(std::unique_ptr<FrameLink> port, std::string ifname)
      : ForwardingLink(port.get()), port_(std::move(port)), ifname_(std::move(ifname)) {}
  ~KernelArpLink() override {
    for (SynthFrame* f : lent_) delete f;
  }

  uint8_t* tx_begin(uint32_t len, void** handle) override {
    uint8_t* p = inner_->tx_begin(len, handle);
    last_tx_ = p;
    last_handle_ = p ? *handle : nullptr;
    return p;
  }

  // Lent frames are lwIP's TCP segments; an ARP request takes the copy
  // path, where tx_commit sees it.
  int tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) override {
    if (len >= 14 && be16(frame + 12) == kEthArp) return 0;
    return inner_->tx_lend(frame, len, done, ctx);
  }

  // lwIP's ARP requests still go out (the peer's kernel learns us), and the
  // kernel is asked too; its answer comes back through rx_burst.
  void tx_commit(void* handle, uint32_t len) override {
    if (handle == last_handle_ && len >= kArpFrame) note_request(last_tx_);
    inner_->tx_commit(handle, len);
  }

  int rx_burst(RxFrame* out, int max) override {
    int n = pending_.empty() ? 0 : answer(out, max);
    return n + inner_->rx_burst(out + n, max - n);
  }

  void rx_release(void* handle) override {
    auto* f = static_cast<SynthFrame*>(handle);
    if (lent_.erase(f)) {
      delete f;
      return;
    }
    inner_->rx_release(handle);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kRecheck = std::chrono::milliseconds(1);
  static constexpr auto kGiveUp = std::chrono::seconds(3);  // lwIP asks again later

  struct Pending {
    in_addr asker;  // lwIP's address (the request's sender)
    Clock::time_point since;
  };

  static uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

  void note_request(const uint8_t* f) {
    const uint8_t* arp = f + 14;
    if (be16(f + 12) != kEthArp || be16(arp + 6) != kArpRequest) return;
    in_addr target, asker;
    std::memcpy(&asker, arp + 14, 4);
    std::memcpy(&target, arp + 24, 4);
    if (pending_.emplace(target.s_addr, Pending{asker, Clock::now()}).second) kernel_resolve(target);
  }

  // Replies for the requests the kernel has resolved since, at most once a
  // millisecond (a file read).
  int answer(RxFrame* out, int max) {
    const auto now = Clock::now();
    if (now - last_check_ < kRecheck) return 0;
    last_check_ = now;
    int n = 0;
    for (auto it = pending_.begin(); it != pending_.end() && n < max;) {
      uint8_t mac[6];
      in_addr target{it->first};
      if (kernel_neighbor(target, ifname_, mac)) {
        out[n++] = reply(target, mac, it->second.asker);
        it = pending_.erase(it);
      } else if (now - it->second.since > kGiveUp) {
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    return n;
  }

  RxFrame reply(in_addr from, const uint8_t from_mac[6], in_addr to) {
    auto* f = new SynthFrame{};
    uint8_t* d = f->data;
    std::memcpy(d, mac(), 6);
    std::memcpy(d + 6, from_mac, 6);
    d[12] = kEthArp >> 8;
    d[13] = kEthArp & 0xff;
    uint8_t* arp = d + 14;
    const uint8_t head[8] = {0, 1, 8, 0, 6, 4, 0, kArpReply};  // Ethernet, IPv4
    std::memcpy(arp, head, 8);
    std::memcpy(arp + 8, from_mac, 6);
    std::memcpy(arp + 14, &from, 4);
    std::memcpy(arp + 18, mac(), 6);
    std::memcpy(arp + 24, &to, 4);
    lent_.insert(f);
    return RxFrame{f, f->data, static_cast<uint32_t>(kArpFrame), f->priv};
  }

  std::unique_ptr<FrameLink> port_;
  const std::string ifname_;
  uint8_t* last_tx_ = nullptr;
  void* last_handle_ = nullptr;
  std::map<uint32_t, Pending> pending_;
  std::set<SynthFrame*> lent_;
  Clock::time_point last_check_{};
};

}  // namespace

std::unique_ptr<FrameLink> with_kernel_arp(std::unique_ptr<FrameLink> port,
                                           const std::string& ifname) {
  return std::make_unique<KernelArpLink>(std::move(port), ifname);
}

}  // namespace softrdma::net
