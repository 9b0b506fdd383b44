// Untagged Sends that arrived before a receive was posted for them: held,
// in MSN order, until post_recv (or the SRQ's) gives each its receive.
// RFC 5041 would have such a Send end the stream; libfabric's FI_EP_MSG
// applications expect the message kept, as the tcp provider keeps it.
//
// Bounded per QP in bytes and in messages (FI_SOFTRDMA_UNEXPECTED_BYTES,
// _MSGS); a peer that overruns the bound gets the RFC's Terminate. The
// payload lives in one circular byte buffer and the messages in a Ring,
// both grown only to their high-water mark: nothing is allocated per
// message.
#pragma once

#include <cstdint>
#include <memory>

#include "stack/common/ring.h"
#include "stack/verbs.h"

namespace softrdma::iwarp {

class UnexpectedStore {
 public:
  // What the message's completion needs, applied when it completes.
  struct Msg {
    uint64_t len = 0;
    bool complete = false;  // its last segment is in
    bool imm = false;       // Immediate Data (RFC 7306): no payload
    bool solicited = false;
    uint64_t imm_data = 0;
    uint32_t inv_stag = 0;  // Send with Invalidate: the STag to invalidate
  };

  void set_bounds(uint64_t max_bytes, uint32_t max_msgs) {
    max_bytes_ = max_bytes;
    max_msgs_ = max_msgs;
  }
  bool empty() const { return msgs_.empty(); }
  // A new message fits the count bound; room(n): n more payload bytes fit.
  bool can_start() const { return msgs_.size() < max_msgs_; }
  bool room(uint64_t n) const { return used_ + n <= max_bytes_; }
  uint64_t used() const { return used_; }

  // Opens a message at the back (the caller checked can_start); its
  // completion details are set with back() once its last segment is in.
  void start() { msgs_.push_back(Msg{}); }
  // Appends to the open message (the caller checked room).
  void put(const uint8_t* p, size_t n);
  Msg& back() { return msgs_[msgs_.size() - 1]; }

  // The oldest message, if its last segment is in.
  const Msg* ready() const {
    return !msgs_.empty() && msgs_.front().complete ? &msgs_.front() : nullptr;
  }
  // Copies the oldest message into sg (which holds it: the caller checked)
  // and drops it.
  void take(const Sge* sg, int nsge);
  void clear();

 private:
  void grow(uint64_t need);

  uint64_t max_bytes_ = 0;
  uint32_t max_msgs_ = 0;
  Ring<Msg> msgs_;
  std::unique_ptr<uint8_t[]> buf_;
  uint64_t cap_ = 0, head_ = 0, used_ = 0;  // a power of two; head_ < cap_
};

}  // namespace softrdma::iwarp
