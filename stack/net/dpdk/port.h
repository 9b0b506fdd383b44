// A DPDK ethdev as a FrameLink: memif, af_packet, af_xdp or a PCI NIC,
// hot-plugged on demand after EAL init and removed again when closed.
//
// Public API free of DPDK headers (they cannot meet lwIP's in one
// translation unit, and they bring -march flags of their own).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stack/net/frame_link.h"

namespace softrdma::net {

struct PortOptions {
  // rte_dev_probe() device string, e.g.
  //   "net_memif0,role=server,socket=/run/softrdma/x.sock,id=0"
  //   "net_af_packet0,iface=veth0"  "net_af_xdp0,iface=veth0"  "0000:3b:00.0"
  // vdev names (before the first comma) must be unique within the process.
  // memif: socket= is an abstract socket name by default (socket-abstract=
  // yes; per network namespace, nothing on disk, and any local user can
  // connect to it); with socket-abstract=no it is a file path (at most 107
  // octets; access as its directory allows). In one process open the
  // server before a client of the same socket: they share the socket object
  // and a client-first one never listens. A server socket serves several
  // servers with distinct id=; it stops listening when the process's last
  // device on it closes, and can then be used again. bsize is set to fit
  // mtu (memif in 22.11 corrupts frames chained over descriptors). A client
  // sends at once, but a server's frames need the client to have polled rx
  // once (the client's rx_burst hands the server its buffers). memif control
  // calls run on EAL's interrupt thread (memif_quirks.cc: the 22.11 races).
  std::string devargs;
  uint32_t mtu = 1500;  // IP MTU; frames up to mtu + 14 (+ 4 with a VLAN tag)
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
  uint16_t burst = 32;  // frames per rte_eth_rx_burst / rte_eth_tx_burst
  // Ask for an rx interrupt fd (rx_wait_fd); stays -1 where the PMD has no
  // rx interrupts (memif, af_packet and af_xdp in DPDK 22.11 have none).
  bool interrupt_mode = false;
  // Network namespace (a name under /run/netns, or a path) the device is
  // probed, started and stopped in: af_packet/af_xdp bind to its interfaces.
  std::string netns;
  // memif client: start is retried until the server's socket accepts.
  int start_timeout_ms = 2000;
  // How long tx_flush keeps retrying a full ring before leaving the rest
  // queued for the next flush (rx_burst flushes too).
  uint32_t tx_retry_us = 100;
  // The one mbuf pool of the process is created by the first open, sized by
  // that open's options; later opens need mtu + 18 <= its data room, so a
  // process mixing MTUs sets pool_data_room (9216 for MTU 9000) on the first.
  // 16384 jumbo mbufs take ~160 MB of EalOptions::memory_mb. The
  // environment's FI_SOFTRDMA_MBUFS=n (n >= 64) overrides it (tests drive
  // the pool dry with it: stack/tests/limits_test.cc).
  uint32_t pool_mbufs = 16384;
  uint32_t pool_data_room = 0;  // octets after headroom; 0: fits mtu
};

struct DpdkPortCounters {
  LinkCounters link;
  uint64_t rx_linearized = 0;    // multi-segment frames copied into one mbuf
  uint64_t rx_oversize = 0;      // dropped: chained frame would not fit one
  uint64_t rx_bad_checksum = 0;  // dropped: NIC flagged a bad checksum
  uint64_t tx_retries = 0;       // full-ring retries and refused tx_begins
  uint64_t hw_missed = 0, hw_rx_errors = 0, hw_tx_errors = 0, hw_rx_nombuf = 0;
};

// What open_dpdk_port returns; dynamic_cast for the DPDK-specific parts.
class DpdkPort : public FrameLink {
 public:
  virtual uint16_t port_id() const = 0;
  virtual const std::string& driver() const = 0;  // e.g. "net_memif"
  virtual DpdkPortCounters dpdk_counters() const = 0;
};

// Starts the EAL with default options if nobody did, probes the device,
// configures one rx and one tx queue and starts it. It does not wait for
// link-up (a memif server is up once a client connects). Null on failure,
// with the reason in *error if given (else printed to stderr).
//
// The link: tx_begin refuses (null, tx_dropped) frames over mtu + 18 (a
// VLAN tag allowed) or when the pool is empty, and (null, tx_retries) while
// 512 committed frames wait for a full ring: back-pressure, not loss.
// tx_commit queues and pushes a full burst; tx_flush retries a full ring for
// tx_retry_us and keeps what it refused, in order, for later flushes.
// rx_burst hands out single-segment frames: chains are made contiguous (in
// place or by copy, rx_linearized) or dropped if longer than the pool's
// data room (rx_oversize). Lent frames stay valid after the link closes.
// Not thread-safe: one thread drives a link (counters() may be read from any).
std::unique_ptr<FrameLink> open_dpdk_port(const PortOptions& options,
                                          std::string* error = nullptr);

// Starts the EAL and creates the process's mbuf pool for ports like o now,
// so that the first open_dpdk_port does not pay for them (hundreds of ms, and
// seconds on a loaded host, while a peer waits for the link). Idempotent.
bool dpdk_prepare(const PortOptions& o, std::string* error);

struct MbufPoolInfo {
  uint32_t size = 0, available = 0, data_room = 0, priv_size = 0;
};
// The process's pools together (zeros before the first open; af_xdp ports
// have a pool of their own, port.cc); available counts mbufs free in them.
MbufPoolInfo dpdk_mbuf_pool_info();

}  // namespace softrdma::net
