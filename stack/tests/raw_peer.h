// A hand-driven iWARP peer for tests: a plain kernel TCP socket that does
// the MPA exchange itself and then writes FPDUs built octet by octet, so a
// test can put any header, length, pad or CRC on the wire and read back
// exactly what the engine answers (FPDUs, Terminate, FIN or reset).
//
// Nothing here shares code with the engine's framing except the wire.h
// structs, crc32c and mpa_build/MpaReader; a bug in the engine's FPDU
// machine therefore cannot hide a bug in the peer. Every wait is bounded:
// the socket is non-blocking and each call polls it in 1 ms slices with a
// deadline, running `pump` (the engines' progress) in between, so a test
// drives the engine and the peer from one thread without deadlock.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stack/common/crc32c.h"
#include "stack/iwarp/mpa.h"
#include "stack/iwarp/wire.h"

namespace softrdma::testing {

using Bytes = std::vector<uint8_t>;

template <typename T>
Bytes bytes_of(const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  return Bytes(p, p + sizeof(T));
}

inline Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// --- FPDU construction ------------------------------------------------------

// DDP/RDMAP headers with the MPA length left 0 (frame_fpdu fills it in).
inline Bytes tagged_hdr(iwarp::RdmapOpcode op, bool last, uint32_t stag, uint64_t to) {
  iwarp::TaggedHdr h{};
  h.ctrl.set(true, last, op);
  h.stag.set(stag);
  h.to.set(to);
  return bytes_of(h);
}

inline Bytes untagged_hdr(iwarp::RdmapOpcode op, bool last, uint32_t qn, uint32_t msn, uint32_t mo,
                          uint32_t rsvd_ulp = 0) {
  iwarp::UntaggedHdr h{};
  h.ctrl.set(false, last, op);
  h.rsvd_ulp.set(rsvd_ulp);
  h.qn.set(qn);
  h.msn.set(msn);
  h.mo.set(mo);
  return bytes_of(h);
}

struct FrameOpts {
  bool crc = true;                  // CRC negotiated: compute it (else the field is 0)
  bool corrupt_crc = false;         // flip a bit of the CRC
  std::optional<uint16_t> mpa_len;  // lie about ULPDU_Length (CRC still covers what is sent)
};

// ULPDU_Length(2) | header after the length | payload | pad | CRC, the CRC
// stored least significant octet first (RFC 5044 §6.1, as TxFrame does).
inline Bytes frame_fpdu(Bytes hdr, const Bytes& payload, const FrameOpts& o = {}) {
  Bytes f = concat(std::move(hdr), payload);
  const size_t ulpdu = f.size() - iwarp::kMpaLenSize;
  const uint16_t len = o.mpa_len.value_or(static_cast<uint16_t>(ulpdu));
  f[0] = static_cast<uint8_t>(len >> 8);
  f[1] = static_cast<uint8_t>(len);
  f.resize(f.size() + iwarp::mpa_pad(ulpdu), 0);
  uint32_t crc = o.crc ? crc32c(f.data(), f.size()) : 0;
  if (o.corrupt_crc) crc ^= 0x00010000u;
  for (int i = 0; i < 4; ++i) f.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  return f;
}

// RDMA Read Request payload (RFC 5040 §4.4).
inline Bytes read_req_payload(uint32_t sink_stag, uint64_t sink_to, uint32_t size,
                              uint32_t src_stag, uint64_t src_to) {
  iwarp::ReadReqPayload r{};
  r.sink_stag.set(sink_stag);
  r.sink_to.set(sink_to);
  r.read_size.set(size);
  r.src_stag.set(src_stag);
  r.src_to.set(src_to);
  return bytes_of(r);
}

// RFC 7306 §5.4 Atomic Request payload.
inline Bytes atomic_req_payload(iwarp::AtomicOpcode op, uint32_t req_id, uint32_t stag, uint64_t to,
                                uint64_t add_swap, uint64_t compare = 0) {
  iwarp::AtomicReqPayload a{};
  a.opcode.set(static_cast<uint32_t>(op));
  a.req_id.set(req_id);
  a.remote_stag.set(stag);
  a.remote_to.set(to);
  a.add_swap.set(add_swap);
  a.add_swap_mask.set(~uint64_t{0});
  a.compare.set(compare);
  a.compare_mask.set(~uint64_t{0});
  return bytes_of(a);
}

// --- FPDU parsing -----------------------------------------------------------

// One FPDU the engine sent: ULPDU_Length through payload (pad and CRC cut).
struct RxFpdu {
  Bytes ulpdu;
  bool crc_ok = true;

  const iwarp::Ctrl& ctrl() const { return *reinterpret_cast<const iwarp::Ctrl*>(ulpdu.data()); }
  bool tagged() const { return ctrl().tagged(); }
  uint8_t opcode() const { return ctrl().opcode(); }
  size_t hdr_len() const { return iwarp::hdr_len(tagged()); }
  bool complete_hdr() const { return ulpdu.size() >= hdr_len(); }
  uint32_t be32(size_t off) const {
    return (uint32_t{ulpdu[off]} << 24) | (uint32_t{ulpdu[off + 1]} << 16) |
           (uint32_t{ulpdu[off + 2]} << 8) | ulpdu[off + 3];
  }
  uint32_t qn() const { return be32(offsetof(iwarp::UntaggedHdr, qn)); }
  uint32_t msn() const { return be32(offsetof(iwarp::UntaggedHdr, msn)); }
  uint32_t mo() const { return be32(offsetof(iwarp::UntaggedHdr, mo)); }
  Bytes payload() const { return Bytes(ulpdu.begin() + static_cast<long>(hdr_len()), ulpdu.end()); }
  bool is_terminate() const {
    return !tagged() && opcode() == static_cast<uint8_t>(iwarp::RdmapOpcode::kTerminate);
  }
};

// A decoded Terminate (RFC 5040 §4.8).
struct TermInfo {
  uint8_t layer = 0, etype = 0, ecode = 0;
  bool m = false, d = false, r = false;
  uint16_t seg_len = 0;  // DDP Segment Length (if M or D)
  Bytes ddp_hdr;         // terminated DDP header: 14 (tagged) or 18 (untagged) octets
  Bytes rdmap_hdr;       // terminated RDMAP header (Read Request, 28 octets)
  uint32_t packed() const { return (uint32_t{layer} << 12) | (uint32_t{etype} << 8) | ecode; }
};

// Decodes f's Terminate payload; false (and *why) when it is malformed.
inline bool decode_terminate(const RxFpdu& f, TermInfo* t, std::string* why) {
  if (!f.is_terminate() || !f.complete_hdr()) {
    *why = "not a Terminate FPDU";
    return false;
  }
  const Bytes p = f.payload();
  if (p.size() < sizeof(iwarp::TerminatePayload)) {
    *why = "Terminate payload shorter than its control word";
    return false;
  }
  const uint32_t c = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  t->layer = static_cast<uint8_t>((c >> iwarp::kTermLayerShift) & 0xf);
  t->etype = static_cast<uint8_t>((c >> iwarp::kTermEtypeShift) & 0xf);
  t->ecode = static_cast<uint8_t>((c >> iwarp::kTermEcodeShift) & 0xff);
  t->m = c & iwarp::kTermFlagM;
  t->d = c & iwarp::kTermFlagD;
  t->r = c & iwarp::kTermFlagR;
  if (c & 0x1fff) {
    *why = "reserved bits of the Terminate control word set";
    return false;
  }
  size_t off = sizeof(iwarp::TerminatePayload);
  if (t->m || t->d) {
    if (p.size() < off + iwarp::kTermDdpSegLenSize) {
      *why = "DDP Segment Length missing";
      return false;
    }
    t->seg_len = static_cast<uint16_t>((p[off] << 8) | p[off + 1]);
    off += iwarp::kTermDdpSegLenSize;
  }
  if (t->d) {
    if (p.size() <= off) {
      *why = "terminated DDP header missing";
      return false;
    }
    const bool tagged = p[off] & iwarp::kDdpTagged;
    const size_t n = iwarp::hdr_len(tagged) - iwarp::kMpaLenSize;
    if (p.size() < off + n) {
      *why = "terminated DDP header truncated";
      return false;
    }
    t->ddp_hdr.assign(p.begin() + static_cast<long>(off), p.begin() + static_cast<long>(off + n));
    off += n;
  }
  if (t->r) {
    if (p.size() < off + iwarp::kTermRdmapHdrSize) {
      *why = "terminated RDMAP header truncated";
      return false;
    }
    t->rdmap_hdr.assign(p.begin() + static_cast<long>(off),
                        p.begin() + static_cast<long>(off + iwarp::kTermRdmapHdrSize));
    off += iwarp::kTermRdmapHdrSize;
  }
  if (off != p.size()) {
    *why = "Terminate payload has " + std::to_string(p.size() - off) + " unexplained octets";
    return false;
  }
  return true;
}

// --- the socket -------------------------------------------------------------

using Pump = std::function<void()>;

inline sockaddr_in loopback_addr(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A non-blocking TCP stream whose operations block the caller up to a
// deadline while pumping the engines.
class RawConn {
 public:
  explicit RawConn(Pump pump, int timeout_ms = 5000)
      : pump_(std::move(pump)), timeout_ms_(timeout_ms) {}
  ~RawConn() { close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connect(const sockaddr_in& to) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) return true;
    if (errno != EINPROGRESS) return false;
    if (!wait(POLLOUT, deadline())) return false;
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    return err == 0;
  }
  void adopt(int fd) {
    close();
    fd_ = fd;
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

  bool send_all(const Bytes& b) { return send_all(b.data(), b.size()); }
  bool send_all(const uint8_t* p, size_t n) {
    const auto end = deadline();
    while (n > 0) {
      ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w > 0) {
        p += w;
        n -= static_cast<size_t>(w);
        continue;
      }
      if (w < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (!wait(POLLOUT, end)) return false;
    }
    pump_();
    return true;
  }

  // Exactly n octets; false on timeout, end of stream or error.
  bool recv_exact(uint8_t* p, size_t n) {
    const auto end = deadline();
    while (n > 0) {
      ssize_t r = ::recv(fd_, p, n, 0);
      if (r > 0) {
        p += r;
        n -= static_cast<size_t>(r);
        continue;
      }
      if (r == 0) return false;
      if (errno != EAGAIN && errno != EINTR) return false;
      if (!wait(POLLIN, end)) return false;
    }
    return true;
  }

  // Waits until the other side ends the stream (FIN or reset). Octets that
  // arrive meanwhile are counted in *stray. False on timeout.
  bool wait_closed(size_t* stray) {
    *stray = 0;
    const auto end = deadline();
    uint8_t buf[4096];
    for (;;) {
      ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
      if (r > 0) {
        *stray += static_cast<size_t>(r);
        continue;
      }
      if (r == 0) return true;
      if (errno != EAGAIN && errno != EINTR) return true;  // reset: closed too
      if (!wait(POLLIN, end)) return false;
    }
  }

  Pump& pump() { return pump_; }
  std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  }

 private:
  bool wait(short events, std::chrono::steady_clock::time_point end) {
    for (;;) {
      pump_();
      pollfd p{fd_, events, 0};
      if (::poll(&p, 1, 1) > 0) return true;
      if (std::chrono::steady_clock::now() > end) return false;
    }
  }

  Pump pump_;
  int timeout_ms_;
  int fd_ = -1;
};

// A listening socket for tests where the engine is the MPA initiator.
class RawListener {
 public:
  RawListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback_addr(0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
          ::listen(fd_, 4) == 0;
  }
  ~RawListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawListener(const RawListener&) = delete;
  RawListener& operator=(const RawListener&) = delete;

  bool ok() const { return ok_; }
  sockaddr_in addr() const {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    return a;
  }
  // Accepts one connection into *c, pumping until the deadline.
  bool accept(RawConn* c) {
    const auto end = c->deadline();
    for (;;) {
      int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        c->adopt(fd);
        return true;
      }
      if (errno != EAGAIN && errno != EINTR) return false;
      c->pump()();
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, 1);
      if (std::chrono::steady_clock::now() > end) return false;
    }
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

// --- the iWARP peer -------------------------------------------------------

class RawPeer {
 public:
  explicit RawPeer(Pump pump, int timeout_ms = 5000) : conn_(std::move(pump), timeout_ms) {}

  RawConn& conn() { return conn_; }
  bool crc() const { return res_.crc; }
  const iwarp::MpaResult& mpa() const { return res_; }

  // Reads one MPA Request or Reply frame (header, then PD_Length octets).
  bool recv_mpa(bool reply, iwarp::MpaParams* out, iwarp::MpaStatus* st) {
    uint8_t hdr[sizeof(iwarp::MpaRrHdr)];
    if (!conn_.recv_exact(hdr, sizeof(hdr))) return false;
    iwarp::MpaReader rd(reply);
    size_t used = 0;
    *st = rd.feed(hdr, sizeof(hdr), &used);
    if (*st == iwarp::MpaStatus::kNeedMore) {
      Bytes pd(static_cast<size_t>((hdr[18] << 8) | hdr[19]));
      if (!conn_.recv_exact(pd.data(), pd.size())) return false;
      *st = rd.feed(pd.data(), pd.size(), &used);
    }
    *out = rd.params();
    return true;
  }

  // Active side: TCP connect, MPA Request, MPA Reply. True when the reply
  // accepts the request and both sides agree on the settings.
  bool connect_mpa(const sockaddr_in& to, const iwarp::MpaParams& req, iwarp::MpaParams* rep) {
    if (!conn_.connect(to) || !conn_.send_all(iwarp::mpa_build(false, req))) return false;
    iwarp::MpaStatus st;
    if (!recv_mpa(true, rep, &st) || st != iwarp::MpaStatus::kDone || rep->reject) return false;
    return iwarp::mpa_settle(req, *rep, &res_);
  }

  // RFC 6581 §5: the initiator's zero-length RDMA Write RTR.
  bool send_rtr_write() {
    return conn_.send_all(
        frame_fpdu(tagged_hdr(iwarp::RdmapOpcode::kRdmaWrite, true, 0, 0), {}, {.crc = crc()}));
  }

  uint32_t next_msn(uint32_t qn) { return tx_msn_[qn]++; }

  // Frames hdr+payload as negotiated (opts may lie), sends it, returns the
  // wire octets so a test can compare them with what a Terminate quotes.
  Bytes send_fpdu(Bytes hdr, const Bytes& payload, FrameOpts o = {}) {
    o.crc = crc();
    Bytes f = frame_fpdu(std::move(hdr), payload, o);
    sent_ok_ = conn_.send_all(f) && sent_ok_;
    return f;
  }
  // False once any send failed (the engine may reset a stream it gave up on).
  bool sent_ok() const { return sent_ok_; }

  // One FPDU from the engine; its CRC is checked when CRC is in use.
  bool read_fpdu(RxFpdu* f) {
    uint8_t len[2];
    if (!conn_.recv_exact(len, 2)) return false;
    const size_t ulpdu = (size_t{len[0]} << 8) | len[1];
    if (ulpdu < sizeof(iwarp::Ctrl) - iwarp::kMpaLenSize) return false;
    Bytes all(iwarp::kMpaLenSize + ulpdu + iwarp::mpa_pad(ulpdu));
    all[0] = len[0];
    all[1] = len[1];
    if (!conn_.recv_exact(all.data() + 2, all.size() - 2)) return false;
    uint8_t c[4];
    if (!conn_.recv_exact(c, 4)) return false;
    const uint32_t got =
        uint32_t{c[0]} | (uint32_t{c[1]} << 8) | (uint32_t{c[2]} << 16) | (uint32_t{c[3]} << 24);
    f->crc_ok = !crc() || got == crc32c(all.data(), all.size());
    all.resize(iwarp::kMpaLenSize + ulpdu);
    f->ulpdu = std::move(all);
    return true;
  }

  // Reads FPDUs until the Terminate (the others go to *before).
  bool read_terminate(RxFpdu* term, std::vector<RxFpdu>* before) {
    for (int i = 0; i < 1024; ++i) {
      RxFpdu f;
      if (!read_fpdu(&f)) return false;
      if (f.is_terminate()) {
        *term = std::move(f);
        return true;
      }
      before->push_back(std::move(f));
    }
    return false;
  }

 private:
  RawConn conn_;
  iwarp::MpaResult res_;
  uint32_t tx_msn_[iwarp::kQnCount] = {1, 1, 1, 1, 1};
  bool sent_ok_ = true;
};

}  // namespace softrdma::testing
