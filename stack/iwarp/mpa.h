// MPA connection setup: Request/Reply frames (RFC 5044 §7.1) and enhanced
// connection establishment with IRD/ORD and the ready-to-receive message
// (RFC 6581). Pure functions over bytes: the CM in engine_cm.cc drives them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stack/iwarp/wire.h"

namespace softrdma::iwarp {

// The zero-length RTR message the initiator sends first (RFC 6581 §5).
enum class Rtr : uint8_t { kNone, kWrite, kRead, kSend };

// What one side states in its Request or Reply.
struct MpaParams {
  bool markers = false;  // M: I want markers in the stream I receive
  bool crc = true;       // C: I want CRCs (used both ways if either side asks)
  bool reject = false;   // R: (Reply only) the connection is refused
  uint8_t rev = kMpaRev2;
  // Rev 2 only (RFC 6581 §5):
  bool p2p = true;                 // peer-to-peer: RTR required
  uint16_t ird = 16;               // reads I accept at once
  uint16_t ord = 16;               // reads I want outstanding at once
  bool rtr_write = true;           // RTR kinds offered (Request) or chosen (Reply)
  bool rtr_read = false;
  bool rtr_send = false;
  std::vector<uint8_t> private_data;  // the ULP's, after the 4-octet v2 prefix
};

// The connection's settings once Request and Reply have crossed.
struct MpaResult {
  uint8_t rev = kMpaRev1;
  bool crc = false;
  bool tx_markers = false;  // we must insert markers (the peer asked)
  bool rx_markers = false;  // the peer inserts markers (we asked)
  Rtr rtr = Rtr::kNone;
  uint16_t ord = 0;         // reads we may have outstanding
  uint16_t ird = 0;         // reads we accept outstanding
};

std::vector<uint8_t> mpa_build(bool reply, const MpaParams& p);

enum class MpaStatus : uint8_t {
  kNeedMore,
  kDone,
  kBadKey,       // not an MPA Request/Reply (wrong key)
  kBadRev,       // revision we do not speak
  kBadLength,    // PD_Length > 512, or a v2 frame without its 4-octet prefix
};
const char* to_string(MpaStatus s);

// Reads one Request or Reply from a byte stream, in pieces of any size.
class MpaReader {
 public:
  explicit MpaReader(bool reply) : reply_(reply) {}
  // Consumes at most the frame's bytes (*used says how many).
  MpaStatus feed(const uint8_t* data, size_t len, size_t* used);
  const MpaParams& params() const { return params_; }

 private:
  MpaStatus parse_header();
  MpaStatus finish();
  bool reply_;
  uint8_t hdr_[sizeof(MpaRrHdr)];
  size_t have_ = 0;
  size_t pd_len_ = 0;
  std::vector<uint8_t> pd_;
  MpaParams params_;
};

// Responder: given the Request and our wishes, the Reply to send and the
// resulting settings. The reply echoes the request's revision (v1 peers get
// a v1 reply), picks one RTR kind the initiator offered, and never grants
// more reads than the other side can take.
MpaParams mpa_answer(const MpaParams& req, const MpaParams& ours, MpaResult* out);
// Initiator: settings from our Request and the peer's Reply; false when the
// Reply is unusable (e.g. a v2 reply choosing an RTR we did not offer).
bool mpa_settle(const MpaParams& req, const MpaParams& rep, MpaResult* out);

}  // namespace softrdma::iwarp
