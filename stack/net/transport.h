// The byte-stream transport the iWARP layers run on (the LLP of RFC 5044).
//
// Two implementations plug in here: kernel TCP sockets (kernel_tcp.cc, the
// fallback and yardstick) and lwIP on DPDK (the product). The iWARP engine
// never sees which one it runs on.
//
// Receive is zero-copy at this boundary: the transport owns its receive
// buffers (a socket ring, or NIC mbufs under lwIP pbufs) and lends read-only
// views of them; the engine places payload straight from those views into
// registered memory, then says how much it consumed. Transmit takes a gather
// list and accepts it whole or not at all, so the engine never tracks
// partially written FPDUs; the transport keeps the tail if the wire is busy.
//
// Received bytes are pushed: the transport offers its views to the owner's
// receive entry (TransportEvents::on_data) as soon as it has them, and the
// owner says how much it took; rx_peek/rx_consume let it pull the rest later.
// Calls are made with batch granularity (one offer per receive batch, one
// send per FPDU), so the virtual dispatch is off the per-byte path.
#pragma once

#include <netinet/in.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "stack/counters.h"

namespace softrdma::net {

// StreamConn::max_segment() of a stream with no segment size to align to.
inline constexpr size_t kNoSegmentLimit = SIZE_MAX;

struct RxView {
  const uint8_t* data;
  size_t len;
};

class StreamConn {
 public:
  virtual ~StreamConn() = default;

  // Up to max views of received, not yet consumed bytes, in stream order.
  // Returns the number of views filled (0: nothing buffered).
  virtual size_t rx_peek(RxView* views, size_t max) = 0;
  // Releases the first n bytes of what rx_peek showed.
  virtual void rx_consume(size_t n) = 0;

  // Bytes tx_send would accept now. FPDUs are built only when they fit.
  virtual size_t tx_space() const = 0;
  // Queues all bytes of iov (total bytes) or none: 0, or -EAGAIN when
  // tx_space() < total, or a negative errno when the stream is broken.
  // The caller's memory may be reused as soon as it returns.
  virtual int tx_send(const iovec* iov, int cnt, size_t total) = 0;
  // Pushes queued bytes to the wire now (transports may batch until then).
  virtual void tx_flush() = 0;

  // Payload bytes of the largest segment the stream sends (its TCP MSS), so
  // the layer above can line its messages up with segments (iWARP's FPDUs,
  // stack/iwarp/fpdu_size.h); kNoSegmentLimit when there is none to know.
  virtual size_t max_segment() const = 0;

  // Graceful close after queued bytes drain; abort() resets at once.
  virtual void close() = 0;
  virtual void abort() = 0;

  virtual sockaddr_in local_addr() const = 0;
  virtual sockaddr_in peer_addr() const = 0;

  void* owner = nullptr;  // the engine's object for this stream
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual sockaddr_in addr() const = 0;  // bound address and real port
  void* owner = nullptr;
};

// Readiness callbacks, made from inside Transport::poll on the polling thread.
class TransportEvents {
 public:
  virtual ~TransportEvents() = default;
  virtual void on_accept(Listener* l, StreamConn* c) = 0;
  virtual void on_connected(StreamConn* c, int err) = 0;  // err: 0 or -errno
  virtual void on_readable(StreamConn* c) = 0;
  // The receive entry: received bytes, offered in stream order the moment
  // the transport has them (lwIP: in the progress pass that took the frames
  // in, under the lock that pass holds; kernel TCP: right after its read).
  // Returns how many leading bytes the owner consumed; the rest stay queued
  // in order and are offered again with the next bytes, or pulled with
  // rx_peek/rx_consume when the owner can take more. The owner may instead
  // pull inside the call and return 0 (what this default does: on_readable).
  // The views are valid only during the call.
  virtual size_t on_data(StreamConn* c, const RxView* /*views*/, size_t /*n*/) {
    on_readable(c);
    return 0;
  }
  virtual void on_writable(StreamConn* c) = 0;
  // The stream is gone (peer closed, reset, error). err is 0 for an orderly
  // close by the peer. The connection object stays valid until release().
  virtual void on_closed(StreamConn* c, int err) = 0;
};

// Destroying a transport first gives the connections released after a
// graceful close() up to this long to get their queued bytes out (a Send the
// application saw complete must arrive); a live peer takes microseconds, a
// stuck one is given up on.
inline constexpr std::chrono::milliseconds kCloseDrainBound{1000};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  // Listen on addr (port 0: pick one). Returns 0 or -errno.
  virtual int listen(const sockaddr_in& addr, int backlog, Listener** out) = 0;
  virtual void close_listener(Listener* l) = 0;
  // Starts a connection; on_connected reports the outcome.
  virtual int connect(const sockaddr_in& peer, StreamConn** out) = 0;
  // As connect, from local (address and port; the caller holds the port).
  // Transports that cannot choose their source refuse (-EOPNOTSUPP).
  virtual int connect_from(const sockaddr_in& /*local*/, const sockaddr_in& /*peer*/,
                           StreamConn** /*out*/) {
    return -EOPNOTSUPP;
  }
  // The address a listener answers on as peers should name it (its bound
  // one unless the transport listens on several).
  virtual sockaddr_in listen_addr(Listener* l) const { return l->addr(); }
  // Frees a connection object after close()/abort(); no callbacks follow.
  virtual void release(StreamConn* c) = 0;

  // Runs I/O: waits up to timeout_us (0: just poll, -1: block) for events
  // and dispatches them. Returns the number of events handled or -errno.
  // Each pass it makes starts with pass_clock::refresh(), so the engine and
  // the layers below share one clock read per pass.
  virtual int poll(TransportEvents& ev, int timeout_us) = 0;
  // Wakes a poll() blocked in another thread.
  virtual void wake() = 0;
  // A file descriptor that polls readable when poll() has work (-1: none,
  // the transport must be busy-polled, as DPDK ports are).
  virtual int wait_fd() const { return -1; }
  // Fills the link, TCP and pool fields of *c that this transport knows
  // (Engine::counters; the kernel knows its own and fills none).
  virtual void add_counters(Counters* /*c*/) const {}
  // Names the owner whose receive entry (TransportEvents::on_data) takes
  // this transport's received bytes from any progress pass of the process,
  // not only from its own poll(): all of them run under the one process
  // lock (big_lock.h). The owner must outlive the transport. Transports that
  // offer only from their own poll() ignore it.
  virtual void set_receiver(TransportEvents* /*owner*/) {}
  // For a connect that failed with err (-ENETUNREACH, -EHOSTUNREACH): the
  // user's settings that decided it (a configured port's address, network
  // and gateway), so the error can name them; empty when none did.
  virtual std::string unreachable_why(int /*err*/) const { return {}; }
};

std::unique_ptr<Transport> make_kernel_tcp_transport();

}  // namespace softrdma::net
