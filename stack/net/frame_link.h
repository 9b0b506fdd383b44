// An Ethernet frame port, as the userspace TCP/IP stack sees it: a DPDK
// ethdev (memif, af_packet, af_xdp, a PCI NIC) or an in-process test pipe.
//
// This header includes neither DPDK nor lwIP: their headers cannot share a
// translation unit (both define struct ip6_hdr), so the DPDK side implements
// FrameLink in its own files and the lwIP side consumes it here.
//
// Receive is zero-copy: rx_burst lends frames that stay in the port's own
// buffers (mbufs) until rx_release; each frame comes with a private scratch
// area inside its buffer where the stack keeps its descriptor (lwIP's
// pbuf_custom), so wrapping a frame allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace softrdma::net {

struct RxFrame {
  void* handle;          // the port's buffer (an rte_mbuf*)
  const uint8_t* data;   // first octet of the Ethernet header
  uint32_t len;          // frame length (contiguous: ports hand out one segment)
  void* priv;            // scratch inside the buffer, kFramePrivSize octets
};

inline constexpr size_t kFramePrivSize = 64;

struct LinkCounters {
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  uint64_t rx_dropped = 0, tx_dropped = 0;  // port/ring full, no buffer
};

class FrameLink {
 public:
  virtual ~FrameLink() = default;

  // Up to max received frames; each must be given back with rx_release.
  virtual int rx_burst(RxFrame* out, int max) = 0;
  virtual void rx_release(void* handle) = 0;

  // Transmit: a buffer of at least len octets to fill, then commit the frame
  // (queued; tx_flush pushes the burst). Null when no buffer is free.
  virtual uint8_t* tx_begin(uint32_t len, void** handle) = 0;
  virtual void tx_commit(void* handle, uint32_t len) = 0;
  virtual void tx_flush() = 0;
  // Transmit without copying: the frame stays in the caller's memory, which
  // must stay valid and unchanged until the port calls done(frame, ctx) (from
  // inside a later tx call, rx_burst's flush, or the port's destruction).
  // Only ports whose driver copies frames out in software when it takes them
  // (memif, af_packet) lend; a NIC would need the memory's DMA address.
  // Returns 1 when queued, 0 when this port does not lend (use tx_begin),
  // -ENOBUFS when no descriptor is free now (back-pressure, as tx_begin's null).
  using TxDone = void (*)(void* frame, void* ctx);
  virtual int tx_lend(const uint8_t* /*frame*/, uint32_t /*len*/, TxDone /*done*/, void* /*ctx*/) {
    return 0;
  }
  // tx_lend with the first head_len octets sent from head instead of the
  // frame's own (both lent until done): a switch sends a rank's frame from
  // the rank's memory with headers it checked in a private copy, which the
  // rank cannot change after the check. 0 when this port does not lend.
  virtual int tx_lend_headed(const uint8_t* /*head*/, uint32_t /*head_len*/,
                             const uint8_t* /*frame*/, uint32_t /*len*/, TxDone /*done*/,
                             void* /*ctx*/) {
    return 0;
  }
  // Drops the frames still queued (the link is being removed), so that no
  // lent frame outlives the link in the stack. Ports that lend override it.
  virtual void tx_discard() {}

  virtual const uint8_t* mac() const = 0;  // 6 octets
  virtual uint32_t mtu() const = 0;        // IP MTU (frame = mtu + 14)
  virtual bool link_up() const = 0;
  // True when frames cannot be corrupted between the two stacks (memif,
  // shared memory) or the NIC checks checksums: the stack may skip them.
  virtual bool trusted_checksums() const = 0;
  // True when the link loses no frame between the two stacks (shared memory
  // that pushes back when full): a retransmission timeout there is spurious
  // unless the peer stopped, so TCP may wait longer before it resends.
  virtual bool lossless() const { return false; }
  // An fd that polls readable when frames arrive (interrupt mode), or -1.
  virtual int rx_wait_fd() { return -1; }
  virtual void rx_wait_arm() {}
  virtual const std::string& name() const = 0;
  virtual LinkCounters counters() const = 0;
};

// Passes every call to another link: decorators (capture, fault injection)
// derive from it and override only what they change. Lent frames pass only
// where the derived link asks (lend_through): one that reads or alters
// frames after tx_begin must see copies.
class ForwardingLink : public FrameLink {
 public:
  explicit ForwardingLink(FrameLink* inner, bool lend_through = false)
      : inner_(inner), lend_through_(lend_through) {}
  int rx_burst(RxFrame* out, int max) override { return inner_->rx_burst(out, max); }
  void rx_release(void* handle) override { inner_->rx_release(handle); }
  uint8_t* tx_begin(uint32_t len, void** handle) override { return inner_->tx_begin(len, handle); }
  void tx_commit(void* handle, uint32_t len) override { inner_->tx_commit(handle, len); }
  void tx_flush() override { inner_->tx_flush(); }
  int tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) override {
    return lend_through_ ? inner_->tx_lend(frame, len, done, ctx) : 0;
  }
  int tx_lend_headed(const uint8_t* head, uint32_t head_len, const uint8_t* frame, uint32_t len,
                     TxDone done, void* ctx) override {
    return lend_through_ ? inner_->tx_lend_headed(head, head_len, frame, len, done, ctx) : 0;
  }
  void tx_discard() override { inner_->tx_discard(); }
  const uint8_t* mac() const override { return inner_->mac(); }
  uint32_t mtu() const override { return inner_->mtu(); }
  bool link_up() const override { return inner_->link_up(); }
  bool trusted_checksums() const override { return inner_->trusted_checksums(); }
  bool lossless() const override { return inner_->lossless(); }
  int rx_wait_fd() override { return inner_->rx_wait_fd(); }
  void rx_wait_arm() override { inner_->rx_wait_arm(); }
  const std::string& name() const override { return inner_->name(); }
  LinkCounters counters() const override { return inner_->counters(); }

 protected:
  FrameLink* const inner_;

 private:
  const bool lend_through_;
};

}  // namespace softrdma::net
