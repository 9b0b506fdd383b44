// iovec + MR descriptor arrays -> engine SGEs, and inject copies.
#pragma once

#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

inline size_t iov_bytes(const iovec* iov, size_t count) {
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) n += iov[i].iov_len;
  return n;
}

// A descriptor names an MR (its STag becomes the SGE's lkey); none is fine:
// the provider requires no FI_MR_LOCAL.
inline bool fill_sges(Sge* sg, int* n, const iovec* iov, void** desc, size_t count) {
  if (count > kMaxIov) return false;
  for (size_t i = 0; i < count; ++i) {
    auto* mr = desc ? static_cast<MemRegion*>(desc[i]) : nullptr;
    sg[i] = Sge{reinterpret_cast<uint64_t>(iov[i].iov_base), static_cast<uint32_t>(iov[i].iov_len),
                mr ? mr->mr->stag : 0};
    if (iov[i].iov_len > UINT32_MAX) return false;
  }
  *n = static_cast<int>(count);
  return true;
}

// The iovecs' bytes, one after another, into *to from offset at on (what
// is before it is left for the caller to fill).
inline void gather(std::vector<uint8_t>* to, size_t at, const iovec* iov, size_t count) {
  to->resize(at + iov_bytes(iov, count));
  for (size_t i = 0; i < count; ++i) {
    if (iov[i].iov_len) std::memcpy(to->data() + at, iov[i].iov_base, iov[i].iov_len);
    at += iov[i].iov_len;
  }
}

// The data is copied into the operation so the caller may reuse its buffer
// as soon as the call returns.
inline bool inject_copy(Ep* ep, Op* op, const iovec* iov, size_t count, SendWr* wr) {
  size_t total = iov_bytes(iov, count);
  if (total > ep->info->tx_attr->inject_size) return false;
  wr->num_sge = 0;
  if (total == 0) return true;  // nothing to copy (the buffer may be null)
  gather(&op->inject, 0, iov, count);
  wr->num_sge = 1;
  wr->sg_list[0] =
      Sge{reinterpret_cast<uint64_t>(op->inject.data()), static_cast<uint32_t>(total), 0};
  return true;
}

}  // namespace softrdma::prov
