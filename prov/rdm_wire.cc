// The native FI_EP_RDM endpoint's protocol: building and checking its
// headers (see rdm_wire.h). A peer's message that breaks the protocol is
// named by what it breaks; the endpoint ends that peer's connection.
#include "prov/rdm_wire.h"

#include <cstring>

namespace softrdma::prov {

namespace {

constexpr uint8_t kHelloMagic[4] = {'S', 'R', 'D', 'M'};

bool carries_message(RdmOp op) { return op == RdmOp::kEager || op == RdmOp::kRendezvous; }

}  // namespace

const char* rdm_parse_name(RdmParse p) {
  switch (p) {
    case RdmParse::kOk: return "ok";
    case RdmParse::kShort: return "shorter than its header";
    case RdmParse::kVersion: return "unknown protocol version";
    case RdmParse::kOp: return "unknown op";
    case RdmParse::kFlags: return "flags its op cannot carry";
    case RdmParse::kLength: return "length disagrees with its header";
    case RdmParse::kTooLarge: return "payload past the eager limit or the largest message";
    case RdmParse::kCredits: return "more credits than buffers";
  }
  return "?";
}

RdmParse rdm_parse(const uint8_t* p, size_t len, size_t eager_limit, RdmMsg* out) {
  RdmHeader h;
  if (len < sizeof(h)) return RdmParse::kShort;
  std::memcpy(&h, p, sizeof(h));
  if (h.version != kRdmVersion) return RdmParse::kVersion;
  const auto op = static_cast<RdmOp>(h.op);
  if (op < RdmOp::kEager || op > RdmOp::kCredit) return RdmParse::kOp;
  const uint16_t flags = h.flags.get();
  if ((flags & ~kRdmFlags) != 0 || (!carries_message(op) && flags != 0)) return RdmParse::kFlags;
  if (h.credits.get() > kRdmBuffers) return RdmParse::kCredits;
  const uint64_t size = h.size.get();
  const size_t body = len - sizeof(h);
  *out = RdmMsg{.op = op,
                .flags = flags,
                .credits = h.credits.get(),
                .tag = h.tag.get(),
                .cq_data = h.cq_data.get(),
                .msg_id = h.msg_id.get(),
                .size = size,
                .payload = p + sizeof(h),
                .stag = 0,
                .addr = 0};
  switch (op) {
    case RdmOp::kEager:
      if (size > eager_limit) return RdmParse::kTooLarge;
      return size == body ? RdmParse::kOk : RdmParse::kLength;
    case RdmOp::kRendezvous: {
      RdmRendezvous r;
      if (body != sizeof(r)) return RdmParse::kLength;
      if (size > kRdmMaxSize) return RdmParse::kTooLarge;
      std::memcpy(&r, p + sizeof(h), sizeof(r));
      out->stag = r.stag.get();
      out->addr = r.addr.get();
      return RdmParse::kOk;
    }
    default:  // control: the header alone
      return body == 0 && size == 0 ? RdmParse::kOk : RdmParse::kLength;
  }
}

size_t rdm_put_header(uint8_t* p, RdmOp op, uint16_t flags, uint32_t credits, uint64_t tag,
                      uint64_t cq_data, uint64_t msg_id, uint64_t size) {
  RdmHeader h{};
  h.version = kRdmVersion;
  h.op = static_cast<uint8_t>(op);
  h.flags.set(flags);
  h.credits.set(credits);
  h.tag.set(tag);
  h.cq_data.set(cq_data);
  h.msg_id.set(msg_id);
  h.size.set(size);
  std::memcpy(p, &h, sizeof(h));
  return sizeof(h);
}

RdmHello rdm_hello(uint32_t addr_host, uint16_t port_host, uint32_t credits) {
  RdmHello h{};
  std::memcpy(h.magic, kHelloMagic, sizeof(h.magic));
  h.version = kRdmVersion;
  h.port.set(port_host);
  h.addr.set(addr_host);
  h.credits.set(credits);
  return h;
}

bool rdm_hello_ok(const void* pdata, size_t len, RdmHello* out) {
  if (pdata == nullptr || len != sizeof(RdmHello)) return false;
  std::memcpy(out, pdata, sizeof(*out));
  return std::memcmp(out->magic, kHelloMagic, sizeof(kHelloMagic)) == 0 &&
         out->version == kRdmVersion && out->port.get() != 0 &&
         out->credits.get() <= kRdmBuffers;
}

}  // namespace softrdma::prov
