// The QP states' legal transitions: the iWARP verbs QP state diagram (RDMAC
// verbs, Idle / RTS / Closing / Terminate / Error) as RFC 5040 §6 (an RDMAP
// stream starts on an LLP stream in RDMA mode) and §8 (Terminate, then the
// stream ends) shape it. Qp::set_state refuses anything not listed here.
//
// A subset of the verbs diagram, the part this stack uses: a QP serves one
// connection, so Error is final (no Error → Idle reuse) and an orderly close
// flushes to Error rather than back to Idle. There is no RTR state: a
// responder waiting for the peer's MPA RTR (RFC 6581 §5) is in RTS and
// sends nothing until it arrives.
#pragma once

#include "stack/verbs.h"

namespace softrdma::iwarp {

inline constexpr int kQpStateCount = static_cast<int>(QpState::kError) + 1;

struct QpTransition {
  QpState from, to;
};

inline constexpr QpTransition kQpTransitions[] = {
    {QpState::kIdle, QpState::kRts},         // start: the stream is in RDMA mode
    {QpState::kIdle, QpState::kError},       // to_error or close before a connection
    {QpState::kRts, QpState::kClosing},      // close: orderly, by us
    {QpState::kRts, QpState::kTerminate},    // we found an error: Terminate goes out
    {QpState::kRts, QpState::kError},        // Terminate received, stream lost, local error
    {QpState::kClosing, QpState::kError},    // close: work flushed, stream closing
    {QpState::kTerminate, QpState::kError},  // our Terminate is out, or the stream ended
};

constexpr bool qp_transition_legal(QpState from, QpState to) {
  for (const QpTransition& t : kQpTransitions)
    if (t.from == from && t.to == to) return true;
  return false;
}

}  // namespace softrdma::iwarp
