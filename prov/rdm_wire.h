// The native FI_EP_RDM endpoint's protocol between two endpoints. Each pair
// of peers talks over one iWARP connection, made on demand.
//
// Set-up: the MPA request's private data (RFC 5044 section 7.1, behind
// RFC 6581's enhanced connection header) is an RdmHello naming the
// connecting endpoint, whose TCP source port is an ephemeral one: the
// acceptor finds the sender's fi_addr_t (FI_SOURCE) by this name.
//
// Messages: every message is one RDMAP Send (RFC 5040 section 5.3) into one
// of the receiver's eager buffers, starting with an RdmHeader:
//   kEager       header + payload: a message no longer than the eager limit;
//   kRendezvous  header + RdmRendezvous: a longer message the target reads
//                with an RDMA Read (RFC 5040 section 4.5) into the matched
//                receive buffer, then answers with kRendezvousDone;
//   kRendezvousDone  header only (msg_id): the initiator's buffer is free;
//   kDeliveryAck header only (msg_id): a message sent with kAckDelivery was
//                placed in the receive buffer it matched;
//   kCredit      header only: eager buffers given back, with nothing else
//                to carry them.
// Every header returns the sender's freed eager buffers in `credits`, so a
// sender never sends into a receiver that has no buffer posted for it; no
// end posts more than kRdmBuffers for a connection, so no peer is owed
// more. A message carries at most kRdmMaxSize bytes: an RDMA Read
// Request's size is 32 bits (RFC 5040 section 4.4).
// Fields are big-endian, like the rest of the iWARP wire.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stack/common/be.h"

namespace softrdma::prov {

inline constexpr uint8_t kRdmVersion = 1;
inline constexpr uint32_t kRdmBuffers = 32;       // eager buffers per connection and end
inline constexpr size_t kRdmEager = 8192;         // longer messages go by rendezvous
inline constexpr uint64_t kRdmMaxSize = UINT32_MAX;  // a message's payload bytes

struct RdmHello {
  uint8_t magic[4];  // "SRDM"
  uint8_t version;
  uint8_t reserved;
  Be16 port;  // the connector's name: where its endpoint listens
  Be32 addr;
  Be32 credits;  // eager buffers the connector posted for the acceptor
};
static_assert(sizeof(RdmHello) == 16);

// On the wire 1 to 5, in this order.
enum class RdmOp : uint8_t { kEager = 1, kRendezvous, kRendezvousDone, kDeliveryAck, kCredit };

// RdmHeader::flags.
inline constexpr uint16_t kRdmTagged = 1 << 0;      // matched as fi_tsend's tag
inline constexpr uint16_t kRdmCqData = 1 << 1;      // cq_data is FI_REMOTE_CQ_DATA
inline constexpr uint16_t kRdmAckDelivery = 1 << 2;  // answer kDeliveryAck once placed
inline constexpr uint16_t kRdmFlags = kRdmTagged | kRdmCqData | kRdmAckDelivery;

struct RdmHeader {
  uint8_t version;
  uint8_t op;  // RdmOp
  Be16 flags;
  Be32 credits;
  Be64 tag;
  Be64 cq_data;
  Be64 msg_id;  // the initiator's: named by kRendezvousDone and kDeliveryAck
  Be64 size;    // the message's payload bytes
};
static_assert(sizeof(RdmHeader) == 40);

// After the header of a kRendezvous: where the target reads the payload.
struct RdmRendezvous {
  Be32 stag;
  Be32 reserved;
  Be64 addr;  // tagged offset (RFC 5041 section 4.3) of the payload's first byte
};
static_assert(sizeof(RdmRendezvous) == 16);

// A received message's header, checked.
struct RdmMsg {
  RdmOp op;
  uint16_t flags;
  uint32_t credits;
  uint64_t tag, cq_data, msg_id, size;
  const uint8_t* payload;  // kEager: size bytes
  uint32_t stag;           // kRendezvous
  uint64_t addr;
};

enum class RdmParse {
  kOk,
  kShort,        // shorter than its header
  kVersion,      // a version this endpoint does not speak
  kOp,           // an unknown op
  kFlags,        // unknown flags, or flags its op cannot carry
  kLength,       // the message's length disagrees with its header
  kTooLarge,     // an eager payload past the eager limit, or a message past kRdmMaxSize
  kCredits,      // more credits than kRdmBuffers
};
const char* rdm_parse_name(RdmParse p);

// Checks a received message of len bytes against the protocol and this
// endpoint's eager limit; on kOk fills *out.
RdmParse rdm_parse(const uint8_t* p, size_t len, size_t eager_limit, RdmMsg* out);

// Writes a header; returns its size.
size_t rdm_put_header(uint8_t* p, RdmOp op, uint16_t flags, uint32_t credits, uint64_t tag,
                      uint64_t cq_data, uint64_t msg_id, uint64_t size);

// The hello a connecting endpoint sends, and the acceptor's check of it:
// false for private data that is not a hello this endpoint speaks, or
// that offers more than kRdmBuffers credits.
RdmHello rdm_hello(uint32_t addr_host, uint16_t port_host, uint32_t credits);
bool rdm_hello_ok(const void* pdata, size_t len, RdmHello* out);

}  // namespace softrdma::prov
