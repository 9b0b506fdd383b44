// The iWARP engine over the lwIP transport, and the transport's own speed,
// on in-process pipe links driven by busy polling from one thread:
//  - two Engines (10.0.0.1 and 10.0.0.2, each leaving by its own link)
//    move a verified Send, Write and Read of a few MiB;
//  - raw transport figures: 64-byte ping-pong RTT and one-way bulk rate, on
//    a link that skips checksums (memif-like) and on one that computes them.
// Both sides share the one CPU here, so the rates are for two stacks and
// the pipe together, not for one side.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "stack/engine.h"
#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/lwip/tests/lwip_wire.h"
#include "stack/tests/transport_fixture.h"
#include "stack/tests/loopback.h"

namespace softrdma {
namespace {

using Clock = std::chrono::steady_clock;
using net::LinkChecksums;
using net::LwipStack;
using net::StreamConn;
using net::testing::addr;
using net::testing::consume_all;
using net::testing::ip4;

// Pipes between two links, each address routed out of its own end. They
// take no lent frames, so the stack copies every frame into a link buffer,
// as for ports that DMA (lwip_transport_test covers lending).
class Wires : public ::testing::Environment {
 public:
  void SetUp() override {
    const net::testing::PipeOptions copying{
        .mtu = 1500, .buffers = 32768, .wait_fd = false, .lend = false};
    net::testing::add_wire("10.0.0.1", "10.0.0.2", copying, LinkChecksums::kNone);
    net::testing::add_wire("10.0.3.1", "10.0.3.2", copying, LinkChecksums::kFull);
  }
};
const auto* const kWires = ::testing::AddGlobalTestEnvironment(new Wires);

struct Side {
  std::unique_ptr<Engine> eng;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  std::vector<Wc> wcs;

  explicit Side(const char* ip) {
    auto t = net::make_lwip_transport({.source = ip4(ip)});
    eng = std::make_unique<Engine>(EngineConfig{}, std::move(t));
    pd = eng->alloc_pd();
    cq = eng->create_cq(256);
    qp = eng->create_qp({.pd = pd, .send_cq = cq, .recv_cq = cq});
  }
  void reap() {
    Wc buf[16];
    for (int n; (n = eng->poll_cq(cq, buf, 16)) > 0;) wcs.insert(wcs.end(), buf, buf + n);
  }
  Mr* reg(std::vector<uint8_t>& b, uint32_t access) {
    return eng->reg_mr(pd, b.data(), b.size(), access);
  }
};

TEST(LwipEngine, SendWriteReadOverPipeLinks) {
  Side a("10.0.0.1"), b("10.0.0.2");
  ASSERT_STREQ(a.eng->transport_name(), "lwip");
  auto run = [&](const std::function<bool()>& pred) {
    return testing::run_until({a.eng.get(), b.eng.get()}, [&] {
      a.reap();
      b.reap();
      return pred();
    });
  };

  Listener* l = nullptr;
  ASSERT_EQ(b.eng->listen(addr("10.0.0.2", 0), 4, &l), 0);
  const uint8_t pdata[] = {1, 2, 3};
  ASSERT_EQ(a.eng->connect(a.qp, b.eng->listen_addr(l), pdata, sizeof(pdata)), 0);
  bool a_up = false, b_up = false;
  ASSERT_TRUE(run([&] {
    CmEvent ev;
    while (b.eng->poll_cm(&ev)) {
      if (ev.type == CmEventType::kConnectRequest) {
        EXPECT_EQ(ev.private_data, std::vector<uint8_t>(pdata, pdata + 3));
        EXPECT_EQ(ev.peer.sin_addr.s_addr, ip4("10.0.0.1").s_addr);
        b.eng->accept(ev.req, b.qp, nullptr, 0);
      }
      b_up |= ev.type == CmEventType::kEstablished;
    }
    while (a.eng->poll_cm(&ev)) {
      EXPECT_EQ(ev.type, CmEventType::kEstablished);
      a_up |= ev.type == CmEventType::kEstablished;
    }
    return a_up && b_up;
  }));

  constexpr size_t kLen = 6 << 20;
  std::vector<uint8_t> src = testing::pattern(kLen, 1), dst(kLen, 0), back(kLen, 0);
  Mr* ms = a.reg(src, kAccessLocalWrite | kAccessRemoteRead);
  Mr* mb = a.reg(back, kAccessLocalWrite);
  Mr* md = b.reg(dst, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);

  auto timed = [&](const char* what, const std::function<bool()>& pred) {
    auto t0 = Clock::now();
    bool ok = run(pred);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("[ metric ] engine over lwIP/pipe: %s of %zu MiB in %.1f ms (%.2f Gbit/s)\n", what,
                kLen >> 20, s * 1e3, kLen * 8 / s / 1e9);
    return ok;
  };

  RecvWr rw{.wr_id = 7, .num_sge = 1};
  rw.sg_list[0] = testing::sge(dst, md);
  ASSERT_EQ(b.eng->post_recv(b.qp, rw), 0);
  SendWr sw{.wr_id = 1, .opcode = WrOpcode::kSend, .num_sge = 1};
  sw.sg_list[0] = testing::sge(src, ms);
  ASSERT_EQ(a.eng->post_send(a.qp, sw), 0);
  ASSERT_TRUE(timed("Send", [&] { return a.wcs.size() == 1 && b.wcs.size() == 1; }));
  EXPECT_EQ(a.wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(b.wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(b.wcs[0].byte_len, kLen);
  EXPECT_TRUE(dst == src);

  std::fill(dst.begin(), dst.end(), 0);
  SendWr ww{.wr_id = 2,
            .opcode = WrOpcode::kWrite,
            .num_sge = 1,
            .remote_addr = reinterpret_cast<uint64_t>(dst.data()),
            .rkey = md->stag};
  ww.sg_list[0] = testing::sge(src, ms);
  ASSERT_EQ(a.eng->post_send(a.qp, ww), 0);
  // A Write completes when sent; the Read behind it returns the placed data.
  SendWr rd{.wr_id = 3,
            .opcode = WrOpcode::kRead,
            .num_sge = 1,
            .remote_addr = reinterpret_cast<uint64_t>(dst.data()),
            .rkey = md->stag};
  rd.sg_list[0] = testing::sge(back, mb);
  ASSERT_EQ(a.eng->post_send(a.qp, rd), 0);
  ASSERT_TRUE(timed("Write + Read back", [&] { return a.wcs.size() == 3; }));
  EXPECT_EQ(a.wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(a.wcs[2].status, WcStatus::kSuccess);
  EXPECT_EQ(a.wcs[2].opcode, WcOpcode::kRead);
  EXPECT_TRUE(dst == src);
  EXPECT_TRUE(back == src);

  // An orderly disconnect reaches the peer as kDisconnected, status 0.
  ASSERT_EQ(a.eng->disconnect(a.qp), 0);
  CmEvent last{};
  ASSERT_TRUE(run([&] {
    CmEvent ev;
    while (a.eng->poll_cm(&ev)) {
    }
    while (b.eng->poll_cm(&ev)) last = ev;
    return last.type == CmEventType::kDisconnected;
  }));
  EXPECT_EQ(last.status, 0);
  b.eng->close_listener(l);
}

// Two engines progressed by two threads at once: the shared stack is
// serialised by its mutex, each engine's events still reach only it.
TEST(LwipEngine, EnginesOnTwoThreads) {
  Side a("10.0.0.1"), b("10.0.0.2");
  std::atomic<bool> stop{false};
  auto spin = [&](Engine* e) {
    while (!stop.load()) e->progress(0);
  };
  std::thread ta(spin, a.eng.get()), tb(spin, b.eng.get());
  auto wait = [&](const std::function<bool()>& pred) {
    auto end = Clock::now() + std::chrono::seconds(20);
    while (!pred() && Clock::now() < end) {
      a.reap();
      b.reap();
      std::this_thread::yield();
    }
    return pred();
  };
  Listener* l = nullptr;
  ASSERT_EQ(b.eng->listen(addr("10.0.0.2", 0), 4, &l), 0);
  ASSERT_EQ(a.eng->connect(a.qp, b.eng->listen_addr(l), nullptr, 0), 0);
  bool a_up = false, b_up = false;
  EXPECT_TRUE(wait([&] {
    CmEvent ev;
    while (b.eng->poll_cm(&ev)) {
      if (ev.type == CmEventType::kConnectRequest) b.eng->accept(ev.req, b.qp, nullptr, 0);
      b_up |= ev.type == CmEventType::kEstablished;
    }
    while (a.eng->poll_cm(&ev)) a_up |= ev.type == CmEventType::kEstablished;
    return a_up && b_up;
  }));
  constexpr size_t kLen = 4 << 20;
  constexpr int kMsgs = 8;
  std::vector<uint8_t> src = testing::pattern(kLen, 5), dst(kLen * kMsgs, 0);
  Mr* ms = a.reg(src, kAccessLocalWrite);
  Mr* md = b.reg(dst, kAccessLocalWrite);
  for (int i = 0; i < kMsgs; ++i) {
    RecvWr rw{.wr_id = static_cast<uint64_t>(i), .num_sge = 1};
    rw.sg_list[0] = testing::sge(dst, md, kLen * i, kLen);
    ASSERT_EQ(b.eng->post_recv(b.qp, rw), 0);
  }
  for (int i = 0; i < kMsgs; ++i) {
    SendWr sw{.wr_id = static_cast<uint64_t>(i), .opcode = WrOpcode::kSend, .num_sge = 1};
    sw.sg_list[0] = testing::sge(src, ms);
    ASSERT_EQ(a.eng->post_send(a.qp, sw), 0);
  }
  EXPECT_TRUE(wait([&] { return a.wcs.size() == kMsgs && b.wcs.size() == kMsgs; }));
  stop = true;
  ta.join();
  tb.join();
  for (const Wc& wc : b.wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  for (int i = 0; i < kMsgs; ++i) {
    EXPECT_EQ(std::memcmp(dst.data() + kLen * i, src.data(), kLen), 0) << "message " << i;
  }
  b.eng->close_listener(l);
}

// Raw transport figures between two transports polled by this one thread.
class Bench : public net::TransportEvents {
 public:
  void on_accept(Listener*, StreamConn* c) override { accepted = c; }
  void on_connected(StreamConn*, int err) override { connected = err == 0 ? 1 : -1; }
  void on_readable(StreamConn* c) override {
    if (read_hook) read_hook(c);
  }
  void on_writable(StreamConn*) override {}
  void on_closed(StreamConn*, int) override {}
  StreamConn* accepted = nullptr;
  int connected = 0;
  std::function<void(StreamConn*)> read_hook;
};

void measure(const char* ip0, const char* ip1, const char* label) {
  auto ta = net::make_lwip_transport({.source = ip4(ip0)});
  auto tb = net::make_lwip_transport({.source = ip4(ip1)});
  Bench ea, eb;
  Listener* l = nullptr;
  ASSERT_EQ(tb->listen(addr(ip1, 0), 4, &l), 0);
  StreamConn* c = nullptr;
  ASSERT_EQ(ta->connect(l->addr(), &c), 0);
  auto poll_both = [&] {
    ta->poll(ea, 0);
    tb->poll(eb, 0);
  };
  auto end = Clock::now() + std::chrono::seconds(5);
  while ((ea.connected == 0 || eb.accepted == nullptr) && Clock::now() < end) poll_both();
  ASSERT_EQ(ea.connected, 1);
  StreamConn* s = eb.accepted;

  // Ping-pong: the server echoes from its readable callback.
  uint8_t msg[64] = {};
  iovec iov{msg, sizeof(msg)};
  eb.read_hook = [&](StreamConn* x) {
    size_t n = consume_all(x);
    uint8_t echo[4096] = {};
    iovec e{echo, n};
    ASSERT_EQ(x->tx_send(&e, 1, n), 0);
    x->tx_flush();
  };
  size_t got = 0;
  ea.read_hook = [&](StreamConn* x) { got += consume_all(x); };
  std::vector<double> rtt;
  constexpr int kWarm = 1000, kIters = 20000;
  for (int i = 0; i < kWarm + kIters; ++i) {
    got = 0;
    auto t0 = Clock::now();
    ASSERT_EQ(c->tx_send(&iov, 1, sizeof(msg)), 0);
    c->tx_flush();
    while (got < sizeof(msg)) poll_both();
    if (i >= kWarm)
      rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(rtt.begin(), rtt.end());
  std::printf("[ metric ] %s: 64 B ping-pong RTT median %.2f us, p99 %.2f us (%d round trips)\n",
              label, rtt[rtt.size() / 2], rtt[rtt.size() * 99 / 100], kIters);

  // One-way bulk with 64 KiB sends and with MSS-sized (FPDU-like) sends.
  eb.read_hook = [&](StreamConn* x) { got += consume_all(x); };
  ea.read_hook = nullptr;
  for (size_t piece : {size_t{64} << 10, c->max_segment()}) {
    constexpr size_t kTotal = size_t{512} << 20;
    std::vector<uint8_t> buf(piece, 0x5A);
    got = 0;
    size_t sent = 0;
    auto t0 = Clock::now();
    while (got < kTotal) {
      while (sent < kTotal && c->tx_space() >= piece) {
        iovec p{buf.data(), piece};
        ASSERT_EQ(c->tx_send(&p, 1, piece), 0);
        sent += piece;
      }
      c->tx_flush();
      poll_both();
      if (Clock::now() - t0 > std::chrono::seconds(60)) break;
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_GE(got, kTotal);
    std::printf("[ metric ] %s: one-way bulk, %zu B sends: %.2f Gbit/s (%zu MiB in %.2f s)\n",
                label, piece, got * 8 / secs / 1e9, got >> 20, secs);
  }
  net::LwipCounters k = LwipStack::get().counters();
  std::printf(
      "[ metric ] stack counters: rx %llu frames, tx %llu frames, retransmits %llu, "
      "no-buffer %llu, parked %llu\n",
      static_cast<unsigned long long>(k.rx_frames), static_cast<unsigned long long>(k.tx_frames),
      static_cast<unsigned long long>(k.tcp_retransmits),
      static_cast<unsigned long long>(k.tx_no_buffer),
      static_cast<unsigned long long>(k.tx_parked));
  ta->release(c);
  tb->release(s);
  tb->close_listener(l);
}

TEST(LwipTransportPerf, PipeNoChecksums) {
  measure("10.0.0.1", "10.0.0.2", "lwIP/pipe, no checksums");
}
TEST(LwipTransportPerf, PipeFullChecksums) {
  measure("10.0.3.1", "10.0.3.2", "lwIP/pipe, checksums");
}

}  // namespace
}  // namespace softrdma
