// Protection domains, memory regions and STags (RFC 5040 §2.1, §5.1).
//
// An STag is 32 bits: a 24-bit index into the region table and an 8-bit key
// that changes every time an index is reused, so a stale STag (one whose MR
// was closed or invalidated) never reaches memory registered later.
// Tagged offsets are virtual addresses (FI_MR_VIRT_ADDR): a region covers
// [va, va + len).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace softrdma::iwarp {

struct Pd {
  uint32_t id;
};

struct Mr {
  uint32_t stag = 0;
  Pd* pd = nullptr;
  uint64_t va = 0;        // first tagged offset
  uint64_t len = 0;
  uint32_t access = 0;    // softrdma::Access bits
  bool valid = false;
};

// Why an access was refused; mapped to RFC error codes in terminate.cc only.
enum class AccessResult : uint8_t {
  kOk,
  kInvalidStag,    // no such STag, stale key, or invalidated
  kPdMismatch,     // STag not associated with this stream's PD
  kAccessRights,   // region lacks the needed right
  kBaseBounds,     // [to, to+len) not inside the region
  kToWrap,         // to + len overflows 64 bits
};
const char* to_string(AccessResult r);

class MrTable {
 public:
  // Registers [addr, addr+len) with the given rights; returns null when the
  // table is full (2^24 regions) or len is 0 with a null address.
  Mr* reg(Pd* pd, const void* addr, uint64_t len, uint32_t access);
  // Closes an MR; its STag is dead from now on. Returns 0 or -ENOENT.
  int dereg(uint32_t stag);
  // Remote invalidation (Send with Invalidate): the STag must belong to pd.
  AccessResult invalidate(uint32_t stag, const Pd* pd);

  // Checks that [to, to+len) of STag lies in a valid region of pd with all
  // of need's rights. On kOk, *out is where `to` lives in our memory.
  AccessResult check(uint32_t stag, const Pd* pd, uint64_t to, uint64_t len, uint32_t need,
                     uint8_t** out) const;
  const Mr* find(uint32_t stag) const;
  size_t live() const { return live_; }

 private:
  static constexpr uint32_t kKeyBits = 8;
  // A deque: Mr pointers handed out stay valid while the table grows.
  std::deque<Mr> slots_{1};           // slot 0 unused: STag index 0 is never handed out
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace softrdma::iwarp
