// A FrameLink decorator that damages traffic on purpose, for fault tests on
// the kernel-bypass path: frames dropped and corrupted on receive,
// duplicated and reordered (held behind the next frame of its burst) on
// transmit, each at its own rate; and connections reset: a received TCP
// segment turned into a RST (same sequence number, no payload, checksums
// recomputed), as a peer or middlebox that resets the connection would send.
//
//   FI_SOFTRDMA_FAULTS="drop=0.02,dup=0.02,reorder=0.02,corrupt=0.01,seed=7"
//   FI_SOFTRDMA_FAULTS="reset=0.001"
//
// A corrupting link stops vouching for checksums (trusted_checksums() is
// false), so the stack verifies them as it would on a real wire. What was
// injected is counted, and printed to stderr when the link closes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stack/common/fault_rates.h"
#include "stack/net/frame_link.h"

namespace softrdma::net {

struct FaultCounters {
  uint64_t dropped = 0, duplicated = 0, reordered = 0, corrupted = 0, reset = 0;
  FaultCounters& operator+=(const FaultCounters& o) {
    dropped += o.dropped;
    duplicated += o.duplicated;
    reordered += o.reordered;
    corrupted += o.corrupted;
    reset += o.reset;
    return *this;
  }
};

std::unique_ptr<FrameLink> with_faults(std::unique_ptr<FrameLink> inner, const FaultRates& rates);

// with_faults(inner, $FI_SOFTRDMA_FAULTS) when that variable is set, else
// inner. A malformed setting is reported on stderr and leaves inner as is
// (the engine has refused it already: settings::check_env).
std::unique_ptr<FrameLink> with_faults_from_env(std::unique_ptr<FrameLink> inner);

// Every port's optional decorators from the environment: faults nearest the
// wire, so that a capture (FI_SOFTRDMA_PCAP) shows what the stack received.
std::unique_ptr<FrameLink> with_env_decorators(std::unique_ptr<FrameLink> port);

// What a link made by with_faults injected so far; zeros for other links.
FaultCounters fault_counters(const FrameLink& link);
// Everything injected in this process so far, links gone included.
FaultCounters fault_totals();

}  // namespace softrdma::net
