// Engine-level verbs types: work requests, completions, access rights.
// This is the vocabulary prov/ and the tools speak to the engine in; it has
// no libfabric or socket types in it.
#pragma once

#include <cstdint>
#include <string>

namespace softrdma {

inline constexpr int kMaxSge = 8;

// Memory access rights (an MR's and a work request's). Local read is implied.
enum Access : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteRead = 1u << 1,
  kAccessRemoteWrite = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
};

// A scatter/gather element: registered memory named by its local key (STag).
// lkey 0 means "not registered": the application vouches for the memory
// itself. That is guaranteed for the sources of Sends and Writes, receive
// buffers and atomic result buffers (local memory only the local engine
// touches). A Read's sink with lkey 0 goes out as sink STag 0: this engine
// checks Read Responses against its own records, other RNICs may not.
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

enum class WrOpcode : uint8_t {
  kSend,
  kSendWithInv,      // Send with Invalidate: peer invalidates invalidate_stag
  kWrite,
  kWriteWithImm,     // RDMA Write followed by RFC 7306 Immediate Data
  kImmData,          // RFC 7306 Immediate Data alone
  kRead,
  kAtomicFetchAdd,   // RFC 7306, 64-bit
  kAtomicCmpSwap,    // RFC 7306, 64-bit
  kAtomicSwap,       // RFC 7306, 64-bit
};
const char* to_string(WrOpcode op);

enum WrFlags : uint32_t {
  kWrSignaled = 1u << 0,   // produce a success completion (errors always complete)
  kWrSolicited = 1u << 1,  // Send with Solicited Event
  kWrFence = 1u << 2,      // wait for prior Reads/Atomics to complete first
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t flags = kWrSignaled;
  int num_sge = 0;
  Sge sg_list[kMaxSge];
  uint64_t remote_addr = 0;    // tagged offset at the peer (Write/Read/Atomic)
  uint32_t rkey = 0;           // peer's STag
  uint32_t invalidate_stag = 0;
  uint64_t imm_data = 0;       // RFC 7306 Immediate Data (64 bits)
  uint64_t compare_add = 0;    // FetchAdd: addend; CmpSwap: compare value
  uint64_t swap = 0;           // CmpSwap, Swap: new value
  // RFC 7306's masks, which make narrower fields of the 64-bit word:
  // FetchAdd's Add Mask marks where carries stop (0: one 64-bit add), the
  // swap mask the bits replaced, the compare mask the bits compared.
  uint64_t add_mask = 0;
  uint64_t swap_mask = ~uint64_t{0};
  uint64_t compare_mask = ~uint64_t{0};
};

struct RecvWr {
  uint64_t wr_id = 0;
  int num_sge = 0;
  Sge sg_list[kMaxSge];
};

enum class WcStatus : uint8_t {
  kSuccess,
  kLocLenErr,       // message longer than the posted receive / bad local length
  kLocQpOpErr,      // local QP error
  kLocProtErr,      // local key invalid or lacks the right
  kWrFlushErr,      // flushed: QP went to error before this completed
  kRemAccessErr,    // peer refused: bad STag, bounds, rights (RDMAP protection)
  kRemOpErr,        // peer could not perform the operation
  kRemInvReqErr,    // peer saw an invalid request (opcode, version, queue)
  kBadRespErr,      // unexpected response (read response/atomic response)
  kFatalErr,        // stream lost: CRC error, transport reset, peer gone
};
const char* to_string(WcStatus s);

enum class WcOpcode : uint8_t {
  kSend,
  kWrite,
  kRead,
  kFetchAdd,
  kCmpSwap,
  kSwap,
  kImmData,       // requester side of a standalone Immediate Data
  kRecv,          // a Send (possibly with invalidate or immediate data)
  kRecvRdmaImm,   // RDMA Write with immediate data (Immediate Data message)
};
const char* to_string(WcOpcode op);

enum WcFlags : uint32_t {
  kWcWithImm = 1u << 0,
  kWcWithInv = 1u << 1,
  kWcSolicited = 1u << 2,
};

struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t flags = 0;
  uint32_t byte_len = 0;
  uint64_t imm_data = 0;
  uint32_t invalidated_stag = 0;
  uint32_t qp_num = 0;
  // For errors caused by a Terminate (sent or received): its layer, error
  // type and error code, packed as (layer << 12) | (etype << 8) | ecode.
  uint32_t vendor_err = 0;
};

// QP states of the iWARP verbs (RDMAC verbs §6; as in siw).
enum class QpState : uint8_t { kIdle, kRts, kClosing, kTerminate, kError };
const char* to_string(QpState s);

}  // namespace softrdma
