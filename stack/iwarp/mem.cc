#include "stack/iwarp/mem.h"

#include <cerrno>

namespace softrdma::iwarp {

Mr* MrTable::reg(Pd* pd, const void* addr, uint64_t len, uint32_t access) {
  if (addr == nullptr && len != 0) return nullptr;
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (slots_.size() >= (1u << (32 - kKeyBits))) return nullptr;
    index = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Mr& mr = slots_[index];
  // New key for every reuse of the index; key 0 only on first use.
  uint32_t key = mr.stag ? ((mr.stag + 1) & ((1u << kKeyBits) - 1)) : 0;
  mr.stag = (index << kKeyBits) | key;
  mr.pd = pd;
  mr.va = reinterpret_cast<uint64_t>(addr);
  mr.len = len;
  mr.access = access;
  mr.valid = true;
  ++live_;
  return &mr;
}

const Mr* MrTable::find(uint32_t stag) const {
  uint32_t index = stag >> kKeyBits;
  if (index == 0 || index >= slots_.size()) return nullptr;
  const Mr& mr = slots_[index];
  return (mr.stag == stag && mr.pd != nullptr) ? &mr : nullptr;
}

int MrTable::dereg(uint32_t stag) {
  Mr* mr = const_cast<Mr*>(find(stag));
  if (!mr) return -ENOENT;
  mr->valid = false;
  mr->pd = nullptr;  // a dead slot: find() refuses it until reuse
  free_.push_back(stag >> kKeyBits);
  --live_;
  return 0;
}

AccessResult MrTable::invalidate(uint32_t stag, const Pd* pd) {
  Mr* mr = const_cast<Mr*>(find(stag));
  if (!mr || !mr->valid) return AccessResult::kInvalidStag;
  if (mr->pd != pd) return AccessResult::kPdMismatch;
  mr->valid = false;  // stays registered (dereg frees it) but refuses access
  return AccessResult::kOk;
}

AccessResult MrTable::check(uint32_t stag, const Pd* pd, uint64_t to, uint64_t len,
                            uint32_t need, uint8_t** out) const {
  const Mr* mr = find(stag);
  if (!mr || !mr->valid) return AccessResult::kInvalidStag;
  if (mr->pd != pd) return AccessResult::kPdMismatch;
  if ((mr->access & need) != need) return AccessResult::kAccessRights;
  uint64_t end;
  if (__builtin_add_overflow(to, len, &end)) return AccessResult::kToWrap;
  if (to < mr->va || end > mr->va + mr->len) return AccessResult::kBaseBounds;
  *out = reinterpret_cast<uint8_t*>(to);
  return AccessResult::kOk;
}

const char* to_string(AccessResult r) {
  switch (r) {
    case AccessResult::kOk: return "ok";
    case AccessResult::kInvalidStag: return "invalid STag";
    case AccessResult::kPdMismatch: return "STag of another PD";
    case AccessResult::kAccessRights: return "access rights";
    case AccessResult::kBaseBounds: return "base or bounds";
    case AccessResult::kToWrap: return "TO wrap";
  }
  return "?";
}

}  // namespace softrdma::iwarp
