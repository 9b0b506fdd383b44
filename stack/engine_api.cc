// Engine calls for the libfabric provider: what it needs of CQs and QPs
// without reaching into them.
#include "stack/engine.h"

namespace softrdma {

void Engine::arm_cq(Cq* cq, int efd) { cq->arm_notify(efd); }

bool Engine::qp_addresses(Qp* qp, sockaddr_in* local, sockaddr_in* peer) {
  ApiLock g(this);  // the engine's thread may detach the stream meanwhile
  const net::StreamConn* conn = qp->conn();
  if (!conn) return false;
  *local = conn->local_addr();
  *peer = conn->peer_addr();
  return true;
}

}  // namespace softrdma
