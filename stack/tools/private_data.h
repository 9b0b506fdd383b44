// What the tools carry in MPA private data: registered regions, and fixed
// structs decoded only when the length matches.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace softrdma::tools {

// A registered buffer as the peer addresses it.
struct Region {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint32_t rkey = 0;
  uint32_t pad = 0;
};

// *out from exactly sizeof(T) bytes of private data; false otherwise.
template <class T>
bool decode_exact(const std::vector<uint8_t>& pd, T* out) {
  if (pd.size() != sizeof(T)) return false;
  std::memcpy(out, pd.data(), sizeof(T));
  return true;
}

}  // namespace softrdma::tools
