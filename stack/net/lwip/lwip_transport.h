// lwIP (raw API) as the byte-stream transport, over FrameLinks (DPDK ports
// in the product, in-process pipes in tests).
//
// lwIP keeps all its state in globals, so there is one stack per process:
// LwipStack owns the links, the route table and lwIP itself, and every
// Transport made by make_lwip_transport() is a view of it that owns its own
// listeners and connections. Any transport's poll() runs the shared stack
// (receives on every link, runs lwIP's timers), but the events of a
// connection are delivered only by its owner's poll(). The process lock
// (stack/common/big_lock.h) guards lwIP and every engine alike, so engines on
// different threads may poll their transports concurrently, and received
// bytes go straight to the owner's receive entry (on_data, set_receiver)
// from whichever pass took the frames in.
//
// Semantics match kernel_tcp.cc (see its header comment) with these
// differences, all inherent to a userspace stack:
//  - Nothing happens between polls: a peer's RST is seen by the next poll of
//    any transport, not by tx_send.
//  - rx_peek lends one view per received segment (the frame buffers
//    themselves); max_segment() is the connection's MSS.
//  - tx_space() is at most kLwipMaxTxSpace: bytes beyond the peer's window
//    wait in lwIP's unsent queue, whose length every send pays for. If the
//    shared segment pools run dry mid-send, the tail is parked in the
//    connection and pushed by later polls, so tx_send never fails midway.
//  - release() without close() shuts the stream gracefully, like close(2) on
//    a socket: unconsumed received bytes are discarded first.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "stack/net/frame_link.h"
#include "stack/net/transport.h"

namespace softrdma::net {

// Upper bound of StreamConn::tx_space(): bytes queued beyond what the
// peer's window lets onto the wire (the window itself comes on top).
inline constexpr size_t kLwipMaxTxSpace = size_t{256} << 10;

// Who computes IPv4/TCP checksums on a link.
enum class LinkChecksums : uint8_t {
  kAuto,  // kNone when the link reports trusted_checksums(), else kFull
  kFull,  // generate on transmit, verify on receive
  kNone,  // neither: for links whose far end is another SoftRDMA stack (memif)
  kTcpByLink,  // IP and ICMP as kFull; the link takes TCP's both ways (offloads)
};

struct LwipLinkOptions {
  LinkChecksums checksums = LinkChecksums::kAuto;
  // Make this link lwIP's default interface: destinations that neither the
  // route table nor a link's subnet covers go here (to its gateway).
  bool default_link = false;
};

struct LwipCounters {
  uint64_t rx_frames = 0, rx_bytes = 0;  // frames handed to lwIP
  uint64_t tx_frames = 0, tx_bytes = 0;  // frames committed to links
  uint64_t tx_lent = 0;                  // of those, lent to the port without a copy
  uint64_t rx_input_errors = 0;          // frames lwIP's input refused
  uint64_t tx_no_buffer = 0;  // link had no TX buffer: lwIP keeps the segment and retries
  uint64_t tcp_retransmits = 0, tcp_retransmit_bytes = 0;  // data segments sent again
  uint64_t tx_parked = 0;       // sends whose tail waited for lwIP's pools
  uint64_t conns_opened = 0;    // connects completed plus connections accepted
  uint64_t conns_failed = 0;    // resets, timeouts, refused connects
  uint64_t rx_frames_held = 0;  // receive frames pinned now (unconsumed or out of order)
  uint64_t links = 0, routes = 0;
  uint64_t port_rx_dropped = 0, port_tx_dropped = 0;  // the live links' ports (LinkCounters)
};

// The process-wide stack. All methods are thread-safe.
class LwipStack {
 public:
  static LwipStack& get();

  // Adds a link with its IPv4 address (network byte order, like sockaddr_in),
  // netmask and gateway (0.0.0.0: none). Returns a link id >= 0 or -errno
  // (-EINVAL, -EADDRINUSE for an address another link has, -ENOMEM).
  int add_link(std::unique_ptr<FrameLink> link, in_addr ip, in_addr netmask, in_addr gateway,
               const LwipLinkOptions& options = {});
  // Takes the link down now: connections bound to its address are reset
  // (on_closed -ENETDOWN) and its routes are dropped. The FrameLink object is
  // destroyed once every frame it lent out has come back. 0 or -ENOENT.
  int remove_link(int link_id);
  // Resets every connection to peer (remote address, network byte order) as
  // if the peer had sent a RST: on_closed -ECONNRESET, or -ECONNREFUSED for
  // one still connecting, as the kernel reports a dead local process's
  // sockets. For a peer known to be gone. Returns how many.
  int reset_connections_to(in_addr peer);
  // Whether a connection (TIME-WAIT included) or listener still uses the
  // local TCP port (host byte order): the host path holds it till then.
  bool local_port_in_use(uint16_t port) const;

  // Sends traffic for dest/prefix_len out of link_id, to the neighbour via
  // (0.0.0.0: dest itself is on the link, as on a point-to-point link).
  // Routes are consulted before lwIP's subnet match, longest prefix first;
  // a destination that is a local address is still delivered locally when
  // the sender is that same address or unbound. Replaces an equal route.
  int add_route(in_addr dest, int prefix_len, int link_id, in_addr via = in_addr{});
  int remove_route(in_addr dest, int prefix_len);
  // A static ARP entry: dest's MAC on the link its route names (add the
  // route first). For point-to-point links whose far end answers no ARP for
  // dest. 0 or -errno.
  int add_neighbor(in_addr dest, const uint8_t mac[6]);

  // Brings lwIP's view of every link's state up to date now (poll does it
  // too): after a link came up, before connecting over it.
  void sync_link_states();

  LwipCounters counters() const;
  // The port's own counters (LinkCounters) of a link. 0 or -ENOENT.
  int link_counters(int link_id, LinkCounters* out) const;

 private:
  LwipStack() = default;
};

struct LwipTransportOptions {
  // Source address of this transport's outgoing connections (network byte
  // order); 0.0.0.0 lets lwIP use the address of the link the route picks.
  // An engine that represents one link's address sets it.
  in_addr source{};
};

// Never returns nullptr except when out of memory or descriptors.
std::unique_ptr<Transport> make_lwip_transport(const LwipTransportOptions& options = {});

}  // namespace softrdma::net
