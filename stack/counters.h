/* What the engine counts, for its users: Engine::counters() returns one
 * snapshot, and the provider hands out the same struct through fi_open_ops
 * (prov/fi_ext_softrdma.h) and prints it for FI_SOFTRDMA_STATS. Plain C, so
 * that it is also the provider extension's public ABI (installed as
 * <softrdma/counters.h>); fields are only ever appended. docs/counters.md
 * says what each field means and where it is counted. */
#ifndef SOFTRDMA_COUNTERS_H
#define SOFTRDMA_COUNTERS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every field is a uint64_t; the list is kept once, here, so that the
 * struct and its printed form (softrdma_counters_format) cannot disagree. */
#define SOFTRDMA_COUNTERS_FIELDS(X)                                          \
  /* --- Cumulative: since the process began (link, TCP, faults) or since  \
   * the engine (the libfabric fabric) was opened (iWARP). */              \
  /* Link layer: Ethernet frames moved by the DPDK ports, all links of the \
   * process (0 over kernel TCP: the kernel counts those packets); of the \
   * transmitted, those lent to the port, not copied by the stack. */      \
  X(rx_packets) X(rx_bytes) X(tx_packets) X(tx_bytes) X(tx_lent)           \
  /* Frames lost at the ports of the links up now: receive ring or mbuf   \
   * pool full (DPDK imissed + rx_nombuf), no transmit room. */            \
  X(rx_dropped) X(tx_dropped)                                              \
  /* Received frames the stack refused: bad checksum, malformed. */        \
  X(rx_errors)                                                             \
  /* Faults injected on purpose (FI_SOFTRDMA_FAULTS), apart from drops. */ \
  X(faults_dropped) X(faults_duplicated) X(faults_reordered)               \
  X(faults_corrupted) X(faults_reset)                                      \
  /* TCP: data segments sent again and their bytes (0 over kernel TCP). */ \
  X(tcp_retransmits) X(tcp_retransmit_bytes)                               \
  /* iWARP: FPDUs, ULP payload, payload copied on receive (one copy:      \
   * payload_rx, plus unexpected_bytes copied again once a receive is     \
   * posted for them), MPA markers, CRC failures, Terminates. */          \
  X(fpdus_tx) X(fpdus_rx) X(payload_tx) X(payload_rx) X(rx_copy_bytes)    \
  X(markers_tx) X(markers_rx) X(crc_errors)                                \
  X(terminates_tx) X(terminates_rx)                                        \
  /* --- In use now: QPs, CQs, MRs; connections being set up or           \
   * established; received frames not yet consumed; the process's DPDK    \
   * mbuf pool. */                                                         \
  X(qps) X(cqs) X(mrs) X(connections) X(rx_frames_held)                    \
  X(mbufs_total) X(mbufs_in_use)                                          \
  /* --- Cumulative, iWARP: Sends that found no posted receive and were    \
   * held for one (FI_SOFTRDMA_UNEXPECTED_BYTES / _MSGS), their payload,   \
   * the most bytes one QP held at once, and the Sends beyond that bound   \
   * (each answered with a Terminate). */                                  \
  X(unexpected_msgs) X(unexpected_bytes) X(unexpected_bytes_hwm)           \
  X(unexpected_overruns)                                                   \
  /* --- Cumulative, RDMAP: the messages this process's work requests     \
   * put on the wire, by kind (one however many FPDUs it takes): Sends,   \
   * RDMA Writes, Read Requests, Atomic Requests (RFC 7306). */            \
  X(sends_tx) X(writes_tx) X(read_requests_tx) X(atomic_requests_tx)

struct softrdma_counters {
#define SOFTRDMA_COUNTER_FIELD(name) uint64_t name;
  SOFTRDMA_COUNTERS_FIELDS(SOFTRDMA_COUNTER_FIELD)
#undef SOFTRDMA_COUNTER_FIELD
};

#ifdef __cplusplus
}
#include <string>
namespace softrdma {
using Counters = softrdma_counters;  // value-initialise: Counters c{};
// "name=value name=value ..." in field order (FI_SOFTRDMA_STATS, tools).
std::string format_counters(const Counters& c);
}
#endif

#endif
