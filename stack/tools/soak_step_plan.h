// Which connections a soak pass steps. A step reads what the peer wrote by
// RDMA Write (credits, notices), which no completion announces, so the
// connections waiting on it are stepped now and then (a sweep), besides
// those that had a completion or an event in the pass. Sweeps are spaced by
// twice what the last one took: with a few connections that is every pass;
// with thousands, a sweep per pass would cost more than the I/O it follows,
// and the tool would measure itself.
#pragma once

#include <cstdint>
#include <vector>

#include "stack/tools/tool_common.h"

namespace softrdma::soak {

class StepPlan {
 public:
  void touch(uint32_t qp_num) { touched_.push_back(qp_num); }

  // Calls one(qp_num) for each connection touched since the last call (a
  // number may repeat), then all() if a sweep is due; true if it was.
  template <class All, class One>
  bool run(All all, One one) {
    for (uint32_t n : touched_) one(n);
    touched_.clear();
    const tools::Clock::time_point start = tools::Clock::now();
    if (start < next_sweep_) return false;
    all();
    const tools::Clock::time_point end = tools::Clock::now();
    next_sweep_ = end + 2 * (end - start);
    return true;
  }

 private:
  std::vector<uint32_t> touched_;
  tools::Clock::time_point next_sweep_{};
};

}  // namespace softrdma::soak
