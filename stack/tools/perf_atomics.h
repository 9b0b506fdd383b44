// The operand sequence of an srdma_perf atomics run. Both sides derive it
// from (size, base), so the client checks every value returned and the
// server the final word.
#pragma once

#include <cstdint>

#include "stack/tools/rdma_ops.h"
#include "stack/tools/tool_common.h"

namespace softrdma::perf {

class AtomicSeq {
 public:
  struct Step {
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    uint64_t expect = 0;  // the original value the operation must return
  };

  AtomicSeq() = default;
  AtomicSeq(tools::Op op, uint64_t size, uint64_t base)
      : op_(op), value_(tools::mix64(tools::mix64(size) ^ base ^ 0xA7011C5ull)) {}

  uint64_t value() const { return value_; }
  Step next() {
    Step s;
    s.expect = value_;
    if (op_ == tools::Op::kFetchAdd) {
      s.compare_add = tools::mix64(k_++) | 1;
      value_ += s.compare_add;
    } else {
      s.compare_add = value_;
      s.swap = tools::mix64(value_);
      value_ = s.swap;
    }
    return s;
  }

 private:
  tools::Op op_ = tools::Op::kFetchAdd;
  uint64_t value_ = 0;
  uint64_t k_ = 0;
};

}  // namespace softrdma::perf
