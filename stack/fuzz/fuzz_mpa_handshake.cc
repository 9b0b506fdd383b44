// MPA connection setup (RFC 5044 §7.1, RFC 6581 §5): the peer's Request
// (we listen) or Reply (we connect), its private data and IRD/ORD/RTR
// prefix, then whatever FPDUs follow, through a real Engine: engine_cm.cc's
// mpa_input, the application's accept/reject, the hand-over to the QP and
// its receive path, and stream close. The transport is a fake one made of
// stack/tests/fake_conn.h's FakeConns, so no sockets are involved.
//
// Input: octet 0 = engine settings and role (bit 0 we connect, bit 1 CRC,
// bit 2 markers, bit 3 MPA rev 1, bits 4-5 RTR none/write/read/send, bit 6
// reject the request, bit 7 end with a reset), octet 1 = view seed, then the
// peer's octets. Checks: the CM events match an independent reading of the
// frame (a Request is reported exactly when it is valid, with its private
// data and IRD/ORD; a Reply ends in exactly one of established/rejected/
// unreachable), a QP that reached RDMA mode completes every request once and
// reports one disconnect, and the arena's canaries hold.
#include <algorithm>
#include <memory>
#include <optional>

#include "stack/engine.h"
#include "stack/fuzz/fuzz_target.h"

using namespace softrdma;
using softrdma::testing::FakeConn;

namespace {

// Streams whose far end replays the fuzz input and swallows what we send.
class FuzzTransport : public net::Transport {
 public:
  struct Conn {
    FakeConn local, remote;
    bool connected = false;  // on_connected delivered (active side)
    bool closed = false;     // on_closed delivered
    Conn(uint64_t seed) : local(fuzz::conn_config(), seed * 2 + 1), remote(fuzz::conn_config(), seed * 2 + 2) {
      FakeConn::join(local, remote);
    }
  };
  struct FakeListener : net::Listener {
    sockaddr_in addr() const override { return softrdma::testing::loopback_addr(4791); }
  };

  FuzzTransport(const uint8_t* in, size_t n, uint64_t seed) : in_(in, in + n), seed_(seed) {}
  const char* name() const override { return "fuzz"; }

  int listen(const sockaddr_in&, int, net::Listener** out) override {
    listener_ = std::make_unique<FakeListener>();
    accept_due_ = true;
    *out = listener_.get();
    return 0;
  }
  void close_listener(net::Listener*) override { listener_.reset(); }
  int connect(const sockaddr_in&, net::StreamConn** out) override {
    *out = &open()->local;
    return 0;
  }
  void release(net::StreamConn* c) override {
    std::erase_if(conns_, [c](const auto& p) { return &p->local == c; });
  }

  int poll(net::TransportEvents& ev, int) override {
    int n = 0;
    if (accept_due_ && listener_) {
      accept_due_ = false;
      Conn* c = open();
      c->connected = true;
      ev.on_accept(listener_.get(), &c->local);
      ++n;
    }
    std::vector<Conn*> snapshot;
    for (auto& c : conns_) snapshot.push_back(c.get());
    for (Conn* c : snapshot) {
      if (!alive(c)) continue;
      if (!c->connected) {
        c->connected = true;
        ev.on_connected(&c->local, 0);
        ++n;
        continue;
      }
      if (c->local.pending() > 0) {
        const uint64_t before = c->local.bytes_consumed();
        ev.on_readable(&c->local);
        if (alive(c) && c->local.bytes_consumed() != before) ++n;
      }
      if (alive(c)) ev.on_writable(&c->local);
      if (alive(c)) drain(c);
      // The peer's FIN/reset, once its octets are read (or never will be).
      if (alive(c) && eof_ && !c->closed) {
        c->closed = true;
        ev.on_closed(&c->local, reset_ ? -ECONNRESET : 0);
        ++n;
      }
    }
    return n;
  }
  void wake() override {}

  void end_stream(bool reset) {
    eof_ = true;
    reset_ = reset;
  }

 private:
  Conn* open() {
    conns_.push_back(std::make_unique<Conn>(seed_));
    Conn* c = conns_.back().get();
    c->local.inject(in_.data(), in_.size());
    return c;
  }
  bool alive(Conn* c) const {
    return std::any_of(conns_.begin(), conns_.end(), [c](const auto& p) { return p.get() == c; });
  }
  static void drain(Conn* c) {
    net::RxView v[8];
    for (size_t k; (k = c->remote.rx_peek(v, 8)) > 0;) {
      size_t used = 0;
      for (size_t i = 0; i < k; ++i) used += v[i].len;
      c->remote.rx_consume(used);
    }
  }

  std::vector<uint8_t> in_;
  uint64_t seed_;
  std::unique_ptr<FakeListener> listener_;
  bool accept_due_ = false;
  bool eof_ = false, reset_ = false;
  std::vector<std::unique_ptr<Conn>> conns_;
};

// The frame as RFC 5044 §7.1 / RFC 6581 §5 define it, read independently of
// MpaReader: nullopt unless the whole frame is present and valid.
struct Frame {
  uint8_t rev;
  bool reject;
  uint16_t ird, ord;
  std::vector<uint8_t> pdata;
};
std::optional<Frame> parse_frame(const uint8_t* p, size_t n, bool reply) {
  if (n < 20 || std::memcmp(p, reply ? "MPA ID Rep Frame" : "MPA ID Req Frame", 16) != 0)
    return std::nullopt;
  const uint8_t rev = p[17];
  const size_t pd_len = (size_t{p[18]} << 8) | p[19];
  if ((rev != 1 && rev != 2) || pd_len > 512 || (rev == 2 && pd_len < 4) || n < 20 + pd_len)
    return std::nullopt;
  Frame f{.rev = rev, .reject = reply && (p[16] & 0x20), .ird = 0, .ord = 0, .pdata = {}};
  const size_t skip = rev == 2 ? 4 : 0;
  if (rev == 2) {
    f.ird = static_cast<uint16_t>(((p[20] << 8) | p[21]) & 0x3fff);
    f.ord = static_cast<uint16_t>(((p[22] << 8) | p[23]) & 0x3fff);
  }
  f.pdata.assign(p + 20 + skip, p + 20 + pd_len);
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t c0 = data[0];
  const bool active = c0 & 1, reject = c0 & 0x40, reset = c0 & 0x80;
  EngineConfig ec;
  ec.transport = "fuzz";
  ec.crc = c0 & 2;
  ec.markers = c0 & 4;
  ec.mpa_rev = (c0 & 8) ? iwarp::kMpaRev1 : iwarp::kMpaRev2;
  static constexpr iwarp::Rtr kRtr[] = {iwarp::Rtr::kNone, iwarp::Rtr::kWrite, iwarp::Rtr::kRead,
                                        iwarp::Rtr::kSend};
  ec.rtr = kRtr[(c0 >> 4) & 3];
  ec.threading = Threading::kC2;
  ec.watchdog_us = 0;  // no thread: every step happens in progress() below
  data += 2;
  size -= 2;

  auto owned = std::make_unique<FuzzTransport>(data, size, data[-1]);
  FuzzTransport* tr = owned.get();
  Engine eng(ec, std::move(owned));
  fuzz::Arena& arena = fuzz::Arena::get();
  arena.reset();
  Pd* pd = eng.alloc_pd();
  Pd* other = eng.alloc_pd();
  for (int r = 0; r < fuzz::kRegionCount; ++r) {
    if (!fuzz::kRegions[r].pd) continue;
    Mr* mr = eng.reg_mr(fuzz::kRegions[r].pd == 1 ? pd : other, arena.at(r), fuzz::kRegions[r].size,
                        fuzz::kRegions[r].access);
    FUZZ_CHECK(mr && mr->stag == fuzz::region_stag(r), "unexpected STag");
  }
  Cq* cq = eng.create_cq(64);
  Qp* qp = eng.create_qp({.pd = pd, .send_cq = cq, .recv_cq = cq, .sq_depth = 64, .rq_depth = 64,
                          .ord = fuzz::kIrdOrd, .ird = fuzz::kIrdOrd});
  fuzz::prime([&](const RecvWr& w) { return eng.post_recv(qp, w); },
              [&](const SendWr& w) { return eng.post_send(qp, w); });

  static const uint8_t kPdata[] = "fuzz";
  if (active) {
    FUZZ_CHECK(eng.connect(qp, softrdma::testing::loopback_addr(4791), kPdata, 4) == 0, "connect");
  } else {
    Listener* l = nullptr;
    FUZZ_CHECK(eng.listen(softrdma::testing::loopback_addr(0), 4, &l) == 0, "listen");
  }

  int requests = 0, established = 0, rejected = 0, unreachable = 0, disconnected = 0;
  bool accepted = false;
  const std::optional<Frame> frame = parse_frame(data, size, active);
  // Progress until nothing moves, then end the stream and do it again.
  for (int phase = 0; phase < 2; ++phase) {
    if (phase == 1) tr->end_stream(reset);
    for (int still = 0, rounds = 0; still < 2 && rounds < 10000; ++rounds) {
      bool moved = eng.progress(0) > 0;
      for (CmEvent ev; eng.poll_cm(&ev); moved = true) {
        switch (ev.type) {
          case CmEventType::kConnectRequest:
            ++requests;
            FUZZ_CHECK(!active && frame, "connect request from an invalid or partial frame");
            FUZZ_CHECK(ev.private_data == frame->pdata, "private data differs from the frame's");
            // Rev 1 carries no IRD/ORD; the engine then reports its defaults.
            FUZZ_CHECK(frame->rev == 1 || (ev.peer_ird == frame->ird && ev.peer_ord == frame->ord),
                       "IRD/ORD differ from the frame's");
            if (reject) {
              FUZZ_CHECK(eng.reject(ev.req, kPdata, 4) == 0, "reject");
            } else {
              FUZZ_CHECK(eng.accept(ev.req, qp, kPdata, 4) == 0, "accept");
              accepted = true;
            }
            break;
          case CmEventType::kEstablished: ++established; break;
          case CmEventType::kRejected:
            ++rejected;
            FUZZ_CHECK(active && frame && frame->reject, "rejected without a rejecting Reply");
            FUZZ_CHECK(ev.private_data == frame->pdata, "reject private data differs");
            break;
          case CmEventType::kUnreachable: ++unreachable; break;
          case CmEventType::kDisconnected: ++disconnected; break;
        }
      }
      still = moved ? 0 : still + 1;
    }
  }

  if (!active) {
    FUZZ_CHECK(requests == (frame ? 1 : 0), "%d connect requests for %s frame", requests,
               frame ? "a valid" : "no valid");
    FUZZ_CHECK(unreachable == 0 && rejected == 0, "active-side events on the passive side");
  } else {
    FUZZ_CHECK(requests == 0, "connect request on the active side");
    FUZZ_CHECK(established + rejected + unreachable == 1,
               "connect ended in %d established, %d rejected, %d unreachable", established,
               rejected, unreachable);
    if (frame && !frame->reject) FUZZ_CHECK(rejected == 0, "rejected by an accepting Reply");
    if (!frame) FUZZ_CHECK(unreachable == 1, "an invalid Reply did not make the peer unreachable");
  }
  FUZZ_CHECK(established <= 1, "established %d times", established);
  const bool rdma = active ? established == 1 : accepted;
  FUZZ_CHECK(disconnected == (rdma ? 1 : 0), "%d disconnects (RDMA mode: %d)", disconnected, rdma);
  arena.check();
  if (rdma) {  // in RDMA mode the QP ended in error: all of its work completed once
    std::vector<Wc> recv, send;
    Wc wc[16];
    for (int n; (n = eng.poll_cq(cq, wc, 16)) > 0;) {
      for (int i = 0; i < n; ++i) (wc[i].opcode == WcOpcode::kRecv || wc[i].opcode == WcOpcode::kRecvRdmaImm ? recv : send).push_back(wc[i]);
    }
    fuzz::check_completions(recv, send);
  }
  return 0;
}
