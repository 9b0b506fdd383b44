// A scripted iWARP session for the wire-conformance test
// (wire_conformance_test.sh): two Engines on 127.0.0.1, the server listening
// on the port given on the command line, the client (MPA initiator)
// connecting to it. Every RDMAP opcode the engine sends goes over the wire at
// least once; data is verified at both ends; the session ends with a
// deliberately bad RDMA Write (a stale STag) that makes the server send a
// Terminate.
//
// Output (stdout, or the file given with --out): the messages this session
// put on the wire, one line each, in the order each side sent them. FPDU
// segmentation depends on the transport's max_segment (the TCP MSS), so only
// what is deterministic is listed: per message its direction, RDMAP opcode
// and DDP payload length (the octets after the DDP/RDMAP header, RFC 5041 §4):
//
//   config mode=<crc|nocrc|rev1> crc=<0|1> rev=<1|2> rtr=<0|1> port=<n>
//   msg <c2s|s2c> <opcode> <payload length> <what>
//   term s2c <layer> <etype> <ecode>        the Terminate's cause (RFC 5040 §4.8)
//   end
//
// Usage: conformance_session --port N [--mode crc|nocrc|rev1] [--out FILE]
// Exit status 0 only if every step completed and every datum verified.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "stack/iwarp/wire.h"
#include "stack/tests/loopback.h"

using namespace softrdma;
using namespace softrdma::testing;
namespace iw = softrdma::iwarp;

namespace {

constexpr int kStepTimeoutMs = 20000;
constexpr unsigned kWatchdogSeconds = 60;  // the whole session, whatever happens

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "conformance_session: FAIL: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::exit(1);
}

#define CHECK(cond, ...)              \
  do {                                \
    if (!(cond)) die(__VA_ARGS__);    \
  } while (0)

constexpr int op(iw::RdmapOpcode o) { return static_cast<int>(o); }

// Registers buf and returns its STag (0: failed). Only the STag is kept: the
// Mr* that reg_mr returns points into the engine's region table (a vector),
// and dangles as soon as a later registration grows it (heap-use-after-free
// under ASan; reported to the engine owners).
uint32_t reg(Side& side, std::vector<uint8_t>& buf, uint32_t access) {
  Mr* mr = side.reg(buf, access);
  return mr ? mr->stag : 0;
}

Sge sg(const std::vector<uint8_t>& buf, uint32_t stag, size_t off, size_t len) {
  return Sge{reinterpret_cast<uint64_t>(buf.data() + off), static_cast<uint32_t>(len), stag};
}

struct Session {
  Side client, server;
  Listener* listener = nullptr;
  std::vector<std::string> lines;  // the expected-wire report
  uint64_t next_wr = 1;
  // Server receive buffers, one per posted receive (they must stay put).
  std::vector<std::unique_ptr<std::vector<uint8_t>>> rbufs;

  explicit Session(const EngineConfig& cfg) : client(cfg, 256, 16), server(cfg, 256, 16) {}

  bool run(const std::function<bool()>& pred, int timeout_ms = kStepTimeoutMs) {
    return run_until({client.eng.get(), server.eng.get()}, [&] {
      client.reap();
      server.reap();
      return pred();
    }, timeout_ms);
  }

  void expect(const char* dir, iw::RdmapOpcode o, uint64_t len, const char* what) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "msg %s %d %" PRIu64 " %s", dir, op(o), len, what);
    lines.emplace_back(buf);
  }

  void connect(uint16_t port) {
    CHECK(server.eng->listen(loopback(port), 4, &listener) == 0, "listen on 127.0.0.1:%u", port);
    CHECK(client.eng->connect(client.qp, loopback(port), nullptr, 0) == 0, "connect");
    bool c_up = false, s_up = false;
    bool ok = run_until({client.eng.get(), server.eng.get()}, [&] {
      CmEvent ev;
      while (server.eng->poll_cm(&ev)) {
        if (ev.type == CmEventType::kConnectRequest)
          CHECK(server.eng->accept(ev.req, server.qp, nullptr, 0) == 0, "accept");
        else if (ev.type == CmEventType::kEstablished)
          s_up = true;
        else
          die("server CM event %s", to_string(ev.type));
      }
      while (client.eng->poll_cm(&ev)) {
        if (ev.type != CmEventType::kEstablished) die("client CM event %s", to_string(ev.type));
        c_up = true;
      }
      return c_up && s_up;
    }, kStepTimeoutMs);
    CHECK(ok, "connection not established in time");
  }

  // Posts a receive of cap octets at the server; returns its buffer.
  std::vector<uint8_t>& post_recv(size_t cap) {
    rbufs.push_back(std::make_unique<std::vector<uint8_t>>(std::max<size_t>(cap, 1), 0));
    std::vector<uint8_t>& b = *rbufs.back();
    uint32_t stag = reg(server, b, kAccessLocalWrite);
    CHECK(stag, "reg recv buffer");
    RecvWr rw{.wr_id = 1000 + rbufs.size(), .num_sge = 1};
    rw.sg_list[0] = sg(b, stag, 0, b.size());
    CHECK(server.eng->post_recv(server.qp, rw) == 0, "post_recv");
    return b;
  }

  void post(SendWr wr) {
    wr.wr_id = next_wr++;
    int rc = client.eng->post_send(client.qp, wr);
    CHECK(rc == 0, "post_send(%s): %d", to_string(wr.opcode), rc);
  }

  // Waits until the client has `c` completions and the server `s`; all must
  // be successful.
  void wait_wcs(size_t c, size_t s, const char* step) {
    bool ok = run([&] { return client.wcs.size() >= c && server.wcs.size() >= s; });
    CHECK(ok, "%s: timed out (client %zu/%zu, server %zu/%zu completions)", step,
          client.wcs.size(), c, server.wcs.size(), s);
    CHECK(client.wcs.size() == c && server.wcs.size() == s, "%s: extra completions", step);
    for (const Wc& w : client.wcs)
      CHECK(w.status == WcStatus::kSuccess, "%s: client completion %s", step, to_string(w.status));
    for (const Wc& w : server.wcs)
      CHECK(w.status == WcStatus::kSuccess, "%s: server completion %s", step, to_string(w.status));
  }

  void wait_equal(const uint8_t* a, const uint8_t* b, size_t n, const char* step) {
    bool ok = run([&] { return std::memcmp(a, b, n) == 0; });
    CHECK(ok, "%s: data never arrived intact", step);
  }
};

SendWr make_wr(WrOpcode opcode, uint32_t flags = kWrSignaled) {
  SendWr wr{};
  wr.opcode = opcode;
  wr.flags = flags;
  return wr;
}

void usage() {
  std::fprintf(stderr, "usage: conformance_session --port N [--mode crc|nocrc|rev1] [--out FILE]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int port = -1;
  std::string mode = "crc", out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) port = std::atoi(argv[++i]);
    else if (a == "--mode" && i + 1 < argc) mode = argv[++i];
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
    else usage();
  }
  if (port <= 0 || port > 65535) usage();
  if (mode != "crc" && mode != "nocrc" && mode != "rev1") usage();
  alarm(kWatchdogSeconds);  // default action: terminate, so a hang cannot outlive the test

  EngineConfig cfg;
  cfg.transport = "kernel";
  cfg.markers = false;
  cfg.crc = mode != "nocrc";
  cfg.mpa_rev = mode == "rev1" ? iw::kMpaRev1 : iw::kMpaRev2;
  cfg.rtr = iw::Rtr::kWrite;  // rev 2: the initiator's RTR is a zero-length RDMA Write
  const bool rtr = cfg.mpa_rev == iw::kMpaRev2;

  Session s(cfg);
  {
    char buf[128];
    std::snprintf(buf, sizeof buf, "config mode=%s crc=%d rev=%d rtr=%d port=%d", mode.c_str(),
                  cfg.crc ? 1 : 0, cfg.mpa_rev, rtr ? 1 : 0, port);
    s.lines.emplace_back(buf);
  }
  s.connect(static_cast<uint16_t>(port));
  // RFC 6581 §5: the initiator's first FPDU is the agreed RTR message.
  if (rtr) s.expect("c2s", iw::RdmapOpcode::kRdmaWrite, 0, "rtr(zero-length-write)");

  using iw::RdmapOpcode;
  Side& C = s.client;
  Side& S = s.server;

  // Client memory: a source of everything it sends, a sink for reads and
  // atomic results.
  constexpr size_t kBig = 200 * 1024;
  std::vector<uint8_t> src = pattern(512 * 1024, 11);
  std::vector<uint8_t> rd(kBig + 8192, 0);
  std::vector<uint8_t> ares(5 * 8, 0);
  uint32_t msrc = reg(C, src, kAccessLocalWrite);
  uint32_t mrd = reg(C, rd, kAccessLocalWrite);
  uint32_t mares = reg(C, ares, kAccessLocalWrite);
  CHECK(msrc && mrd && mares, "client reg_mr");

  // Server memory: a write target, a read source, an atomic word, and two
  // regions that Send with Invalidate will invalidate.
  std::vector<uint8_t> tgt(kBig + 8192, 0);
  std::vector<uint8_t> rsrc = pattern(kBig + 8192, 22);
  std::vector<uint8_t> atom(16, 0);
  std::vector<uint8_t> inv1(64, 0), inv2(64, 0);
  uint32_t mtgt = reg(S, tgt, kAccessLocalWrite | kAccessRemoteWrite);
  uint32_t mrsrc = reg(S, rsrc, kAccessRemoteRead);
  uint32_t matom = reg(S, atom, kAccessLocalWrite | kAccessRemoteAtomic);
  uint32_t minv1 = reg(S, inv1, kAccessRemoteWrite);
  uint32_t minv2 = reg(S, inv2, kAccessRemoteWrite);
  CHECK(mtgt && mrsrc && matom && minv1 && minv2, "server reg_mr");
  size_t cw = 0, sw = 0;  // completions expected so far (client, server)

  // --- Sends (RFC 5040 §4.3): plain, empty, multi-FPDU, SE, with Invalidate ---
  struct SendCase {
    WrOpcode wr_op;
    uint32_t flags;
    size_t off, len;
    uint32_t inv;
    RdmapOpcode wire;
    const char* what;
    uint32_t wc_flags;
  };
  const SendCase sends[] = {
      {WrOpcode::kSend, kWrSignaled, 0, 100, 0, RdmapOpcode::kSend, "send", 0},
      {WrOpcode::kSend, kWrSignaled, 0, 0, 0, RdmapOpcode::kSend, "send(empty)", 0},
      {WrOpcode::kSend, kWrSignaled, 1000, 150000, 0, RdmapOpcode::kSend, "send(multi-fpdu)", 0},
      {WrOpcode::kSend, kWrSignaled | kWrSolicited, 7, 64, 0, RdmapOpcode::kSendSe, "send-se",
       kWcSolicited},
      {WrOpcode::kSendWithInv, kWrSignaled, 3, 200, minv1, RdmapOpcode::kSendInv,
       "send-inv", kWcWithInv},
      {WrOpcode::kSendWithInv, kWrSignaled | kWrSolicited, 5, 33, minv2,
       RdmapOpcode::kSendSeInv, "send-se-inv", kWcWithInv | kWcSolicited},
  };
  for (const SendCase& c : sends) {
    std::vector<uint8_t>& rb = s.post_recv(c.len + 16);
    SendWr wr = make_wr(c.wr_op, c.flags);
    wr.num_sge = 1;
    wr.sg_list[0] = sg(src, msrc, c.off, c.len);
    wr.invalidate_stag = c.inv;
    s.post(wr);
    s.wait_wcs(++cw, ++sw, c.what);
    const Wc& w = S.wcs.back();
    CHECK(w.opcode == WcOpcode::kRecv && w.byte_len == c.len, "%s: recv wc opcode/len %u",
          c.what, w.byte_len);
    CHECK((w.flags & (kWcWithInv | kWcSolicited | kWcWithImm)) == c.wc_flags,
          "%s: recv wc flags %#x", c.what, w.flags);
    if (c.inv) CHECK(w.invalidated_stag == c.inv, "%s: invalidated stag", c.what);
    CHECK(std::memcmp(rb.data(), src.data() + c.off, c.len) == 0, "%s: data", c.what);
    s.expect("c2s", c.wire, c.len, c.what);
  }

  // --- RDMA Writes (RFC 5040 §4.1): small and multi-FPDU ---
  const struct { size_t off, len, at; const char* what; } writes[] = {
      {17, 1000, 0, "write"},
      {4096, kBig, 4096, "write(multi-fpdu)"},
  };
  for (const auto& c : writes) {
    SendWr wr = make_wr(WrOpcode::kWrite);
    wr.num_sge = 1;
    wr.sg_list[0] = sg(src, msrc, c.off, c.len);
    wr.remote_addr = reinterpret_cast<uint64_t>(tgt.data() + c.at);
    wr.rkey = mtgt;
    s.post(wr);
    s.wait_wcs(++cw, sw, c.what);
    s.wait_equal(tgt.data() + c.at, src.data() + c.off, c.len, c.what);
    s.expect("c2s", RdmapOpcode::kRdmaWrite, c.len, c.what);
  }

  // --- RFC 7306: Write with Immediate, Immediate Data alone (and with SE) ---
  {
    s.post_recv(16);  // the Immediate Data message consumes a receive
    SendWr wr = make_wr(WrOpcode::kWriteWithImm);
    wr.num_sge = 1;
    wr.sg_list[0] = sg(src, msrc, 300000, 512);
    wr.remote_addr = reinterpret_cast<uint64_t>(tgt.data() + 2000);
    wr.rkey = mtgt;
    wr.imm_data = 0x1122334455667788ull;
    s.post(wr);
    s.wait_wcs(++cw, ++sw, "write-with-imm");
    const Wc& w = S.wcs.back();
    CHECK(w.opcode == WcOpcode::kRecvRdmaImm && (w.flags & kWcWithImm) &&
              w.imm_data == 0x1122334455667788ull,
          "write-with-imm: server wc opcode %s flags %#x imm %#" PRIx64, to_string(w.opcode),
          w.flags, w.imm_data);
    CHECK(std::memcmp(tgt.data() + 2000, src.data() + 300000, 512) == 0, "write-with-imm: data");
    s.expect("c2s", RdmapOpcode::kRdmaWrite, 512, "write-with-imm(write)");
    s.expect("c2s", RdmapOpcode::kImmData, sizeof(iw::ImmDataPayload), "write-with-imm(imm)");
  }
  const struct { uint32_t flags; uint64_t imm; RdmapOpcode wire; const char* what; } imms[] = {
      {kWrSignaled, 0xA5A5000000000001ull, RdmapOpcode::kImmData, "imm-data"},
      {kWrSignaled | kWrSolicited, 0xA5A5000000000002ull, RdmapOpcode::kImmDataSe, "imm-data-se"},
  };
  for (const auto& c : imms) {
    s.post_recv(16);
    SendWr wr = make_wr(WrOpcode::kImmData, c.flags);
    wr.imm_data = c.imm;
    s.post(wr);
    s.wait_wcs(++cw, ++sw, c.what);
    const Wc& w = S.wcs.back();
    CHECK((w.flags & kWcWithImm) && w.imm_data == c.imm, "%s: server wc", c.what);
    CHECK(((w.flags & kWcSolicited) != 0) == ((c.flags & kWrSolicited) != 0), "%s: SE flag",
          c.what);
    s.expect("c2s", c.wire, sizeof(iw::ImmDataPayload), c.what);
  }

  // --- RDMA Reads (RFC 5040 §4.4, §4.5): small and multi-FPDU response ---
  const struct { size_t at, len, sink; const char* what; } reads[] = {
      {100, 4096, 0, "read"},
      {8000, kBig, 4096, "read(multi-fpdu)"},
  };
  for (const auto& c : reads) {
    SendWr wr = make_wr(WrOpcode::kRead);
    wr.num_sge = 1;
    wr.sg_list[0] = sg(rd, mrd, c.sink, c.len);
    wr.remote_addr = reinterpret_cast<uint64_t>(rsrc.data() + c.at);
    wr.rkey = mrsrc;
    s.post(wr);
    s.wait_wcs(++cw, sw, c.what);
    CHECK(C.wcs.back().opcode == WcOpcode::kRead && C.wcs.back().byte_len == c.len,
          "%s: wc", c.what);
    CHECK(std::memcmp(rd.data() + c.sink, rsrc.data() + c.at, c.len) == 0, "%s: data", c.what);
    s.expect("c2s", RdmapOpcode::kRdmaReadReq, sizeof(iw::ReadReqPayload), c.what);
    s.expect("s2c", RdmapOpcode::kRdmaReadResp, c.len, c.what);
  }

  // --- RFC 7306 Atomics: Fetch-Add, Compare-Swap (hit and miss), Swap, and
  // a masked Fetch-Add on the word's low 32 bits (wraps, no carry out) ---
  {
    uint64_t init = 1000;
    std::memcpy(atom.data(), &init, 8);
    struct { WrOpcode wr_op; uint64_t ca, swap, add_mask, want_orig, want_after; const char* what; }
        ats[] = {
        {WrOpcode::kAtomicFetchAdd, 5, 0, 0, 1000, 1005, "fetch-add"},
        {WrOpcode::kAtomicCmpSwap, 1005, 77, 0, 1005, 77, "cmp-swap(hit)"},
        {WrOpcode::kAtomicCmpSwap, 1, 99, 0, 77, 77, "cmp-swap(miss)"},
        {WrOpcode::kAtomicSwap, 0, 0x1FFFFFFFF, 0, 77, 0x1FFFFFFFF, "swap"},
        {WrOpcode::kAtomicFetchAdd, 1, 0, 1ull << 31, 0x1FFFFFFFF, 0x100000000, "fetch-add(32)"},
    };
    int i = 0;
    for (const auto& c : ats) {
      SendWr wr = make_wr(c.wr_op);
      wr.num_sge = 1;
      wr.sg_list[0] = sg(ares, mares, 8 * static_cast<size_t>(i), 8);
      wr.remote_addr = reinterpret_cast<uint64_t>(atom.data());
      wr.rkey = matom;
      wr.compare_add = c.ca;
      wr.swap = c.swap;
      wr.add_mask = c.add_mask;
      s.post(wr);
      s.wait_wcs(++cw, sw, c.what);
      uint64_t orig, after;
      std::memcpy(&orig, ares.data() + 8 * i, 8);
      std::memcpy(&after, atom.data(), 8);
      CHECK(orig == c.want_orig && after == c.want_after,
            "%s: original %" PRIu64 " (want %" PRIu64 "), now %" PRIu64 " (want %" PRIu64 ")",
            c.what, orig, c.want_orig, after, c.want_after);
      s.expect("c2s", RdmapOpcode::kAtomicReq, sizeof(iw::AtomicReqPayload), c.what);
      s.expect("s2c", RdmapOpcode::kAtomicResp, sizeof(iw::AtomicRespPayload), c.what);
      ++i;
    }
  }

  // --- Bursts: many small messages posted back to back, so that several
  // FPDUs share one TCP segment. A large Write goes first and fills the
  // socket, so what follows queues up and leaves in big segments. ---
  {
    constexpr int kBurst = 32;
    std::vector<std::vector<uint8_t>*> rbs;
    for (int i = 1; i <= kBurst; ++i) rbs.push_back(&s.post_recv(64));
    SendWr big = make_wr(WrOpcode::kWrite, 0);  // unsignaled
    big.num_sge = 1;
    big.sg_list[0] = sg(src, msrc, 0, kBig);
    big.remote_addr = reinterpret_cast<uint64_t>(tgt.data());
    big.rkey = mtgt;
    s.post(big);
    s.expect("c2s", RdmapOpcode::kRdmaWrite, kBig, "burst-lead-write");
    for (int i = 1; i <= kBurst; ++i) {
      SendWr wr = make_wr(WrOpcode::kSend);
      wr.num_sge = 1;
      wr.sg_list[0] = sg(src, msrc, 50000 + 100 * static_cast<size_t>(i), static_cast<size_t>(i));
      s.post(wr);
      s.expect("c2s", RdmapOpcode::kSend, static_cast<uint64_t>(i), "burst-send");
    }
    for (int i = 1; i <= 16; ++i) {
      SendWr wr = make_wr(WrOpcode::kWrite);
      wr.num_sge = 1;
      wr.sg_list[0] = sg(src, msrc, 60000 + 100 * static_cast<size_t>(i), static_cast<size_t>(i));
      wr.remote_addr = reinterpret_cast<uint64_t>(tgt.data() + kBig + 100 * static_cast<size_t>(i));
      wr.rkey = mtgt;
      s.post(wr);
      s.expect("c2s", RdmapOpcode::kRdmaWrite, static_cast<uint64_t>(i), "burst-write");
    }
    cw += kBurst + 16;
    sw += kBurst;
    s.wait_wcs(cw, sw, "burst");
    for (int i = 1; i <= kBurst; ++i) {
      const Wc& w = S.wcs[S.wcs.size() - kBurst + static_cast<size_t>(i) - 1];
      CHECK(w.byte_len == static_cast<uint32_t>(i), "burst-send %d: len %u", i, w.byte_len);
      CHECK(std::memcmp(rbs[static_cast<size_t>(i) - 1]->data(),
                        src.data() + 50000 + 100 * static_cast<size_t>(i),
                        static_cast<size_t>(i)) == 0,
            "burst-send %d: data", i);
    }
    s.wait_equal(tgt.data(), src.data(), kBig, "burst-lead-write");
    for (int i = 1; i <= 16; ++i)
      s.wait_equal(tgt.data() + kBig + 100 * static_cast<size_t>(i),
                   src.data() + 60000 + 100 * static_cast<size_t>(i), static_cast<size_t>(i),
                   "burst-write");
  }

  // --- A bad RDMA Write: a stale STag (its region is gone). The server must
  // answer with a Terminate (RFC 5040 §4.8; DDP tagged buffer error, RFC
  // 5041 §7.2: invalid STag) that carries the DDP segment length and the
  // offending DDP header. ---
  {
    std::vector<uint8_t> gone(256, 0);
    uint32_t mgone = reg(S, gone, kAccessRemoteWrite);
    CHECK(mgone, "reg");
    const uint32_t stale = mgone;
    CHECK(S.eng->dereg_mr(stale) == 0, "dereg");
    SendWr wr = make_wr(WrOpcode::kWrite);
    wr.num_sge = 1;
    wr.sg_list[0] = sg(src, msrc, 0, 64);
    wr.remote_addr = reinterpret_cast<uint64_t>(gone.data());
    wr.rkey = stale;
    s.post(wr);
    s.expect("c2s", RdmapOpcode::kRdmaWrite, 64, "bad-write(stale-stag)");
    CmEvent cev{}, sev{};
    bool c_down = false, s_down = false;
    bool ok = s.run([&] {
      CmEvent ev;
      while (!c_down && C.eng->poll_cm(&ev))
        if (ev.type == CmEventType::kDisconnected) cev = ev, c_down = true;
      while (!s_down && S.eng->poll_cm(&ev))
        if (ev.type == CmEventType::kDisconnected) sev = ev, s_down = true;
      return c_down && s_down;
    });
    CHECK(ok, "bad-write: no disconnect (client %d, server %d)", c_down, s_down);
    CHECK(gone == std::vector<uint8_t>(256, 0), "bad-write: data placed through a stale STag");
    // The cause, as the client received it.
    const iw::TermCause* tc = C.qp->term_received();
    CHECK(tc, "bad-write: the client received no Terminate (event term %#x, status %d)",
          cev.term, cev.status);
    CHECK(tc->layer == iw::TermLayer::kDdp &&
              tc->etype == static_cast<uint8_t>(iw::DdpEtype::kTaggedBuf) &&
              tc->ecode == static_cast<uint8_t>(iw::DdpTaggedEcode::kInvalidStag),
          "bad-write: Terminate cause %#x, want DDP tagged invalid STag", tc->packed());
    // Terminate control (4) + DDP Segment Length (2, M) + the terminated
    // tagged DDP header (14, D): RFC 5040 §4.8.
    const size_t term_len = sizeof(iw::TerminatePayload) + iw::kTermDdpSegLenSize +
                            (sizeof(iw::TaggedHdr) - iw::kMpaLenSize);
    s.expect("s2c", RdmapOpcode::kTerminate, term_len, "terminate");
    char buf[64];
    std::snprintf(buf, sizeof buf, "term s2c %d %d %d", static_cast<int>(tc->layer), tc->etype,
                  tc->ecode);
    s.lines.emplace_back(buf);
  }
  s.lines.emplace_back("end");

  FILE* f = out.empty() ? stdout : std::fopen(out.c_str(), "w");
  CHECK(f, "open %s: %s", out.c_str(), std::strerror(errno));
  for (const std::string& l : s.lines) std::fprintf(f, "%s\n", l.c_str());
  CHECK(std::fflush(f) == 0, "write report");
  if (f != stdout) std::fclose(f);
  return 0;
}
