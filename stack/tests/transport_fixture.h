// Test pieces for any net::Transport: an event recorder that checks the
// callback rules as they happen, random payloads sent through random gather
// lists, a checking consumer, and a fixture over a harness H that makes the
// transports. Used by the contract suite (transport_contract_test.cc) and by
// each transport's own tests.
//
// A harness provides:
//   kName (Transport::name()), kLabel (test name suffix), kOneTransport
//   (client and server ends on one transport, polled with one recorder),
//   kDeadline, kWaitUs / kIdleUs / kBusyUs (poll timeouts while waiting for
//   an event, while idling, while streaming), kExactReset (a reset peer is
//   always -ECONNRESET), kGracefulRelease (release() without close() sends a
//   FIN, not a RST), kResetsUnreportedAccepts (closing a listener resets
//   the connections it had not reported), and the static functions set_up(), tear_down(),
//   make(side) (0 client, 1 server), client_ip(), server_addr(port),
//   unreachable() (connect() fails at once: -ENETUNREACH), max_tx_space(),
//   expect_peer_full(sent, receiver) (checks what the receiver that did not
//   read holds), rescue(listener) (from another thread: ends a poll(-1) that
//   wake() failed to end).
#pragma once

#include <errno.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "stack/net/transport.h"

namespace softrdma::net::testing {

using Clock = std::chrono::steady_clock;

// Records every callback and checks the callback rules as they happen.
class Recorder : public TransportEvents {
 public:
  void on_accept(Listener* l, StreamConn* c) override {
    check_alive(c);
    listener_of[c] = l;
    accepted.push_back(c);
    if (accept_hook) accept_hook(l, c);
  }
  void on_connected(StreamConn* c, int err) override {
    check_alive(c);
    EXPECT_FALSE(connected.contains(c)) << "on_connected twice";
    connected[c] = err;
  }
  void on_readable(StreamConn* c) override {
    check_alive(c);
    ++readable[c];
    if (read_hook) read_hook(c);
  }
  void on_writable(StreamConn* c) override {
    check_alive(c);
    ++writable[c];
  }
  void on_closed(StreamConn* c, int err) override {
    check_alive(c);
    closed[c] = err;
  }

  std::vector<StreamConn*> accepted;
  std::map<StreamConn*, Listener*> listener_of;
  std::map<StreamConn*, int> connected;
  std::map<StreamConn*, int> closed;
  std::map<StreamConn*, int> readable;
  std::map<StreamConn*, int> writable;
  std::set<StreamConn*> forbidden;  // released or aborted: must stay silent
  std::function<void(StreamConn*)> read_hook;
  std::function<void(Listener*, StreamConn*)> accept_hook;

 private:
  void check_alive(StreamConn* c) {
    EXPECT_FALSE(forbidden.contains(c)) << "callback after release/abort";
    EXPECT_FALSE(closed.contains(c)) << "callback after on_closed";
  }
};

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return v;
}

// Sends data[*sent, ...) in chunks cut into random gather lists until done or
// the transport refuses one. The scratch copy is scribbled over after each
// send: tx_send must not keep pointers into the caller's memory.
inline void send_random_chunks(StreamConn* c, const std::vector<uint8_t>& data, size_t* sent,
                               std::mt19937& rng, size_t max_chunk = 256 << 10) {
  std::vector<uint8_t> scratch;
  while (*sent < data.size()) {
    size_t len = std::min<size_t>(data.size() - *sent, rng() % max_chunk + 1);
    scratch.assign(data.begin() + static_cast<ptrdiff_t>(*sent),
                   data.begin() + static_cast<ptrdiff_t>(*sent + len));
    std::vector<size_t> cuts{0, len};
    for (int k = static_cast<int>(rng() % 8); k > 0; --k) cuts.push_back(rng() % (len + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<iovec> iov;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      iov.push_back(iovec{scratch.data() + cuts[i], cuts[i + 1] - cuts[i]});  // empties too
    }
    int r = c->tx_send(iov.data(), static_cast<int>(iov.size()), len);
    if (r == -EAGAIN) {
      EXPECT_LT(c->tx_space(), len);
      break;
    }
    ASSERT_EQ(r, 0);
    std::fill(scratch.begin(), scratch.end(), 0xA5);
    *sent += len;
  }
  c->tx_flush();
}

// Checks and consumes what c has buffered, often leaving a remainder.
struct Sink {
  const std::vector<uint8_t>* data = nullptr;
  size_t received = 0;
  std::mt19937 rng{5};
  bool partial = true;

  void drain(StreamConn* c) {
    RxView v[16];
    size_t n = c->rx_peek(v, 16);
    size_t seen = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_LE(received + seen + v[i].len, data->size());
      ASSERT_EQ(std::memcmp(v[i].data, data->data() + received + seen, v[i].len), 0)
          << "at offset " << received + seen;
      seen += v[i].len;
    }
    if (seen == 0) return;
    size_t take = partial && rng() % 2 ? rng() % seen + 1 : seen;
    c->rx_consume(take);
    received += take;
  }
};

// A read hook that appends everything c has buffered to *out.
inline std::function<void(StreamConn*)> append_to(std::string* out) {
  return [out](StreamConn* c) {
    RxView v[4];
    size_t n = c->rx_peek(v, 4);
    for (size_t i = 0; i < n; ++i) {
      out->append(reinterpret_cast<const char*>(v[i].data), v[i].len);
      c->rx_consume(v[i].len);
    }
  };
}

// Consumes everything c has buffered, unchecked; returns how much.
inline size_t consume_all(StreamConn* c) {
  size_t total = 0;
  RxView v[32];
  for (size_t n; (n = c->rx_peek(v, 32)) > 0;) {
    size_t sum = 0;
    for (size_t i = 0; i < n; ++i) sum += v[i].len;
    c->rx_consume(sum);
    total += sum;
  }
  return total;
}

// Bytes c has buffered, over up to 4096 views.
inline size_t buffered_bytes(StreamConn* c) {
  std::vector<RxView> v(4096);
  size_t n = c->rx_peek(v.data(), v.size());
  size_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += v[i].len;
  return sum;
}

// Transport a_ is the client's, b_ the server's (the same one when
// H::kOneTransport, with one recorder for both: ra_ and rb_ name it).
template <typename H>
class TransportFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    H::set_up();
    own_a_ = H::make(0);
    ASSERT_NE(own_a_, nullptr);
    a_ = own_a_.get();
    if constexpr (H::kOneTransport) {
      b_ = a_;
    } else {
      own_b_ = H::make(1);
      ASSERT_NE(own_b_, nullptr);
      b_ = own_b_.get();
    }
  }
  void TearDown() override {
    own_a_.reset();
    own_b_.reset();
    H::tear_down();
  }

  void poll_both(int timeout_us = 0) {
    EXPECT_GE(a_->poll(ra_, timeout_us), 0);
    if constexpr (!H::kOneTransport) {
      EXPECT_GE(b_->poll(rb_, 0), 0);
    }
  }
  // Polls until pred holds or the limit passes; returns pred().
  bool poll_until(const std::function<bool()>& pred, Clock::duration limit = H::kDeadline) {
    auto end = Clock::now() + limit;
    while (!pred() && Clock::now() < end) poll_both(H::kWaitUs);
    return pred();
  }
  // Polls for a while, for tests that expect nothing to happen.
  void poll_for(Clock::duration d) {
    auto end = Clock::now() + d;
    while (Clock::now() < end) poll_both(H::kIdleUs);
  }

  // The server listens on an ephemeral port, the client connects.
  void connect_pair() {
    ASSERT_EQ(b_->listen(H::server_addr(0), 16, &listener_), 0);
    ASSERT_EQ(a_->connect(listener_->addr(), &client_), 0);
    ASSERT_TRUE(
        poll_until([&] { return ra_.connected.contains(client_) && !rb_.accepted.empty(); }));
    ASSERT_EQ(ra_.connected[client_], 0);
    server_ = rb_.accepted.front();
  }

  void release_pair() {
    a_->release(client_);
    b_->release(server_);
  }

  // Largest chunk send_random_chunks may offer: one the idle stream takes.
  static size_t max_chunk() { return std::min<size_t>(256 << 10, H::max_tx_space()); }

  // bytes each way at once between client_ and server_, random gather lists
  // and random partial consumption, checked byte for byte.
  void stream_both_ways(size_t bytes) {
    const std::vector<uint8_t> ab = random_bytes(bytes, 42), ba = random_bytes(bytes, 43);
    std::mt19937 rng(7);
    size_t sent_ab = 0, sent_ba = 0;
    Sink at_b{&ab}, at_a{&ba};
    auto hook = [&](StreamConn* c) { (c == server_ ? at_b : at_a).drain(c); };
    ra_.read_hook = hook;
    rb_.read_hook = hook;
    auto end = Clock::now() + H::kDeadline;
    while ((at_b.received < ab.size() || at_a.received < ba.size()) && Clock::now() < end) {
      send_random_chunks(client_, ab, &sent_ab, rng, max_chunk());
      send_random_chunks(server_, ba, &sent_ba, rng, max_chunk());
      poll_both(H::kBusyUs);
      at_b.drain(server_);  // a remainder may wait without new data arriving
      at_a.drain(client_);
    }
    ra_.read_hook = nullptr;
    rb_.read_hook = nullptr;
    EXPECT_EQ(at_b.received, ab.size());
    EXPECT_EQ(at_a.received, ba.size());
    EXPECT_TRUE(ra_.closed.empty() && rb_.closed.empty());
  }

  std::unique_ptr<Transport> own_a_, own_b_;
  Transport* a_ = nullptr;
  Transport* b_ = nullptr;
  Recorder ra_, own_rb_;
  Recorder& rb_ = H::kOneTransport ? ra_ : own_rb_;
  Listener* listener_ = nullptr;
  StreamConn* client_ = nullptr;
  StreamConn* server_ = nullptr;
};

}  // namespace softrdma::net::testing
