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
#include <limits.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "stack/common/pass_clock.h"

namespace softrdma::net {
namespace {

// A receive remainder up to this size is moved to the buffer front when the
// tail hits the end. It must exceed one FPDU, or an engine that consumes only
// whole FPDUs could wait forever on a partial one stuck at the end.
constexpr size_t kMinCompactBytes = size_t{128} << 10;
constexpr int kMaxEvents = 128;
// Accepts per listener readiness report, so one busy listener cannot starve
// the connections in the same poll().
constexpr int kAcceptBurst = 64;

class KernelTcpTransport;

// Anything registered in the epoll set. The wake eventfd is registered with a
// null pointer instead.
class PollItem {
 public:
  virtual ~PollItem() = default;
  virtual void handle_events(uint32_t events, TransportEvents& ev) = 0;
};

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

class TcpConn final : public StreamConn, public PollItem {
 public:
  TcpConn(KernelTcpTransport& transport, int fd, const KernelTcpOptions& options, bool connecting);
  ~TcpConn() override { drop_fd(); }
  TcpConn(const TcpConn&) = delete;
  TcpConn& operator=(const TcpConn&) = delete;

  size_t rx_peek(RxView* views, size_t max) override;
  void rx_consume(size_t n) override;
  size_t tx_space() const override { return tx_cap_ - tx_len_; }
  int tx_send(const iovec* iov, int cnt, size_t total) override;
  // No-op: tx_send hands bytes to the kernel at once when nothing is queued,
  // and a non-empty backlog means the socket buffer is full, so pushing now
  // would only hit EAGAIN; EPOLLOUT drains the backlog as soon as it can.
  void tx_flush() override {}
  size_t max_segment() const override { return max_segment_; }
  void close() override;
  void abort() override;
  sockaddr_in local_addr() const override { return local_; }
  sockaddr_in peer_addr() const override { return peer_; }

  void handle_events(uint32_t events, TransportEvents& ev) override;

  // Transport side.
  void start_connect(const sockaddr_in& peer);
  void start_accepted();
  // Marks the connection released; returns true if it must linger to flush
  // its backlog after close(), false if it can be freed now.
  bool begin_release();
  void deliver_pending(TransportEvents& ev);
  void drop_fd();
  bool broken() const { return err_ != 0; }
  bool lingering() const { return released_ && fd_ >= 0; }

 private:
  enum class State : uint8_t { kConnecting, kOpen };

  bool can_notify() const { return !released_ && !done_; }
  bool rx_compactable() const;
  bool rx_blocked() const { return rx_tail_ == rx_cap_ && !rx_compactable(); }
  bool can_read() const;
  uint32_t wanted_events() const;
  void update_epoll();
  void cache_endpoints();

  void finish_connect(uint32_t events, TransportEvents& ev);
  void read_ready(TransportEvents& ev);
  void write_ready(TransportEvents& ev);
  void check_socket_error(TransportEvents& ev);
  void notify_closed(TransportEvents& ev, int err);
  // Records a broken stream found outside an event; poll() reports it.
  void fail(int err);

  int read_socket(size_t* got, bool* eof);
  int send_direct(const iovec* iov, int cnt, size_t* sent);
  int flush_backlog();
  void backlog_append(const iovec* iov, int cnt, size_t skip);
  void maybe_shutdown();

  KernelTcpTransport& transport_;
  int fd_;
  State state_;
  uint32_t events_ = 0;  // mask registered with epoll; 0: not registered
  int err_ = 0;          // sticky -errno once the stream broke
  int pending_err_ = 0;  // what deliver_pending reports
  bool notify_pending_ = false;
  bool done_ = false;  // terminal callback made, or aborted: no more callbacks
  bool released_ = false;
  bool eof_ = false;
  bool close_requested_ = false;
  bool wr_shut_ = false;

  std::unique_ptr<uint8_t[]> rx_buf_;
  size_t rx_cap_;
  size_t rx_compact_limit_;
  size_t rx_head_ = 0;
  size_t rx_tail_ = 0;

  std::unique_ptr<uint8_t[]> tx_buf_;  // ring, allocated on first use
  size_t tx_cap_;
  size_t tx_head_ = 0;
  size_t tx_len_ = 0;

  size_t max_segment_ = kNoSegmentLimit;  // the kernel's MSS once connected
  sockaddr_in local_{};
  sockaddr_in peer_{};
};

class TcpListener final : public Listener, public PollItem {
 public:
  TcpListener(KernelTcpTransport& transport, int fd, const sockaddr_in& addr)
      : transport_(transport), fd_(fd), addr_(addr) {}
  ~TcpListener() override { shut(); }
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  sockaddr_in addr() const override { return addr_; }
  void handle_events(uint32_t events, TransportEvents& ev) override;
  void shut();
  void forget_registration() { registered_ = false; }

 private:
  KernelTcpTransport& transport_;
  int fd_;
  bool registered_ = true;
  sockaddr_in addr_;
};

class KernelTcpTransport final : public Transport {
 public:
  explicit KernelTcpTransport(const KernelTcpOptions& options);
  ~KernelTcpTransport() override;
  KernelTcpTransport(const KernelTcpTransport&) = delete;
  KernelTcpTransport& operator=(const KernelTcpTransport&) = delete;

  bool ok() const { return epfd_ >= 0 && wakefd_ >= 0; }

  const char* name() const override { return "kernel-tcp"; }
  int listen(const sockaddr_in& addr, int backlog, Listener** out) override;
  void close_listener(Listener* l) override;
  int connect(const sockaddr_in& peer, StreamConn** out) override;
  void release(StreamConn* c) override;
  int poll(TransportEvents& ev, int timeout_us) override;
  void wake() override;
  int wait_fd() const override { return epfd_; }

  // For connections and listeners.
  int epoll_set(PollItem* item, int fd, uint32_t old_events, uint32_t new_events);
  void schedule_notify(TcpConn* c) { pending_.push_back(c); }
  TcpConn* adopt_accepted(int fd);
  void destroy(TcpConn* c);

 private:
  int run_pending(TransportEvents& ev);
  void drain_wake();
  void bury(std::unique_ptr<PollItem> item);

  KernelTcpOptions options_;
  int epfd_ = -1;
  int wakefd_ = -1;
  int poll_depth_ = 0;
  std::unordered_map<StreamConn*, std::unique_ptr<TcpConn>> conns_;
  std::unordered_map<Listener*, std::unique_ptr<TcpListener>> listeners_;
  std::vector<TcpConn*> pending_;                     // conns with a deliver_pending due
  std::vector<std::unique_ptr<PollItem>> graveyard_;  // freed when poll() returns
};

// ---------------------------------------------------------------------------
// TcpConn
// ---------------------------------------------------------------------------

TcpConn::TcpConn(KernelTcpTransport& transport, int fd, const KernelTcpOptions& options,
                 bool connecting)
    : transport_(transport),
      fd_(fd),
      state_(connecting ? State::kConnecting : State::kOpen),
      rx_cap_(std::max(options.rx_buffer_bytes, kKernelTcpMinRxBuffer)),
      tx_cap_(std::max(options.tx_backlog_bytes, kKernelTcpMinTxBacklog)) {
  rx_compact_limit_ = std::min(rx_cap_, std::max(rx_cap_ / 4, kMinCompactBytes));
  rx_buf_ = std::make_unique_for_overwrite<uint8_t[]>(rx_cap_);
}

void TcpConn::start_connect(const sockaddr_in& peer) {
  peer_ = peer;
  int r = ::connect(fd_, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer));
  int e = r == 0 ? 0 : errno;
  local_ = sock_name(fd_, false);
  // Even an immediate success is reported from poll(): EPOLLOUT fires at once.
  if (e == 0 || e == EINPROGRESS || e == EINTR || e == EALREADY) {
    update_epoll();
  } else {
    fail(-e);
  }
}

void TcpConn::start_accepted() {
  cache_endpoints();
  update_epoll();
}

void TcpConn::cache_endpoints() {
  local_ = sock_name(fd_, false);
  peer_ = sock_name(fd_, true);
  // Loopback reports an MSS near 64 KiB, Ethernet ~1448; iWARP sizes its
  // FPDUs to it, so TCP segment and FPDU boundaries line up.
  int mss = 0;
  socklen_t len = sizeof(mss);
  if (::getsockopt(fd_, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) == 0 && mss > 0) {
    max_segment_ = static_cast<size_t>(mss);
  }
}

bool TcpConn::rx_compactable() const {
  return rx_head_ > 0 && rx_tail_ - rx_head_ <= rx_compact_limit_;
}

bool TcpConn::can_read() const {
  return fd_ >= 0 && state_ == State::kOpen && err_ == 0 && !released_ && !done_ && !eof_ &&
         !rx_blocked();
}

uint32_t TcpConn::wanted_events() const {
  if (fd_ < 0 || err_ != 0) return 0;
  if (state_ == State::kConnecting) return EPOLLOUT;
  uint32_t m = 0;
  if (can_read()) m |= EPOLLIN;
  if (tx_len_ > 0) m |= EPOLLOUT;
  return m;
}

// Not registered at all when nothing is wanted: EPOLLHUP and EPOLLERR cannot
// be masked, and a full receive buffer on a hung-up socket would otherwise
// make a level-triggered epoll spin.
void TcpConn::update_epoll() {
  uint32_t want = wanted_events();
  if (want == events_) return;
  int r = transport_.epoll_set(this, fd_, events_, want);
  if (r == 0 || want == 0) {
    events_ = want;
    return;
  }
  fail(r);  // could not (re)arm: the stream would stall silently otherwise
}

size_t TcpConn::rx_peek(RxView* views, size_t max) {
  if (max == 0 || rx_head_ == rx_tail_) return 0;
  views[0] = RxView{rx_buf_.get() + rx_head_, rx_tail_ - rx_head_};
  return 1;
}

// Never moves unconsumed bytes (views of them stay valid); compaction happens
// only in the read path, before the next on_readable.
void TcpConn::rx_consume(size_t n) {
  rx_head_ += std::min(n, rx_tail_ - rx_head_);
  if (rx_head_ == rx_tail_) rx_head_ = rx_tail_ = 0;
  update_epoll();  // re-enables EPOLLIN if the buffer was full
}

int TcpConn::tx_send(const iovec* iov, int cnt, size_t total) {
  if (err_ != 0) return err_;
  if (fd_ < 0 || close_requested_) return -EPIPE;
  size_t sum = 0;
  for (int i = 0; i < cnt; ++i) sum += iov[i].iov_len;
  if (cnt < 0 || sum != total) return -EINVAL;
  if (total == 0) return 0;
  if (total > tx_space()) return -EAGAIN;
  size_t sent = 0;
  // Bytes already queued must go first, so only an empty backlog sends direct.
  if (state_ == State::kOpen && tx_len_ == 0) {
    int r = send_direct(iov, cnt, &sent);
    if (r < 0) {
      fail(r);
      return r;
    }
  }
  if (sent < total) {
    backlog_append(iov, cnt, sent);
    update_epoll();
  }
  return 0;
}

int TcpConn::send_direct(const iovec* iov, int cnt, size_t* sent) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(std::min(cnt, IOV_MAX));  // the rest is queued
  for (;;) {
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      *sent = static_cast<size_t>(n);
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

void TcpConn::backlog_append(const iovec* iov, int cnt, size_t skip) {
  if (!tx_buf_) tx_buf_ = std::make_unique_for_overwrite<uint8_t[]>(tx_cap_);
  for (int i = 0; i < cnt; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    size_t len = iov[i].iov_len;
    if (skip >= len) {
      skip -= len;
      continue;
    }
    p += skip;
    len -= skip;
    skip = 0;
    size_t tail = (tx_head_ + tx_len_) % tx_cap_;
    size_t first = std::min(len, tx_cap_ - tail);
    std::memcpy(tx_buf_.get() + tail, p, first);
    std::memcpy(tx_buf_.get(), p + first, len - first);
    tx_len_ += len;
  }
}

// Writes the backlog until it is empty or the socket is full. Returns 0 or
// -errno.
int TcpConn::flush_backlog() {
  while (tx_len_ > 0) {
    iovec v[2];
    size_t first = std::min(tx_len_, tx_cap_ - tx_head_);
    v[0] = iovec{tx_buf_.get() + tx_head_, first};
    v[1] = iovec{tx_buf_.get(), tx_len_ - first};
    msghdr msg{};
    msg.msg_iov = v;
    msg.msg_iovlen = v[1].iov_len > 0 ? 2 : 1;
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -errno;
    }
    size_t wrote = static_cast<size_t>(n);
    tx_head_ = (tx_head_ + wrote) % tx_cap_;
    tx_len_ -= wrote;
    if (tx_len_ == 0) tx_head_ = 0;
    // A short write means the socket buffer is full; EPOLLOUT says when not.
    if (wrote < first + v[1].iov_len) return 0;
  }
  return 0;
}

void TcpConn::maybe_shutdown() {
  if (!close_requested_ || wr_shut_ || fd_ < 0 || err_ != 0) return;
  if (state_ != State::kOpen || tx_len_ > 0) return;
  ::shutdown(fd_, SHUT_WR);
  wr_shut_ = true;
}

void TcpConn::close() {
  if (fd_ < 0 || close_requested_) return;
  close_requested_ = true;
  maybe_shutdown();
}

void TcpConn::abort() {
  if (fd_ < 0) return;
  // Zero linger turns close() into a RST instead of a FIN.
  linger lg{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  drop_fd();
  done_ = true;
  if (err_ == 0) err_ = -ECONNABORTED;
  tx_len_ = 0;
}

void TcpConn::drop_fd() {
  if (fd_ < 0) return;
  if (events_ != 0) transport_.epoll_set(this, fd_, events_, 0);
  events_ = 0;
  ::close(fd_);  // on Linux the fd is gone even on EINTR: never retry
  fd_ = -1;
}

bool TcpConn::begin_release() {
  if (released_) return fd_ >= 0;
  released_ = true;
  bool lingers = fd_ >= 0 && close_requested_ && err_ == 0 && tx_len_ > 0;
  if (lingers) update_epoll();  // keep EPOLLOUT only
  return lingers;
}

void TcpConn::fail(int err) {
  if (err_ == 0) err_ = err;
  tx_len_ = 0;
  update_epoll();
  if (notify_pending_ || !can_notify()) return;
  notify_pending_ = true;
  pending_err_ = err;
  transport_.schedule_notify(this);
}

void TcpConn::deliver_pending(TransportEvents& ev) {
  notify_pending_ = false;
  if (!can_notify()) return;
  if (state_ == State::kConnecting) {
    done_ = true;
    ev.on_connected(this, pending_err_);
  } else {
    notify_closed(ev, pending_err_);
  }
}

void TcpConn::notify_closed(TransportEvents& ev, int err) {
  done_ = true;
  update_epoll();
  ev.on_closed(this, err);
}

void TcpConn::handle_events(uint32_t events, TransportEvents& ev) {
  if (fd_ < 0) return;  // aborted or released earlier in this batch
  if (state_ == State::kConnecting) {
    finish_connect(events, ev);
  } else {
    bool handled = false;
    if (can_read() && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
      read_ready(ev);
      handled = true;
    }
    if (fd_ >= 0 && err_ == 0 && tx_len_ > 0 && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      write_ready(ev);
      handled = true;
    }
    if (!handled && (events & EPOLLERR)) check_socket_error(ev);
  }
  update_epoll();
}

void TcpConn::finish_connect(uint32_t events, TransportEvents& ev) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0 && (events & (EPOLLERR | EPOLLHUP))) err = ECONNABORTED;
  if (err == 0 && !(events & EPOLLOUT)) return;
  if (err != 0) {
    err_ = -err;
    update_epoll();
    if (released_) {
      transport_.destroy(this);
    } else if (can_notify()) {
      done_ = true;
      ev.on_connected(this, -err);
    }
    return;
  }
  state_ = State::kOpen;
  cache_endpoints();
  update_epoll();
  if (can_notify()) ev.on_connected(this, 0);
  // Bytes queued while connecting can go now: the socket just became writable.
  if (fd_ >= 0 && err_ == 0 && tx_len_ > 0) {
    write_ready(ev);
  } else {
    maybe_shutdown();
  }
}

// Reads until the buffer is full or the socket is drained. A short read is
// taken as drained: level-triggered epoll reports any later data again, and it
// saves the extra recv() that would only return EAGAIN. Returns 0 or -errno.
int TcpConn::read_socket(size_t* got, bool* eof) {
  for (;;) {
    if (rx_tail_ == rx_cap_) {
      if (!rx_compactable()) return 0;
      size_t len = rx_tail_ - rx_head_;
      std::memmove(rx_buf_.get(), rx_buf_.get() + rx_head_, len);
      rx_head_ = 0;
      rx_tail_ = len;
    }
    size_t room = rx_cap_ - rx_tail_;
    ssize_t n = ::recv(fd_, rx_buf_.get() + rx_tail_, room, 0);
    if (n > 0) {
      rx_tail_ += static_cast<size_t>(n);
      *got += static_cast<size_t>(n);
      if (static_cast<size_t>(n) < room) return 0;
      continue;
    }
    if (n == 0) {
      *eof = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

void TcpConn::read_ready(TransportEvents& ev) {
  size_t got = 0;
  bool eof = false;
  int err = read_socket(&got, &eof);
  eof_ = eof;
  if (err != 0) {
    err_ = err;
    tx_len_ = 0;
  }
  update_epoll();
  // Data first, then the end of the stream, so no byte is lost to the engine.
  if (got > 0 && can_notify()) ev.on_readable(this);
  if ((eof || err != 0) && can_notify()) notify_closed(ev, err);
}

void TcpConn::write_ready(TransportEvents& ev) {
  int err = flush_backlog();
  if (err != 0) {
    err_ = err;
    tx_len_ = 0;
  }
  if (released_) {  // lingering after close(): finish quietly
    if (tx_len_ == 0) {
      maybe_shutdown();
      transport_.destroy(this);
    }
    return;
  }
  if (err != 0) {
    if (can_notify()) notify_closed(ev, err);
    return;
  }
  if (tx_len_ > 0) return;
  update_epoll();
  maybe_shutdown();
  if (can_notify() && !close_requested_) ev.on_writable(this);
}

void TcpConn::check_socket_error(TransportEvents& ev) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0) return;
  err_ = -err;
  tx_len_ = 0;
  if (released_) {
    transport_.destroy(this);
  } else if (can_notify()) {
    notify_closed(ev, -err);
  }
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

}  // namespace

std::unique_ptr<Transport> make_kernel_tcp_transport(const KernelTcpOptions& options) {
  auto t = std::make_unique<KernelTcpTransport>(options);
  if (!t->ok()) return nullptr;
  return t;
}

std::unique_ptr<Transport> make_kernel_tcp_transport() {
  return make_kernel_tcp_transport(KernelTcpOptions{});
}

}  // namespace softrdma::net
