// Terminate messages (RFC 5040 §4.8): a peer's Terminate arriving on QN 2,
// after traffic that leaves the QP in different states (nothing yet, a Send
// half received, a Send done, a Write placed), with our Read and Fetch-Add
// outstanding. Checks beyond "no crash": a well-formed Terminate moves the
// QP to error with exactly the layer / error type / code it carried, every
// request completes once, and the stream's later octets are ignored.
//
// Input: octet 0 = QpConfig, octet 1 = view seed, octet 2 = scenario
// (bits 0-1 prefix, bit 2 force a valid Terminate header so the fuzzer works
// on the payload, bit 3 a Send after the Terminate), then the 18 octets of
// the untagged DDP/RDMAP header after the MPA length, then the payload.
#include "stack/fuzz/fuzz_target.h"

using namespace softrdma;
using iwarp::RdmapOpcode;

namespace {

fuzz::Bytes ulpdu(fuzz::Bytes hdr, const fuzz::Bytes& payload) {
  hdr.insert(hdr.end(), payload.begin(), payload.end());
  return fuzz::Bytes(hdr.begin() + iwarp::kMpaLenSize, hdr.end());  // the framer adds the length
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHdr = sizeof(iwarp::UntaggedHdr) - iwarp::kMpaLenSize;
  if (size < 3 + kHdr) return 0;
  const fuzz::QpConfig cfg = fuzz::QpConfig::from(data[0], data[1]);
  const uint8_t scenario = data[2];
  fuzz::Bytes term(data + 3, data + 3 + kHdr);
  const fuzz::Bytes payload(data + 3 + kHdr, data + std::min<size_t>(size, 3 + kHdr + 1024));
  const bool forced = scenario & 4;
  if (forced) {  // untagged, last, DDP v1; RDMAP v1 Terminate; QN 2, MSN 1, MO 0
    fuzz::Bytes h = softrdma::testing::untagged_hdr(RdmapOpcode::kTerminate, true, iwarp::kQnTerminate, 1, 0,
                                          (uint32_t{term[2]} << 24) | (uint32_t{term[3]} << 16) |
                                              (uint32_t{term[4]} << 8) | term[5]);
    term.assign(h.begin() + iwarp::kMpaLenSize, h.end());
  }

  fuzz::QpTarget t(cfg);
  fuzz::Framer framer(cfg.crc, cfg.rx_markers);
  auto feed = [&](const fuzz::Bytes& u) {
    const fuzz::Bytes f = framer.frame(u.data(), u.size());
    t.feed(f.data(), f.size());
  };
  const fuzz::Bytes eight(8, 0x42);
  switch (scenario & 3) {
    case 1:  // first FPDU of a Send: receive 1 is mid-message
      feed(ulpdu(softrdma::testing::untagged_hdr(RdmapOpcode::kSend, false, iwarp::kQnSend, 1, 0), eight));
      break;
    case 2:  // a whole Send
      feed(ulpdu(softrdma::testing::untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, 1, 0), eight));
      break;
    case 3:  // an RDMA Write placed
      feed(ulpdu(softrdma::testing::tagged_hdr(RdmapOpcode::kRdmaWrite, true, fuzz::region_stag(fuzz::kWrite),
                                     fuzz::region_addr(fuzz::kWrite)),
                 eight));
      break;
  }
  const bool rts_before = t.qp()->state() == QpState::kRts;
  fuzz::Bytes u = term;
  u.insert(u.end(), payload.begin(), payload.end());
  feed(u);

  // The Terminate's control word, decoded here independently.
  const uint32_t ctrl = payload.size() >= 4 ? (uint32_t{payload[0]} << 24) |
                                                  (uint32_t{payload[1]} << 16) |
                                                  (uint32_t{payload[2]} << 8) | payload[3]
                                            : 0;
  const uint32_t want = (((ctrl >> 28) & 0xf) << 12) | (((ctrl >> 24) & 0xf) << 8) |
                        ((ctrl >> 16) & 0xff);
  if (const iwarp::TermCause* got = t.qp()->term_received()) {
    FUZZ_CHECK(got->packed() == want, "Terminate decoded as 0x%x, carried 0x%x", got->packed(),
               want);
    FUZZ_CHECK(t.qp()->state() == QpState::kError, "QP not in error after a Terminate");
    FUZZ_CHECK(t.qp()->error_status() == -EREMOTEIO, "error status %d after a Terminate",
               t.qp()->error_status());
  }
  const bool awaiting_rtr = cfg.rtr != iwarp::Rtr::kNone && !cfg.initiator;
  if (forced && rts_before && !awaiting_rtr && payload.size() >= 4 && payload.size() <= 64) {
    FUZZ_CHECK(t.qp()->term_received() != nullptr, "a well-formed Terminate was not taken");
  }
  if (scenario & 8) {  // after a Terminate nothing more may be placed or completed
    feed(ulpdu(softrdma::testing::untagged_hdr(RdmapOpcode::kSend, true, iwarp::kQnSend, 2, 0), eight));
  }
  t.finish();
  return 0;
}
