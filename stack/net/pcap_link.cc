#include "stack/net/pcap_link.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "stack/common/settings.h"

namespace softrdma::net {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr int64_t kFlushIntervalNs = 1'000'000'000;
constexpr uint32_t kLinktypeEthernet = 1;

struct PcapFileHeader {
  uint32_t magic = 0xa1b2c3d4;  // microsecond timestamps, host byte order
  uint16_t version_major = 2;
  uint16_t version_minor = 4;
  int32_t thiszone = 0;
  uint32_t sigfigs = 0;
  uint32_t snaplen = kPcapSnapLen;
  uint32_t linktype = kLinktypeEthernet;
};

struct PcapRecordHeader {
  uint32_t ts_sec, ts_usec, incl_len, orig_len;
};

class PcapLink;
// Links still open at exit are flushed then: the engine's links live as long
// as the process, so their destructors never run.
struct LiveLinks {
  std::mutex mu;
  std::set<PcapLink*> links;
};
LiveLinks& live_links();

class PcapLink final : public ForwardingLink {
 public:
  PcapLink(std::unique_ptr<FrameLink> inner, int fd)
      : ForwardingLink(inner.get()), owned_(std::move(inner)), fd_(fd) {
    buffer_.reserve(kBufferBytes);
    const PcapFileHeader h;
    append(&h, sizeof(h));
    last_flush_ns_ = now_ns();
    std::lock_guard<std::mutex> lock(live_links().mu);
    live_links().links.insert(this);
  }
  ~PcapLink() override {
    {
      std::lock_guard<std::mutex> lock(live_links().mu);
      live_links().links.erase(this);
    }
    flush();
    close(fd_);
  }
  void flush() {
    std::lock_guard<std::mutex> lock(mu_);
    flush_locked();
  }

  int rx_burst(RxFrame* out, int max) override {
    const int n = inner_->rx_burst(out, max);
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t now = now_ns();
      for (int i = 0; i < n; ++i) record_locked(now, out[i].data, out[i].len);
      maybe_flush_locked(now);
    }
    return n;
  }

  uint8_t* tx_begin(uint32_t len, void** handle) override {
    uint8_t* data = inner_->tx_begin(len, handle);
    if (data != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      open_tx_.emplace_back(*handle, data);
    }
    return data;
  }
  void tx_commit(void* handle, uint32_t len) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = std::find_if(open_tx_.begin(), open_tx_.end(),
                             [handle](const auto& e) { return e.first == handle; });
      if (it != open_tx_.end()) {
        record_locked(now_ns(), it->second, len);
        *it = open_tx_.back();
        open_tx_.pop_back();
      }
    }
    inner_->tx_commit(handle, len);
  }
  void tx_flush() override {
    inner_->tx_flush();
    std::lock_guard<std::mutex> lock(mu_);
    maybe_flush_locked(now_ns());
  }


 private:
  static int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }

  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buffer_.insert(buffer_.end(), b, b + n);
  }

  void record_locked(int64_t now, const uint8_t* data, uint32_t len) {
    const uint32_t incl = std::min(len, kPcapSnapLen);
    if (buffer_.size() + sizeof(PcapRecordHeader) + incl > kBufferBytes) flush_locked();
    const PcapRecordHeader r{static_cast<uint32_t>(now / 1'000'000'000),
                             static_cast<uint32_t>(now % 1'000'000'000 / 1000), incl, len};
    append(&r, sizeof(r));
    append(data, incl);
  }

  void maybe_flush_locked(int64_t now) {
    if (!buffer_.empty() && now - last_flush_ns_ >= kFlushIntervalNs) flush_locked();
  }

  void flush_locked() {
    size_t off = 0;
    while (off < buffer_.size()) {
      const ssize_t w = write(fd_, buffer_.data() + off, buffer_.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // disk full or similar: losing the trace beats stalling I/O
      off += static_cast<size_t>(w);
    }
    buffer_.clear();
    last_flush_ns_ = now_ns();
  }

  std::unique_ptr<FrameLink> owned_;
  const int fd_;
  std::mutex mu_;  // rx and tx may run on different threads
  std::vector<uint8_t> buffer_;
  std::vector<std::pair<void*, const uint8_t*>> open_tx_;  // begun, not committed
  int64_t last_flush_ns_ = 0;
};

// Never destroyed: links may close during static destruction.
LiveLinks& live_links() {
  static LiveLinks* l = [] {
    auto* p = new LiveLinks;
    std::atexit([] {
      std::lock_guard<std::mutex> lock(live_links().mu);
      for (PcapLink* link : live_links().links) link->flush();
    });
    return p;
  }();
  return *l;
}

}  // namespace

std::unique_ptr<FrameLink> with_pcap(std::unique_ptr<FrameLink> inner, const std::string& path,
                                     std::string* error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const std::string why = "pcap " + path + ": " + std::strerror(errno);
    if (error != nullptr)
      *error = why;
    else
      std::fprintf(stderr, "softrdma: %s\n", why.c_str());
    return inner;
  }
  return std::make_unique<PcapLink>(std::move(inner), fd);
}

std::unique_ptr<FrameLink> with_pcap_from_env(std::unique_ptr<FrameLink> inner) {
  const std::string v = settings::get_string(settings::Id::kPcap);
  if (v.empty()) return inner;
  std::string path;
  for (const char* c = v.c_str(); *c != '\0'; ++c) {
    if (c[0] == '%' && c[1] == 'p') {
      path += std::to_string(getpid());
      ++c;
    } else if (c[0] == '%' && c[1] == 'n') {
      path += inner->name();
      ++c;
    } else {
      path += *c;
    }
  }
  return with_pcap(std::move(inner), path);
}

}  // namespace softrdma::net
