// Kernel TCP transport: a connection (TcpConn). Its receive buffer that
// rx_peek lends out, its transmit backlog ring, and its epoll events.
#include <errno.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "stack/net/kernel_tcp_impl.h"

namespace softrdma::net::kernel_tcp_impl {

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
  if (got > 0 && can_notify()) offer(ev);
  if ((eof || err != 0) && can_notify()) notify_closed(ev, err);
}

// The pull adapter into the owner's receive entry: the ring's bytes, read
// above, offered as one view.
void TcpConn::offer(TransportEvents& ev) {
  RxView v;
  if (rx_peek(&v, 1) == 0) return;
  const size_t used = ev.on_data(this, &v, 1);
  if (used > 0 && can_notify()) rx_consume(used);
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

}  // namespace softrdma::net::kernel_tcp_impl
