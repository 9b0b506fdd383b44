// Receive matching for the native FI_EP_RDM endpoint: the receives the
// application posted against the messages that arrived, as fi_msg(3) and
// fi_tagged(3) define it.
//  - Untagged receives take untagged messages, tagged receives tagged ones.
//  - A tagged receive takes a message whose tag equals its own in every bit
//    its ignore mask leaves clear.
//  - A receive naming a source (FI_DIRECTED_RECV) takes only that source's
//    messages; FI_ADDR_UNSPEC takes any.
//  - Messages are matched in the order they arrived, receives in the order
//    they were posted. A multi-receive buffer (FI_MULTI_RECV) stays posted
//    across matches until the endpoint retires it.
//  - FI_PEEK looks without taking; FI_CLAIM reserves a message for one
//    context, and only a receive with FI_CLAIM and that context then takes
//    it; FI_DISCARD drops it.
// The matcher keeps opaque records (the endpoint's receive and message
// state) and knows nothing of buffers, data or completions.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <deque>

namespace softrdma::prov {

// What an arrived message is matched on.
struct MsgKey {
  fi_addr_t src = FI_ADDR_NOTAVAIL;  // FI_ADDR_NOTAVAIL: a sender not in the AV
  bool tagged = false;
  uint64_t tag = 0;
};

// What a posted receive (or a peek) accepts.
struct RecvSpec {
  fi_addr_t src = FI_ADDR_UNSPEC;  // FI_ADDR_UNSPEC: any source
  bool tagged = false;
  uint64_t tag = 0;
  uint64_t ignore = 0;
  bool accepts(const MsgKey& m) const {
    return m.tagged == tagged && (src == FI_ADDR_UNSPEC || src == m.src) &&
           (!tagged || ((m.tag ^ tag) & ~ignore) == 0);
  }
};

class RdmMatcher {
 public:
  // A message arrived: the first posted receive that accepts it, or null.
  // A matched receive leaves the queue unless it is a multi-receive buffer.
  void* take_recv(const MsgKey& key);
  // A message no receive took waits, in arrival order.
  void queue_message(const MsgKey& key, void* msg);
  // A receive is posted: the first waiting message it accepts that no
  // context claimed, taken off the queue; or null.
  void* take_message(const RecvSpec& spec);
  // A receive no message took waits, in posting order.
  void queue_recv(const RecvSpec& spec, void* recv, bool multi);
  // fi_cancel, or a multi-receive buffer retired: false if it was not posted.
  bool remove_recv(const void* recv);
  // fi_cancel by context: the first posted receive pred(recv) accepts, taken
  // off the queue; or null.
  template <typename Pred>
  void* remove_recv_if(Pred pred) {
    for (auto it = recvs_.begin(); it != recvs_.end(); ++it) {
      if (!pred(it->recv)) continue;
      void* recv = it->recv;
      recvs_.erase(it);
      return recv;
    }
    return nullptr;
  }

  // FI_PEEK: the first waiting unclaimed message spec accepts, left in
  // place (*key says what it is); null: none (FI_ENOMSG).
  void* peek(const RecvSpec& spec, MsgKey* key) const;
  // FI_PEEK | FI_CLAIM: reserves a message peek returned for context.
  void claim(void* msg, const void* context);
  // A receive with FI_CLAIM: the message reserved for context, taken off
  // the queue; null if none is.
  void* take_claimed(const void* context);
  // FI_PEEK | FI_DISCARD: takes a message peek returned off the queue.
  void remove_message(const void* msg);

  // Waiting messages from a sender that was not in the AV: src(msg) says
  // who it is now (FI_ADDR_NOTAVAIL: still nobody).
  template <typename F>
  void resolve_unknown(F src) {
    for (Waiting& w : msgs_)
      if (w.key.src == FI_ADDR_NOTAVAIL) w.key.src = src(w.msg);
  }

  // Every waiting message, claimed or not, taken off the queue in turn.
  template <typename F>
  void drain_messages(F f) {
    while (!msgs_.empty()) {
      void* m = msgs_.front().msg;
      msgs_.pop_front();
      f(m);
    }
  }

  size_t recvs_posted() const { return recvs_.size(); }
  size_t messages_waiting() const { return msgs_.size(); }

 private:
  struct Posted {
    RecvSpec spec;
    void* recv;
    bool multi;
  };
  struct Waiting {
    MsgKey key;
    void* msg;
    bool claimed;
    const void* claimed_by;  // the context of the FI_CLAIM peek
  };
  std::deque<Waiting>::const_iterator first_unclaimed(const RecvSpec& spec) const;
  std::deque<Posted> recvs_;
  std::deque<Waiting> msgs_;
};

}  // namespace softrdma::prov
