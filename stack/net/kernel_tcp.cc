// Kernel TCP sockets as the byte-stream transport: non-blocking sockets in a
// level-triggered epoll set, a linear receive buffer per connection that
// rx_peek lends out, and a transmit backlog ring for what the kernel did not
// take. Everything runs on the thread that calls poll(); only wake() may be
// called from another thread.
//
// Callback rules (on top of transport.h):
//  - A connect that fails gets on_connected(c, -errno) and nothing after it.
//  - After on_closed, abort() or release() no callback names the connection.
//    Objects released (or listeners closed) inside poll() are freed only when
//    poll() returns, so events already fetched for them are recognised and
//    dropped instead of touching freed memory.
//  - close() keeps reporting on_readable until the peer's FIN (on_closed 0).
//    release() after close() with bytes still in the backlog keeps the socket
//    alive, without callbacks, until the backlog is written, then shuts it.
//  - The peer's FIN (on_closed 0) does not stop transmission: TCP half-close.
//  - Destroying the transport gives lingering connections up to
//    kCloseDrainBound to write their backlog, then closes every socket;
//    backlog bytes still unwritten then are dropped.

#include "stack/net/kernel_tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "stack/common/pass_clock.h"
#include "stack/net/kernel_tcp_impl.h"

namespace softrdma::net::kernel_tcp_impl {

int set_int_opt(int fd, int level, int name, int value) {
  return ::setsockopt(fd, level, name, &value, sizeof(value)) == 0 ? 0 : -errno;
}

// Every connection: no Nagle (FPDUs are latency-bound messages), and
// keepalive as on the DPDK path (lwipopts.h): an idle connection whose peer
// vanished is found within 5 s + 5 x 1 s instead of never.
int tune_socket(int fd) {
  if (int r = set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1); r < 0) return r;
  if (int r = set_int_opt(fd, SOL_SOCKET, SO_KEEPALIVE, 1); r < 0) return r;
  if (int r = set_int_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE, 5); r < 0) return r;
  if (int r = set_int_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL, 1); r < 0) return r;
  return set_int_opt(fd, IPPROTO_TCP, TCP_KEEPCNT, 5);
}

sockaddr_in sock_name(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  int r = peer ? ::getpeername(fd, sa, &len) : ::getsockname(fd, sa, &len);
  if (r != 0) a = sockaddr_in{};
  return a;
}

// epoll_wait takes milliseconds: round up so a short timeout still waits.
int timeout_ms(int timeout_us) {
  if (timeout_us < 0) return -1;
  return static_cast<int>((int64_t{timeout_us} + 999) / 1000);
}

// ---------------------------------------------------------------------------
// TcpListener
// ---------------------------------------------------------------------------

// Out of descriptors, a pending connection cannot be accepted, and the
// listening fd stays readable: polling would spin while the peer waits out
// its MPA timeout. So one descriptor is kept in reserve: given up to accept
// the connection and close it at once (the peer sees its connection end and
// fails now), then taken again.
static int g_spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

static void refuse_one(int listen_fd) {
  if (g_spare_fd < 0) return;
  ::close(g_spare_fd);
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) ::close(fd);
  g_spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void TcpListener::handle_events(uint32_t /*events*/, TransportEvents& ev) {
  for (int i = 0; i < kAcceptBurst && fd_ >= 0; ++i) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // accept(2): errors of the aborted connection itself; try the next one.
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == ENETDOWN ||
          errno == ENOPROTOOPT || errno == EHOSTDOWN || errno == ENONET || errno == EHOSTUNREACH ||
          errno == ENETUNREACH) {
        continue;
      }
      if (errno == EMFILE || errno == ENFILE) refuse_one(fd_);
      return;  // drained, or out of memory: retry on the next report
    }
    TcpConn* c = transport_.adopt_accepted(fd);
    if (c != nullptr) ev.on_accept(this, c);
  }
}

void TcpListener::shut() {
  if (fd_ < 0) return;
  if (registered_) transport_.epoll_set(this, fd_, EPOLLIN, 0);
  ::close(fd_);
  fd_ = -1;
}

// ---------------------------------------------------------------------------
// KernelTcpTransport
// ---------------------------------------------------------------------------

KernelTcpTransport::KernelTcpTransport(const KernelTcpOptions& options) : options_(options) {
  epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wakefd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!ok()) return;
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.ptr = nullptr;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &e) != 0) {
    ::close(wakefd_);
    wakefd_ = -1;
  }
}

namespace {
// Callbacks for a transport whose engine is gone: released connections make
// none, and no other connection is left.
class NoEvents final : public TransportEvents {
 public:
  void on_accept(Listener*, StreamConn*) override {}
  void on_connected(StreamConn*, int) override {}
  void on_readable(StreamConn*) override {}
  void on_writable(StreamConn*) override {}
  void on_closed(StreamConn*, int) override {}
};
}  // namespace

KernelTcpTransport::~KernelTcpTransport() {
  // Backlogs of connections closed gracefully go to the kernel first (it
  // sends them after close), within kCloseDrainBound.
  auto lingering = [this] {
    return std::any_of(conns_.begin(), conns_.end(),
                       [](const auto& kv) { return kv.second->lingering(); });
  };
  NoEvents none;
  const auto end = std::chrono::steady_clock::now() + kCloseDrainBound;
  while (ok() && lingering() && std::chrono::steady_clock::now() < end) poll(none, 10000);
  pending_.clear();
  conns_.clear();
  listeners_.clear();
  graveyard_.clear();
  if (wakefd_ >= 0) ::close(wakefd_);
  if (epfd_ >= 0) ::close(epfd_);
}

int KernelTcpTransport::epoll_set(PollItem* item, int fd, uint32_t old_events,
                                  uint32_t new_events) {
  epoll_event e{};
  e.events = new_events;
  e.data.ptr = item;
  int op = old_events == 0 ? EPOLL_CTL_ADD : new_events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
  return ::epoll_ctl(epfd_, op, fd, &e) == 0 ? 0 : -errno;
}

int KernelTcpTransport::listen(const sockaddr_in& addr, int backlog, Listener** out) {
  if (out == nullptr) return -EINVAL;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) return -errno;
  int r = set_int_opt(fd, SOL_SOCKET, SO_REUSEADDR, 1);
  if (r == 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) r = -errno;
  if (r == 0 && ::listen(fd, backlog > 0 ? backlog : SOMAXCONN) != 0) r = -errno;
  if (r < 0) {
    ::close(fd);
    return r;
  }
  // getsockname: port 0 was replaced by the ephemeral port the kernel chose.
  auto l = std::make_unique<TcpListener>(*this, fd, sock_name(fd, false));
  if (r = epoll_set(l.get(), fd, 0, EPOLLIN); r < 0) {
    l->forget_registration();
    return r;  // the destructor closes fd
  }
  *out = l.get();
  listeners_.emplace(l.get(), std::move(l));
  return 0;
}

void KernelTcpTransport::close_listener(Listener* l) {
  auto it = listeners_.find(l);
  if (it == listeners_.end()) return;
  it->second->shut();
  std::unique_ptr<PollItem> owned = std::move(it->second);
  listeners_.erase(it);
  bury(std::move(owned));
}

int KernelTcpTransport::connect(const sockaddr_in& peer, StreamConn** out) {
  if (out == nullptr) return -EINVAL;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) return -errno;
  if (int r = tune_socket(fd); r < 0) {
    ::close(fd);
    return r;
  }
  auto owned = std::make_unique<TcpConn>(*this, fd, options_, /*connecting=*/true);
  TcpConn* c = owned.get();
  conns_.emplace(c, std::move(owned));
  c->start_connect(peer);
  *out = c;
  return 0;
}

TcpConn* KernelTcpTransport::adopt_accepted(int fd) {
  if (tune_socket(fd) < 0) {
    ::close(fd);
    return nullptr;
  }
  auto owned = std::make_unique<TcpConn>(*this, fd, options_, /*connecting=*/false);
  owned->start_accepted();
  if (owned->broken()) {  // could not join the epoll set; the dtor closes fd
    std::erase(pending_, owned.get());
    return nullptr;
  }
  TcpConn* c = owned.get();
  conns_.emplace(c, std::move(owned));
  return c;
}

void KernelTcpTransport::release(StreamConn* c) {
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  if (it->second->begin_release()) return;  // lingers until its backlog is out
  destroy(it->second.get());
}

void KernelTcpTransport::destroy(TcpConn* c) {
  std::erase(pending_, c);
  c->drop_fd();
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  std::unique_ptr<PollItem> owned = std::move(it->second);
  conns_.erase(it);
  bury(std::move(owned));
}

// Inside poll() the object may still be named by fetched events or by the
// caller's stack frames, so it is freed only when poll() returns.
void KernelTcpTransport::bury(std::unique_ptr<PollItem> item) {
  if (poll_depth_ > 0) graveyard_.push_back(std::move(item));
}

int KernelTcpTransport::poll(TransportEvents& ev, int timeout_us) {
  int ms = pending_.empty() ? timeout_ms(timeout_us) : 0;
  epoll_event events[kMaxEvents];
  int n = ::epoll_wait(epfd_, events, kMaxEvents, ms);
  pass_clock::refresh();
  if (n < 0) {
    if (errno != EINTR) return -errno;
    n = 0;  // a signal: report no events, the caller polls again
  }
  ++poll_depth_;
  int handled = 0;
  for (int i = 0; i < n; ++i) {
    auto* item = static_cast<PollItem*>(events[i].data.ptr);
    if (item == nullptr) {
      drain_wake();  // a wake is not an I/O event: not counted
      continue;
    }
    item->handle_events(events[i].events, ev);
    ++handled;
  }
  handled += run_pending(ev);
  if (--poll_depth_ == 0) graveyard_.clear();
  return handled;
}

int KernelTcpTransport::run_pending(TransportEvents& ev) {
  int handled = 0;
  while (!pending_.empty()) {
    std::vector<TcpConn*> batch;
    batch.swap(pending_);
    for (TcpConn* c : batch) {
      c->deliver_pending(ev);
      ++handled;
    }
  }
  return handled;
}

void KernelTcpTransport::wake() {
  uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: a wake is pending anyway.
  while (::write(wakefd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void KernelTcpTransport::drain_wake() {
  uint64_t v;
  while (::read(wakefd_, &v, sizeof(v)) < 0 && errno == EINTR) {
  }
}

}  // namespace softrdma::net::kernel_tcp_impl

namespace softrdma::net {

using kernel_tcp_impl::KernelTcpTransport;

std::unique_ptr<Transport> make_kernel_tcp_transport(const KernelTcpOptions& options) {
  auto t = std::make_unique<KernelTcpTransport>(options);
  if (!t->ok()) return nullptr;
  return t;
}

std::unique_ptr<Transport> make_kernel_tcp_transport() {
  return make_kernel_tcp_transport(KernelTcpOptions{});
}

}  // namespace softrdma::net
