// An in-memory FrameLink for decorator tests: frames queued with push() come
// out of rx_burst; committed frames are kept in `sent`, in commit order.
#pragma once

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "stack/net/frame_link.h"

namespace softrdma::net {

class FakeLink final : public FrameLink {
 public:
  void push(std::vector<uint8_t> frame) { rx_.push_back(std::move(frame)); }

  int rx_burst(RxFrame* out, int max) override {
    int n = 0;
    for (; n < max && !rx_.empty(); ++n) {
      auto* buf = new std::vector<uint8_t>(std::move(rx_.front()));
      rx_.pop_front();
      out[n] = RxFrame{buf, buf->data(), static_cast<uint32_t>(buf->size()), nullptr};
    }
    return n;
  }
  void rx_release(void* handle) override {
    delete static_cast<std::vector<uint8_t>*>(handle);
    ++released;
  }
  uint8_t* tx_begin(uint32_t len, void** handle) override {
    auto* buf = new std::vector<uint8_t>(len);
    *handle = buf;
    return buf->data();
  }
  void tx_commit(void* handle, uint32_t len) override {
    auto* buf = static_cast<std::vector<uint8_t>*>(handle);
    buf->resize(len);
    sent.push_back(std::move(*buf));
    delete buf;
  }
  void tx_flush() override {}
  const uint8_t* mac() const override { return mac_; }
  uint32_t mtu() const override { return 9000; }
  bool link_up() const override { return true; }
  bool trusted_checksums() const override { return false; }
  const std::string& name() const override { return name_; }
  LinkCounters counters() const override { return {}; }

  std::vector<std::vector<uint8_t>> sent;
  int released = 0;  // frames given back with rx_release

 private:
  std::deque<std::vector<uint8_t>> rx_;
  uint8_t mac_[6] = {0x02, 0, 0, 0, 0, 1};
  std::string name_ = "fake0";
};

}  // namespace softrdma::net
