// The six operations the tools exercise, and their names on the command line
// and in output.
#pragma once

#include <cstdint>
#include <string_view>

namespace softrdma::tools {

enum class Op : uint8_t { kSend, kWrite, kRead, kWriteImm, kFetchAdd, kCmpSwap };
inline constexpr uint8_t kOpCount = 6;
inline constexpr const char* kOpNames[kOpCount] = {"send",      "write", "read",
                                                   "write_imm", "fadd",  "cas"};

inline const char* op_name(Op op) {
  const auto i = static_cast<uint8_t>(op);
  return i < kOpCount ? kOpNames[i] : "?";
}

inline bool parse_op(std::string_view s, Op* out) {
  for (uint8_t i = 0; i < kOpCount; ++i) {
    if (s == kOpNames[i]) {
      *out = static_cast<Op>(i);
      return true;
    }
  }
  return false;
}

inline bool is_atomic(Op op) { return op == Op::kFetchAdd || op == Op::kCmpSwap; }
// Every message of these consumes a receive the responder posted.
inline bool uses_recv(Op op) { return op == Op::kSend || op == Op::kWriteImm; }

}  // namespace softrdma::tools
