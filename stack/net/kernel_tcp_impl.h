// The kernel TCP transport's classes, shared by kernel_tcp.cc (the
// transport, its listeners and event loop) and kernel_tcp_conn.cc (a
// connection). Private to stack/net.
#pragma once

#include <netinet/in.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "stack/net/kernel_tcp.h"
#include "stack/net/transport.h"

namespace softrdma::net::kernel_tcp_impl {

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

int set_int_opt(int fd, int level, int name, int value);
int tune_socket(int fd);
sockaddr_in sock_name(int fd, bool peer);

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
  void offer(TransportEvents& ev);
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

}  // namespace softrdma::net::kernel_tcp_impl
