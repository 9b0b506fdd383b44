// The fault-injection spec (FI_SOFTRDMA_FAULTS): what the fault link
// (stack/net/fault_link.h) damages, and at which rates. Here rather than
// with the link so that the settings registry checks a spec when it reads
// the environment, before any link exists.
#pragma once

#include <cstdint>
#include <string>

namespace softrdma {

struct FaultRates {
  double drop = 0, dup = 0, reorder = 0, corrupt = 0;  // probabilities per frame
  double reset = 0;  // per received TCP segment (not SYN, FIN or RST)
  uint64_t seed = 1;  // mixed with the pid: two processes never fail in lockstep
  bool any() const { return drop > 0 || dup > 0 || reorder > 0 || corrupt > 0 || reset > 0; }
};

// Parses "key=value,..." (drop, dup, reorder, corrupt, reset, seed); false
// with *error on a bad key, a rate outside [0, 1] or a malformed number.
bool parse_fault_rates(const std::string& spec, FaultRates* out, std::string* error);

}  // namespace softrdma
