// The FPDU stream as it comes off the transport (RFC 5044 §5-6): ULPDU
// lengths, markers, pad, CRC, and behind them the DDP/RDMAP headers and
// placement, with nothing framed for the fuzzer.
//
// Input: octet 0 = QpConfig (CRC on/off, markers on/off, RTR kind and side,
// FIN or reset, feeding mode), octet 1 = the seed that cuts the stream into
// views (FakeConn), then the raw stream our QP receives. With CRC off the
// fuzzer reaches placement; with CRC on it works the framing and the CRC
// check itself (fuzz_rdmap frames valid CRCs around fuzzed headers).
#include "stack/fuzz/fuzz_target.h"

using namespace softrdma;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const fuzz::QpConfig cfg = fuzz::QpConfig::from(data[0], data[1]);
  data += 2;
  size -= 2;
  fuzz::QpTarget t(cfg);
  // Feeding: all at once, or in pieces with progress in between (a stream
  // arriving over time: responses go out between pieces). Piece sizes come
  // from the seed so that the same input always runs the same way. Once the
  // QP has left RTS (it sent or took a Terminate) the rest of the stream is
  // only to be ignored, so it goes over in one piece: fed octet by octet it
  // cost a receive pass per octet and tested nothing more.
  std::mt19937 rng(static_cast<uint32_t>(cfg.seed));
  static constexpr size_t kPiece[] = {0, 1, 7, 509};
  const size_t piece = kPiece[cfg.feed];
  for (size_t off = 0; off < size;) {
    const bool receiving = t.qp()->state() == QpState::kRts;
    size_t n = piece == 0 || !receiving ? size - off : std::min(size - off, 1 + rng() % piece);
    t.feed(data + off, n);
    off += n;
  }
  t.finish();
  return 0;
}
