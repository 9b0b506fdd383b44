#include "stack/common/fault_rates.h"

#include <cstdlib>
#include <sstream>

namespace softrdma {

bool parse_fault_rates(const std::string& spec, FaultRates* out, std::string* error) {
  FaultRates r;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    char* end = nullptr;
    if (key == "seed") {
      r.seed = std::strtoull(value.c_str(), &end, 0);
    } else {
      double* rate = key == "drop"      ? &r.drop
                     : key == "dup"     ? &r.dup
                     : key == "reorder" ? &r.reorder
                     : key == "corrupt" ? &r.corrupt
                     : key == "reset"   ? &r.reset
                                        : nullptr;
      if (rate == nullptr) {
        *error = "unknown fault '" + key + "' (drop, dup, reorder, corrupt, reset, seed)";
        return false;
      }
      *rate = std::strtod(value.c_str(), &end);
      if (!(*rate >= 0 && *rate <= 1)) {
        *error = "fault rate " + item + " outside [0, 1]";
        return false;
      }
    }
    if (value.empty() || end == nullptr || *end != '\0') {
      *error = "malformed fault setting '" + item + "'";
      return false;
    }
  }
  *out = r;
  return true;
}

}  // namespace softrdma

