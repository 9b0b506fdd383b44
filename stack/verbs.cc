// to_string() for the verbs enums (verbs.h) that log lines and test
// messages print.
#include "stack/verbs.h"

namespace softrdma {

const char* to_string(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend: return "send";
    case WrOpcode::kSendWithInv: return "send_inv";
    case WrOpcode::kWrite: return "write";
    case WrOpcode::kWriteWithImm: return "write_imm";
    case WrOpcode::kImmData: return "imm_data";
    case WrOpcode::kRead: return "read";
    case WrOpcode::kAtomicFetchAdd: return "fetch_add";
    case WrOpcode::kAtomicCmpSwap: return "cmp_swap";
    case WrOpcode::kAtomicSwap: return "swap";
  }
  return "?";
}

const char* to_string(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess: return "success";
    case WcStatus::kLocLenErr: return "local length error";
    case WcStatus::kLocQpOpErr: return "local QP operation error";
    case WcStatus::kLocProtErr: return "local protection error";
    case WcStatus::kWrFlushErr: return "flushed";
    case WcStatus::kRemAccessErr: return "remote access error";
    case WcStatus::kRemOpErr: return "remote operation error";
    case WcStatus::kRemInvReqErr: return "remote invalid request";
    case WcStatus::kBadRespErr: return "bad response";
    case WcStatus::kFatalErr: return "fatal (stream lost)";
  }
  return "?";
}

const char* to_string(WcOpcode op) {
  switch (op) {
    case WcOpcode::kSend: return "send";
    case WcOpcode::kWrite: return "write";
    case WcOpcode::kRead: return "read";
    case WcOpcode::kFetchAdd: return "fetch_add";
    case WcOpcode::kCmpSwap: return "cmp_swap";
    case WcOpcode::kSwap: return "swap";
    case WcOpcode::kImmData: return "imm_data";
    case WcOpcode::kRecv: return "recv";
    case WcOpcode::kRecvRdmaImm: return "recv_rdma_imm";
  }
  return "?";
}

const char* to_string(QpState s) {
  switch (s) {
    case QpState::kIdle: return "idle";
    case QpState::kRts: return "rts";
    case QpState::kClosing: return "closing";
    case QpState::kTerminate: return "terminate";
    case QpState::kError: return "error";
  }
  return "?";
}

}  // namespace softrdma
