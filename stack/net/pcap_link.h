// A FrameLink decorator that records every frame received and transmitted
// through it to a classic pcap file (LINKTYPE_ETHERNET, microsecond
// timestamps), for Wireshark/tshark. Used when FI_SOFTRDMA_PCAP=<file>.
//
// Records are buffered and written when the buffer fills, at least once a
// second while the link is polled, and on destruction. Transmitted frames
// are recorded at tx_commit, so frames the port later drops still appear.
#pragma once

#include <memory>
#include <string>

#include "stack/net/frame_link.h"

namespace softrdma::net {

inline constexpr uint32_t kPcapSnapLen = 65535;

// Wraps inner; if the file cannot be created, returns inner unchanged and
// reports why in *error (else on stderr).
std::unique_ptr<FrameLink> with_pcap(std::unique_ptr<FrameLink> inner, const std::string& path,
                                     std::string* error = nullptr);

// with_pcap(inner, $FI_SOFTRDMA_PCAP) when that variable is set and not
// empty, else inner. In the path "%p" becomes the process id and "%n" the
// link name, so ranks and links sharing one setting write separate files.
std::unique_ptr<FrameLink> with_pcap_from_env(std::unique_ptr<FrameLink> inner);

}  // namespace softrdma::net
