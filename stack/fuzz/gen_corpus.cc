// Writes the seed corpus of valid traffic: corpus/<harness>/<name>.
//
// The traffic is real: a second QP (the "sender") is started on the far end
// of a QpTarget's stream and posts Sends, Writes, Immediate Data, Reads,
// Atomics and a Send with Invalidate aimed at the harness's registered
// arena; it also answers the target's primed Read and Fetch-Add. What it
// transmits (the engine's own framing, CRC and markers) is captured, then
// replayed into a fresh QpTarget, which must accept all of it without a
// Terminate. Terminate seeds are Terminates the engine itself sends.
//
//   fuzz_gen_corpus <corpus dir>
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "stack/fuzz/fuzz_target.h"

using namespace softrdma;
using fuzz::Bytes;
using fuzz::QpConfig;
using iwarp::RdmapOpcode;

namespace {

std::string g_dir;

void write_seed(const std::string& harness, const std::string& name, const Bytes& b) {
  const std::string d = g_dir + "/" + harness;
  ::mkdir(g_dir.c_str(), 0755);
  ::mkdir(d.c_str(), 0755);
  FILE* f = std::fopen((d + "/" + name).c_str(), "wb");
  FUZZ_CHECK(f, "cannot write %s/%s", d.c_str(), name.c_str());
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
}

Bytes with_prefix(std::initializer_list<uint8_t> pre, const Bytes& b) {
  Bytes out(pre);
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Source buffers of the sender (lkey 0: local memory it vouches for).
std::vector<uint8_t> g_src(8192);

Sge src(size_t off, uint32_t len) { return {reinterpret_cast<uint64_t>(g_src.data() + off), len, 0}; }

enum Scenario { kSends, kWrites, kReads, kAtomics, kInvalidate, kMix, kScenarioCount };
const char* const kScenarioName[] = {"sends", "writes", "reads", "atomics", "invalidate", "mix"};

void post(iwarp::Qp* q, SendWr w) { FUZZ_CHECK(q->post_send(w) == 0, "sender post"); }

void post_scenario(iwarp::Qp* q, Scenario s) {
  uint64_t id = 1000;
  auto send = [&](uint32_t len, WrOpcode op = WrOpcode::kSend, uint32_t inv = 0) {
    SendWr w{.wr_id = id++, .opcode = op, .num_sge = 1};
    w.sg_list[0] = src(0, len);
    w.invalidate_stag = inv;
    post(q, w);
  };
  auto write = [&](uint32_t len, WrOpcode op = WrOpcode::kWrite) {
    SendWr w{.wr_id = id++, .opcode = op, .num_sge = 1};
    w.sg_list[0] = src(64, len);
    w.rkey = fuzz::region_stag(fuzz::kWrite);
    w.remote_addr = fuzz::region_addr(fuzz::kWrite) + 4096 - len;
    w.imm_data = 0x1122334455667788ull;
    post(q, w);
  };
  auto read = [&](uint32_t len) {
    SendWr w{.wr_id = id++, .opcode = WrOpcode::kRead, .num_sge = 1};
    w.sg_list[0] = src(4096, len);
    w.rkey = fuzz::region_stag(fuzz::kRead);
    w.remote_addr = fuzz::region_addr(fuzz::kRead) + 7;
    post(q, w);
  };
  auto atomic = [&](WrOpcode op, uint64_t off) {
    SendWr w{.wr_id = id++, .opcode = op, .num_sge = 1};
    w.sg_list[0] = src(8000, 8);
    w.rkey = fuzz::region_stag(fuzz::kAtomic);
    w.remote_addr = fuzz::region_addr(fuzz::kAtomic) + off;
    w.compare_add = 3;
    w.swap = 9;
    post(q, w);
  };
  switch (s) {
    case kSends:  // into receives of 16, 1+100+3 (across SGEs), 0 and 512 octets
      send(16), send(104), send(0), send(512);
      break;
    case kWrites:  // a multi-FPDU Write, Write with Immediate, Immediate Data
      write(4096), write(33, WrOpcode::kWriteWithImm);
      {
        SendWr w{.wr_id = id++, .opcode = WrOpcode::kImmData};
        w.imm_data = 42;
        post(q, w);
      }
      break;
    case kReads:
      read(1000), read(1);
      break;
    case kAtomics:
      atomic(WrOpcode::kAtomicFetchAdd, 0), atomic(WrOpcode::kAtomicCmpSwap, 8),
          atomic(WrOpcode::kAtomicSwap, 24);
      break;
    case kInvalidate:
      send(10, WrOpcode::kSendWithInv, fuzz::region_stag(fuzz::kInval));
      break;
    case kMix:
      write(100), send(9), read(64), atomic(WrOpcode::kAtomicFetchAdd, 16), send(50),
          write(7, WrOpcode::kWriteWithImm);
      break;
    case kScenarioCount:
      break;
  }
}

std::string cfg_name(const QpConfig& c) {
  static const char* const rtr[] = {"none", "write", "read", "send"};
  std::string n = std::string(c.crc ? "crc" : "nocrc") + (c.rx_markers ? "-markers" : "") +
                  "-rtr_" + rtr[static_cast<int>(c.rtr)];
  if (c.rtr != iwarp::Rtr::kNone) n += c.initiator ? "-init" : "-resp";
  return n;
}

// The sender's stream for one configuration and scenario.
Bytes capture(const QpConfig& cfg, Scenario s) {
  fuzz::QpTarget target(cfg);
  softrdma::testing::FakeHost sender(9, 64, 1);
  // What our primed Read and Fetch-Add name at the peer (fuzz_target.h).
  FUZZ_CHECK(sender.reg(fuzz::Arena::get().at(fuzz::kRead), 4096, kAccessRemoteRead) ==
                 fuzz::kPeerReadStag &&
             sender.reg(fuzz::Arena::get().at(fuzz::kAtomic), 64, kAccessRemoteAtomic) ==
                 fuzz::kPeerAtomicStag, "sender STags");
  const iwarp::MpaResult mine = cfg.mpa();
  const iwarp::MpaResult theirs{.rev = mine.rev, .crc = mine.crc, .tx_markers = mine.rx_markers,
                                .rx_markers = mine.tx_markers, .rtr = mine.rtr,
                                .ord = mine.ird, .ird = mine.ord};
  sender.qp->start(&target.peer(), theirs, !cfg.initiator || cfg.rtr == iwarp::Rtr::kNone);
  post_scenario(sender.qp.get(), s);
  for (int i = 0; i < 100; ++i) {  // the sender reads our requests and answers them
    sender.qp->rx_progress();
    sender.qp->tx_progress();
  }
  FUZZ_CHECK(sender.qp->state() == QpState::kRts, "sender failed (%s, %s): state %s term 0x%x",
             cfg_name(cfg).c_str(), kScenarioName[s], to_string(sender.qp->state()),
             sender.qp->error_term());
  softrdma::testing::FakeConn& c = target.conn();
  Bytes out(c.pending_data(), c.pending_data() + c.pending());
  // Replayed into a fresh target, all of it must be accepted.
  fuzz::QpTarget check(cfg);
  check.feed(out.data(), out.size());
  FUZZ_CHECK(check.qp()->state() == QpState::kRts, "seed %s not accepted", kScenarioName[s]);
  return out;
}

// Splits an unmarked captured stream into fuzz_rdmap records.
Bytes to_records(const Bytes& stream) {
  Bytes rec;
  for (size_t off = 0; off < stream.size();) {
    const size_t ulpdu = (size_t{stream[off]} << 8) | stream[off + 1];
    rec.insert(rec.end(), stream.begin() + static_cast<long>(off),
               stream.begin() + static_cast<long>(off + 2 + ulpdu));
    off += 2 + ulpdu + iwarp::mpa_pad(ulpdu) + iwarp::kMpaCrcSize;
  }
  return rec;
}

void qp_seeds() {
  std::vector<QpConfig> cfgs;
  for (int crc = 0; crc < 2; ++crc) {
    for (int markers = 0; markers < 2; ++markers) {
      QpConfig c;
      c.crc = crc;
      c.rx_markers = markers;
      cfgs.push_back(c);
    }
  }
  for (iwarp::Rtr r : {iwarp::Rtr::kWrite, iwarp::Rtr::kRead, iwarp::Rtr::kSend}) {
    for (bool init : {false, true}) {
      QpConfig c;
      c.rtr = r;
      c.initiator = init;
      cfgs.push_back(c);
    }
  }
  for (const QpConfig& c : cfgs) {
    for (int s = 0; s < kScenarioCount; ++s) {
      // Every scenario for the four CRC/marker settings; the RTR variants
      // only for the mix (the RTR is their difference).
      if (c.rtr != iwarp::Rtr::kNone && s != kMix) continue;
      const Bytes stream = capture(c, static_cast<Scenario>(s));
      const std::string name = cfg_name(c) + "-" + kScenarioName[s];
      QpConfig fed = c;
      fed.feed = static_cast<uint8_t>(s % 4);  // some seeds arrive in pieces
      write_seed("fuzz_fpdu_stream", name, with_prefix({fed.byte0(), static_cast<uint8_t>(s)}, stream));
      if (!c.rx_markers)  // records are framing-free; the config byte turns markers on again
        write_seed("fuzz_rdmap", name, with_prefix({c.byte0(), static_cast<uint8_t>(s)}, to_records(stream)));
    }
  }
}

// Terminates the engine sends for bad input, as fuzz_terminate input.
void terminate_seeds() {
  QpConfig cfg;  // CRC, no markers, no RTR
  fuzz::Framer framer(cfg.crc, false);
  struct Bad {
    const char* name;
    Bytes hdr;
    Bytes payload;
  };
  const Bad bad[] = {
      {"bad_stag", softrdma::testing::tagged_hdr(RdmapOpcode::kRdmaWrite, true, 0x7fffff00, 0), Bytes(8, 1)},
      {"bounds", softrdma::testing::tagged_hdr(RdmapOpcode::kRdmaWrite, true, fuzz::region_stag(fuzz::kWrite),
                                     fuzz::region_addr(fuzz::kWrite) + 4090), Bytes(8, 1)},
      {"bad_qn", softrdma::testing::untagged_hdr(RdmapOpcode::kSend, true, 7, 1, 0), Bytes(8, 1)},
      {"read_src", softrdma::testing::untagged_hdr(RdmapOpcode::kRdmaReadReq, true, iwarp::kQnReadReq, 1, 0),
       softrdma::testing::read_req_payload(0x1234, 0x5000, 64, 0x7fffff00, 0)},
      {"no_buffer", softrdma::testing::untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, 1, 0), Bytes(600, 3)},
  };
  for (int scenario : {0, 1, 2, 3}) {
    for (const Bad& b : bad) {
      fuzz::QpTarget t(cfg);
      Bytes u = b.hdr;
      u.insert(u.end(), b.payload.begin(), b.payload.end());
      const Bytes f = framer.frame(u.data() + 2, u.size() - 2);
      t.feed(f.data(), f.size());
      // The last FPDU we sent is the Terminate: its header after the MPA
      // length (18 octets) and its payload are the seed.
      const Bytes& out = t.out();
      size_t off = 0, last = 0;
      while (off < out.size()) {
        last = off;
        const size_t ulpdu = (size_t{out[off]} << 8) | out[off + 1];
        off += 2 + ulpdu + iwarp::mpa_pad(ulpdu) + iwarp::kMpaCrcSize;
      }
      const size_t ulpdu = (size_t{out[last]} << 8) | out[last + 1];
      Bytes term(out.begin() + static_cast<long>(last + 2),
                 out.begin() + static_cast<long>(last + 2 + ulpdu));
      FUZZ_CHECK(term.size() > 18 && (term[1] & 0xf) == 7, "no Terminate for %s", b.name);
      write_seed("fuzz_terminate", std::string(b.name) + "-" + std::to_string(scenario),
                 with_prefix({cfg.byte0(), 0, static_cast<uint8_t>(scenario | (scenario ? 8 : 0))}, term));
    }
  }
}

// MPA Requests (we listen) and Replies (we connect), followed by the
// traffic the negotiated settings allow.
void handshake_seeds() {
  struct Case {
    const char* name;
    bool active;
    uint8_t rev;
    iwarp::Rtr engine_rtr;
    bool reject_frame;
    size_t pd;
  };
  const Case cases[] = {
      {"req_v2_write", false, 2, iwarp::Rtr::kWrite, false, 5},
      {"req_v2_send", false, 2, iwarp::Rtr::kSend, false, 0},
      {"req_v2_read", false, 2, iwarp::Rtr::kRead, false, 100},
      {"req_v1", false, 1, iwarp::Rtr::kNone, false, 12},
      {"req_v2_nop2p", false, 2, iwarp::Rtr::kNone, false, 508},
      {"rep_v2_write", true, 2, iwarp::Rtr::kWrite, false, 3},
      {"rep_v1", true, 1, iwarp::Rtr::kNone, false, 0},
      {"rep_reject", true, 2, iwarp::Rtr::kWrite, true, 20},
  };
  for (const Case& k : cases) {
    iwarp::MpaParams peer;
    peer.rev = k.rev;
    peer.crc = true;
    peer.markers = false;
    peer.ird = peer.ord = fuzz::kIrdOrd;
    peer.p2p = k.engine_rtr != iwarp::Rtr::kNone;
    peer.rtr_write = k.engine_rtr == iwarp::Rtr::kWrite;
    peer.rtr_read = k.engine_rtr == iwarp::Rtr::kRead;
    peer.rtr_send = k.engine_rtr == iwarp::Rtr::kSend;
    peer.reject = k.reject_frame;
    for (size_t i = 0; i < k.pd; ++i) peer.private_data.push_back(static_cast<uint8_t>('a' + i % 26));
    Bytes frame = iwarp::mpa_build(k.active, peer);
    // Octet 0 as fuzz_mpa_handshake reads it: role, CRC on, markers off,
    // the engine's revision and RTR.
    const int rtr = k.engine_rtr == iwarp::Rtr::kWrite ? 1 : k.engine_rtr == iwarp::Rtr::kRead ? 2
                  : k.engine_rtr == iwarp::Rtr::kSend ? 3 : 0;
    const uint8_t c0 = static_cast<uint8_t>(k.active | 2 | (k.rev == 1 ? 8 : 0) | (rtr << 4));
    if (!k.reject_frame) {
      QpConfig qc;
      qc.crc = true;
      qc.rtr = k.rev == 2 ? k.engine_rtr : iwarp::Rtr::kNone;
      qc.initiator = k.active;
      const Bytes stream = capture(qc, kMix);
      frame.insert(frame.end(), stream.begin(), stream.end());
    }
    write_seed("fuzz_mpa_handshake", k.name, with_prefix({c0, 0}, frame));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  fuzz::init();
  for (size_t i = 0; i < g_src.size(); ++i) g_src[i] = static_cast<uint8_t>(i * 7 + 1);
  qp_seeds();
  terminate_seeds();
  handshake_seeds();
  std::printf("corpus written to %s\n", g_dir.c_str());
  return 0;
}
