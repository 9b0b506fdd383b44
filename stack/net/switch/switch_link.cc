#include "stack/net/switch/switch_link.h"

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "stack/net/frame_pool.h"
#include "stack/net/switch/frame_ring.h"

namespace softrdma::net {

namespace {

int recv_with_fds(int fd, sw::Msg* m, int* fds, int nfds) {
  char ctl[CMSG_SPACE(sizeof(int) * 3)]{};
  iovec iov{m, sizeof(*m)};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = ctl;
  h.msg_controllen = sizeof(ctl);
  ssize_t n = ::recvmsg(fd, &h, MSG_CMSG_CLOEXEC);
  if (n < 0) return -errno;
  if (n == 0) return -ECONNRESET;
  int got = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const int k = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < k; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (got < nfds) fds[got++] = f;
      else ::close(f);
    }
  }
  if (static_cast<size_t>(n) != sizeof(*m) || m->magic != sw::kMagic || m->version != sw::kVersion ||
      (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    for (int i = 0; i < got; ++i) ::close(fds[i]);
    return -EPROTO;
  }
  return got;
}

}  // namespace

// What the link and the session share: the mapping and the kick fds, kept
// until both are gone.
struct SwitchSession::Shared {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  int kick_switch = -1, kick_rank = -1;
  std::unique_ptr<sw::FrameRing> to_rank, to_switch;
  std::atomic<bool> up{true};
  uint8_t mac[6]{};
  uint32_t mtu = 0;
  uint32_t offloads = 0;
  std::string name;
  ~Shared() {
    if (base != MAP_FAILED) ::munmap(base, bytes);
    if (kick_switch >= 0) ::close(kick_switch);
    if (kick_rank >= 0) ::close(kick_rank);
  }
};

namespace {

// The link lwIP sees: receive copies each frame out of the ring into a
// buffer of the process (lwIP may hold it long), transmit fills ring slots
// in place.
class SwitchLink final : public FrameLink {
 public:
  explicit SwitchLink(std::shared_ptr<SwitchSession::Shared> s) : s_(std::move(s)) {
    // lwIP keeps frames until their bytes are placed (and out-of-order ones
    // longer): about 16 MB of each size, as a port's pool would hold. Ring
    // slots of 64 KiB segments get small buffers for small frames too.
    const size_t slot = kFramePrivSize + ((s_->to_rank->slot_size() + 63) & ~size_t{63});
    const size_t small = std::min(slot, kFramePrivSize + kSmallFrame);
    small_.init(small, std::clamp<size_t>((16u << 20) / small, kMinBuffers, kMaxBuffers));
    if (slot > small) big_.init(slot, std::clamp<size_t>((16u << 20) / slot, 256, kMaxBuffers));
  }

  int rx_burst(RxFrame* out, int max) override {
    if (sleeping_) {  // awake again: the kick (if any) is spent
      s_->to_rank->set_sleeping(false);
      sleeping_ = false;
      uint64_t v;
      (void)!::read(s_->kick_rank, &v, sizeof(v));
    }
    int n = 0;
    while (n < max) {
      const uint8_t* d;
      uint32_t len;
      if (s_->to_rank->peek(&d, &len) != 1) break;
      uint8_t* b = kFramePrivSize + len <= small_.stride() ? small_.get() : big_.get();
      if (b == nullptr) break;  // lwIP holds them all: the frame waits in the ring
      std::memcpy(b + kFramePrivSize, d, len);
      s_->to_rank->pop();
      out[n++] = RxFrame{b, b + kFramePrivSize, len, b};
      c_.rx_packets++;
      c_.rx_bytes += len;
    }
    // A process polling for a reply needs the switch to run: when cores
    // are fewer than busy processes, an empty poll gives it the CPU (every
    // empty poll: every 64th tripled the 8 B half round trip on 2 cores).
    if (n == 0) sched_yield();
    return n;
  }
  void rx_release(void* handle) override {
    auto* b = static_cast<uint8_t*>(handle);
    (big_.owns(b) ? big_ : small_).put(b);
  }

  uint8_t* tx_begin(uint32_t len, void** handle) override {
    uint32_t slot;
    uint8_t* p = len <= s_->to_switch->slot_size() && up() ? s_->to_switch->reserve(&slot) : nullptr;
    if (p == nullptr) {
      c_.tx_dropped++;
      return nullptr;
    }
    *handle = reinterpret_cast<void*>(uintptr_t{slot} + 1);
    return p;
  }
  void tx_commit(void* handle, uint32_t len) override {
    s_->to_switch->commit(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(handle) - 1), len);
    c_.tx_packets++;
    c_.tx_bytes += len;
    dirty_ = true;
  }
  void tx_flush() override {
    if (!dirty_) return;
    dirty_ = false;
    if (s_->to_switch->consumer_sleeping()) {
      const uint64_t one = 1;
      (void)!::write(s_->kick_switch, &one, sizeof(one));
    }
  }

  const uint8_t* mac() const override { return s_->mac; }
  uint32_t mtu() const override { return s_->mtu; }
  bool link_up() const override { return up(); }
  bool trusted_checksums() const override { return false; }  // frames crossed a wire
  int rx_wait_fd() override { return s_->kick_rank; }
  void rx_wait_arm() override {
    s_->to_rank->set_sleeping(true);
    sleeping_ = true;
    // A frame published before the flag was seen gets no kick: kick ourselves.
    const uint8_t* d;
    uint32_t len;
    if (s_->to_rank->peek(&d, &len) != 0) {
      const uint64_t one = 1;
      (void)!::write(s_->kick_rank, &one, sizeof(one));
    }
  }
  const std::string& name() const override { return s_->name; }
  LinkCounters counters() const override { return c_; }

 private:
  static constexpr size_t kMinBuffers = 2048, kMaxBuffers = 16384, kSmallFrame = 2048;
  bool up() const { return s_->up.load(std::memory_order_relaxed); }

  std::shared_ptr<SwitchSession::Shared> s_;
  FramePool small_, big_;
  LinkCounters c_;
  bool dirty_ = false, sleeping_ = false;
};

}  // namespace

std::unique_ptr<SwitchSession> SwitchSession::attach(const std::string& iface, std::string* error,
                                                     int answer_ms) {
  const std::string path = sw::ctl_path(iface);
  const std::string where = "softrdma-switch on " + iface + " (" + path + ")";
  std::unique_ptr<SwitchSession> s(new SwitchSession);
  s->fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (s->fd_ < 0 || path.size() >= sizeof(a.sun_path)) {
    *error = where + ": socket: " + std::strerror(s->fd_ < 0 ? errno : ENAMETOOLONG);
    return nullptr;
  }
  std::memcpy(a.sun_path, path.c_str(), path.size());
  if (::connect(s->fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    *error = where + ": connect: " + std::strerror(errno) +
             (errno == ENOENT || errno == ECONNREFUSED
                  ? " (is it running? as root: systemctl start softrdma-switch@" + iface + ")"
                  : "");
    return nullptr;
  }
  // Only root's switch gets our frames: a socket another user made there
  // would be a man in the middle.
  ucred cr{};
  socklen_t crl = sizeof(cr);
  if (::getsockopt(s->fd_, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0 || cr.uid != 0) {
    *error = where + ": the process answering is not root's; refused";
    return nullptr;
  }
  sw::Msg hello;
  hello.op = sw::Op::kHello;
  if (::send(s->fd_, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
    *error = where + ": send: " + std::strerror(errno);
    return nullptr;
  }
  pollfd p{s->fd_, POLLIN, 0};
  if (::poll(&p, 1, answer_ms) != 1) {
    *error = where + ": no answer";
    return nullptr;
  }
  sw::Msg w;
  int fds[3] = {-1, -1, -1};
  int got = recv_with_fds(s->fd_, &w, fds, 3);
  auto shared = std::make_shared<Shared>();
  if (got == 3) {
    shared->kick_switch = fds[1];
    shared->kick_rank = fds[2];
  } else {
    for (int i = 0; i < got; ++i) ::close(fds[i]);
  }
  if (got < 0 || w.op != sw::Op::kWelcome || w.rc < 0 || got != 3) {
    *error = where + ": refused: " +
             std::strerror(got < 0 ? -got : w.rc < 0 ? -w.rc : EPROTO);
    if (got == 3) ::close(fds[0]);
    return nullptr;
  }
  const bool shape_ok = w.slots >= 64 && w.slots <= 65536 && (w.slots & (w.slots - 1)) == 0 &&
                        w.slot_size >= w.mtu + 14 && w.slot_size <= 65536 && w.mtu >= 576;
  shared->bytes = 2 * sw::FrameRing::bytes(w.slots, w.slot_size);
  struct stat st{};
  if (shape_ok && ::fstat(fds[0], &st) == 0 && static_cast<size_t>(st.st_size) >= shared->bytes)
    shared->base = ::mmap(nullptr, shared->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  ::close(fds[0]);
  if (shared->base == MAP_FAILED) {
    *error = where + ": its frame rings cannot be mapped";
    return nullptr;
  }
  uint8_t* base = static_cast<uint8_t*>(shared->base);
  shared->to_rank = std::make_unique<sw::FrameRing>(base, w.slots, w.slot_size);
  shared->to_switch = std::make_unique<sw::FrameRing>(
      base + sw::FrameRing::bytes(w.slots, w.slot_size), w.slots, w.slot_size);
  std::memcpy(shared->mac, w.mac, 6);
  shared->mtu = w.mtu;
  shared->offloads = w.offloads;
  shared->name = "switch:" + iface;
  s->shared_ = std::move(shared);
  return s;
}

SwitchSession::~SwitchSession() {
  if (shared_) shared_->up = false;
  if (fd_ >= 0) ::close(fd_);
}

bool SwitchSession::tcp_offloaded() const { return (shared_->offloads & sw::kOffloadTcp) != 0; }

std::unique_ptr<FrameLink> SwitchSession::take_link() {
  return std::make_unique<SwitchLink>(shared_);
}

int SwitchSession::call(const sw::Msg& out, sw::Msg* in) {
  if (!alive()) return -ENETDOWN;
  if (::send(fd_, &out, sizeof(out), MSG_NOSIGNAL) != sizeof(out)) return -errno;
  pollfd p{fd_, POLLIN, 0};
  int none[1];
  if (::poll(&p, 1, kAnswerMs) != 1) return -ETIMEDOUT;
  int rc = recv_with_fds(fd_, in, none, 0);
  if (rc < 0) {
    dead_ = true;
    shared_->up = false;
  }
  return rc < 0 ? rc : 0;
}

int SwitchSession::hold(uint16_t port, uint16_t* got, std::string* error) {
  sw::Msg m, r;
  m.op = sw::Op::kHold;
  m.port = port;
  int rc = call(m, &r);
  if (rc == 0 && r.op != sw::Op::kReply) rc = -EPROTO;
  if (rc == 0) rc = r.rc;
  if (rc < 0) {
    *error = "softrdma-switch: holding TCP port " + std::to_string(port) + ": " + std::strerror(-rc);
    return rc;
  }
  *got = r.port;
  return 0;
}

void SwitchSession::let_go(uint16_t port) {
  sw::Msg m, r;
  m.op = sw::Op::kLetGo;
  m.port = port;
  call(m, &r);
}

bool SwitchSession::alive() {
  if (dead_) return false;
  pollfd p{fd_, POLLIN, 0};
  // The switch speaks only when asked: anything readable now is its end.
  if (::poll(&p, 1, 0) != 0) {
    dead_ = true;
    shared_->up = false;
  }
  return !dead_;
}

}  // namespace softrdma::net
