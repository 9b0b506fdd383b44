// Receive matching for the native FI_EP_RDM endpoint (see rdm_match.h).
// Queues are searched front to back: the first match in arrival or posting
// order is the one fi_msg(3) and fi_tagged(3) require. They stay short in
// the common case (MPI keeps few receives posted ahead of their messages).
#include "prov/rdm_match.h"

#include <algorithm>

namespace softrdma::prov {

void* RdmMatcher::take_recv(const MsgKey& key) {
  const auto it =
      std::find_if(recvs_.begin(), recvs_.end(), [&](const Posted& p) { return p.spec.accepts(key); });
  if (it == recvs_.end()) return nullptr;
  void* recv = it->recv;
  if (!it->multi) recvs_.erase(it);
  return recv;
}

void RdmMatcher::queue_message(const MsgKey& key, void* msg) {
  msgs_.push_back(Waiting{key, msg, false, nullptr});
}

std::deque<RdmMatcher::Waiting>::const_iterator RdmMatcher::first_unclaimed(
    const RecvSpec& spec) const {
  return std::find_if(msgs_.begin(), msgs_.end(),
                      [&](const Waiting& w) { return !w.claimed && spec.accepts(w.key); });
}

void* RdmMatcher::take_message(const RecvSpec& spec) {
  const auto it = first_unclaimed(spec);
  if (it == msgs_.end()) return nullptr;
  void* msg = it->msg;
  msgs_.erase(it);
  return msg;
}

void RdmMatcher::queue_recv(const RecvSpec& spec, void* recv, bool multi) {
  recvs_.push_back(Posted{spec, recv, multi});
}

bool RdmMatcher::remove_recv(const void* recv) {
  const auto it =
      std::find_if(recvs_.begin(), recvs_.end(), [&](const Posted& p) { return p.recv == recv; });
  if (it == recvs_.end()) return false;
  recvs_.erase(it);
  return true;
}

void* RdmMatcher::peek(const RecvSpec& spec, MsgKey* key) const {
  const auto it = first_unclaimed(spec);
  if (it == msgs_.end()) return nullptr;
  if (key != nullptr) *key = it->key;
  return it->msg;
}

void RdmMatcher::claim(void* msg, const void* context) {
  for (Waiting& w : msgs_) {
    if (w.msg == msg) {
      w.claimed = true;
      w.claimed_by = context;
    }
  }
}

void* RdmMatcher::take_claimed(const void* context) {
  const auto it = std::find_if(msgs_.begin(), msgs_.end(),
                               [&](const Waiting& w) { return w.claimed && w.claimed_by == context; });
  if (it == msgs_.end()) return nullptr;
  void* msg = it->msg;
  msgs_.erase(it);
  return msg;
}

void RdmMatcher::remove_message(const void* msg) {
  std::erase_if(msgs_, [&](const Waiting& w) { return w.msg == msg; });
}

}  // namespace softrdma::prov
