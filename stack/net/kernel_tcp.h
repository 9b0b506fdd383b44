// Kernel TCP sockets as the byte-stream transport (see transport.h).
//
// Sizing knobs for the kernel transport. make_kernel_tcp_transport() in
// transport.h uses the defaults; tests and tools may shrink the buffers to
// reach the full-buffer and backlog paths quickly.
#pragma once

#include <cstddef>
#include <memory>

#include "stack/net/transport.h"

namespace softrdma::net {

inline constexpr size_t kKernelTcpMinRxBuffer = size_t{128} << 10;
inline constexpr size_t kKernelTcpMinTxBacklog = size_t{64} << 10;

struct KernelTcpOptions {
  // Per-connection linear receive buffer that rx_peek lends views of.
  // Raised to kKernelTcpMinRxBuffer if smaller, so a whole FPDU always fits.
  size_t rx_buffer_bytes = size_t{1} << 20;
  // Per-connection transmit backlog for bytes the kernel did not take yet;
  // tx_space() is what is left of it. Raised to kKernelTcpMinTxBacklog if
  // smaller, so the largest FPDU (64 KiB) always fits.
  size_t tx_backlog_bytes = size_t{4} << 20;
};

// Returns nullptr if the epoll set or the wake eventfd cannot be created
// (out of descriptors or memory); so does the option-less overload.
std::unique_ptr<Transport> make_kernel_tcp_transport(const KernelTcpOptions& options);

}  // namespace softrdma::net
