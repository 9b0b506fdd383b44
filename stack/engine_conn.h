// A transport stream on its way to RDMA mode: the MPA exchange's state.
// Internal to the engine (engine.cc, engine_cm.cc); the API names it ConnReq.
#pragma once

#include <chrono>
#include <memory>

#include "stack/engine.h"
#include "stack/iwarp/mpa.h"

namespace softrdma {

struct ConnReq {
  enum class Stage : uint8_t {
    kConnecting,   // active: TCP connect in flight
    kAwaitRep,     // active: MPA Request sent
    kAwaitReq,     // passive: waiting for the MPA Request
    kReqReceived,  // passive: kConnectRequest delivered, app to decide
    kRdma,         // handed to the QP
    kClosing,      // rejected or failed: waiting for the stream to end
  };
  Stage stage;
  net::StreamConn* sc = nullptr;
  Qp* qp = nullptr;
  Listener* listener = nullptr;
  bool initiator = false;
  std::unique_ptr<iwarp::MpaReader> reader;
  iwarp::MpaParams sent;      // our Request (active side)
  iwarp::MpaParams received;  // the peer's Request (passive side)
  std::chrono::steady_clock::time_point deadline;
};

}  // namespace softrdma
