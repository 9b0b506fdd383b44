// DDP (RFC 5041) and RDMAP (RFC 5040, RFC 7306) headers and payloads behind
// valid MPA framing: the harness computes ULPDU_Length, pad, CRC and markers
// (with the engine's TxFrame), so every input gets past the framing and CRC
// and reaches the header checks, the STag/bounds/rights checks, placement
// into registered memory, Read/Atomic requests and responses, Send with
// Invalidate, Immediate Data and Terminate.
//
// Input: octet 0 = QpConfig (CRC, markers, RTR kind and side, FIN/reset),
// octet 1 = the view-cutting seed, then records: a 2-octet big-endian length
// L and L octets of DDP/RDMAP header + payload (the last record takes what
// is left). Each record becomes one FPDU and is fed on its own, so our
// responses go out between them.
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
  fuzz::Framer framer(cfg.crc, cfg.rx_markers);
  for (size_t off = 0; off + 2 <= size;) {
    size_t len = (size_t{data[off]} << 8) | data[off + 1];
    off += 2;
    len = std::min(len, size - off);
    const fuzz::Bytes fpdu = framer.frame(data + off, len);
    t.feed(fpdu.data(), fpdu.size());
    off += len;
  }
  t.finish();
  return 0;
}
