// The DPDK port's class (DpdkPortImpl), shared by port.cc (set-up and
// teardown, the control path), port_datapath.cc (rx/tx bursts) and
// memif_quirks.cc. Private to this folder; includes DPDK's headers.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "stack/net/dpdk/memif_guard.h"
#include "stack/net/dpdk/memif_quirks.h"
#include "stack/net/dpdk/port.h"

namespace softrdma::net::dpdk_port {

constexpr uint32_t kEthHeader = 14;
constexpr uint32_t kVlanTag = 4;
constexpr uint32_t kFrameSlack = 8;  // a VLAN tag and the CRC, if a PMD keeps them
constexpr uint32_t kPoolCache = 256;
constexpr uint16_t kMaxBurst = 512;

static_assert(kFramePrivSize % RTE_MBUF_PRIV_ALIGN == 0);

inline uint32_t round_up(uint32_t v, uint32_t to) { return (v + to - 1) / to * to; }

class DpdkPortImpl final : public DpdkPort {
 public:
  ~DpdkPortImpl() override { shutdown(); }

  bool open(const PortOptions& o, std::string* why);

  int rx_burst(RxFrame* out, int max) override;
  void rx_release(void* handle) override { rte_pktmbuf_free(static_cast<rte_mbuf*>(handle)); }
  uint8_t* tx_begin(uint32_t len, void** handle) override;
  void tx_commit(void* handle, uint32_t len) override;
  int tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) override;
  void tx_flush() override;
  void tx_discard() override;

  const uint8_t* mac() const override { return mac_; }
  uint32_t mtu() const override { return mtu_; }
  bool link_up() const override {
    rte_eth_link link{};
    const bool up =
        rte_eth_link_get_nowait(port_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
    if (up && memif_ && !populated_) {  // its regions are mapped once it is up
      populated_ = true;
      memif_guard::Burst b;  // touches the rings: no unmapping meanwhile
      populate_memif_regions();
    }
    return up;
  }
  bool trusted_checksums() const override { return trusted_; }
  bool lossless() const override { return lossless_; }
  int rx_wait_fd() override { return intr_fd_; }
  void rx_wait_arm() override;
  const std::string& name() const override { return name_; }
  LinkCounters counters() const override { return dpdk_counters().link; }

  uint16_t port_id() const override { return port_; }
  const std::string& driver() const override { return driver_; }
  DpdkPortCounters dpdk_counters() const override;

 private:
  bool probe(const std::string& devargs, std::string* why);
  bool configure(const PortOptions& o, std::string* why);
  void count_memif_socket(const std::string& devargs);
  bool start(const PortOptions& o, int first_rc, std::string* why);
  bool linearize(rte_mbuf** m);
  // memif bursts are marked, so that the driver's teardown on the interrupt
  // thread waits for them before unmapping the rings (memif_guard.h).
  uint16_t rx_some(uint16_t want) {
    if (!memif_) return rte_eth_rx_burst(port_, 0, rx_mbufs_.data(), want);
    memif_guard::Burst b;
    return rte_eth_rx_burst(port_, 0, rx_mbufs_.data(), want);
  }
  uint16_t tx_some(rte_mbuf** pkts, uint16_t n) {
    if (!memif_) return rte_eth_tx_burst(port_, 0, pkts, n);
    memif_guard::Burst b;
    return rte_eth_tx_burst(port_, 0, pkts, n);
  }
  bool tx_room();
  void queue_tx(rte_mbuf* m, uint32_t len);
  void shutdown();

  uint16_t port_ = RTE_MAX_ETHPORTS;
  std::string name_, driver_;
  uint8_t mac_[6] = {};
  uint32_t mtu_ = 0;
  uint32_t max_frame_ = 0;     // pool data room after headroom
  uint32_t max_tx_frame_ = 0;  // mtu + Ethernet header + a VLAN tag
  uint16_t burst_ = 32;
  bool trusted_ = false;
  bool lossless_ = false;  // memif: a full ring holds frames back (tx_flush)
  bool check_csum_ = false;  // drop frames the NIC flags as bad
  bool memif_ = false;
  bool lends_ = false;  // the driver copies frames out inside tx_burst
  mutable bool populated_ = false;  // memif: its shared regions are populated
  std::string memif_socket_;  // counted in g_memif_sockets while set
  bool held_ = false, probed_by_us_ = false, registered_ = false, started_ = false;
  rte_device* device_ = nullptr;
  rte_mempool* pool_ = nullptr;
  int netns_fd_ = -1;
  int intr_fd_ = -1;
  bool intr_armed_ = false;
  uint64_t tx_retry_cycles_ = 0;
  std::vector<rte_mbuf*> rx_mbufs_;
  // Frames committed but not yet taken by the ring (bounded: tx_begin
  // refuses beyond it); flushed again on every rx_burst, i.e. every poll.
  static constexpr size_t kMaxPending = 512;
  std::vector<rte_mbuf*> tx_pending_;
  std::vector<uint32_t> tx_pending_len_;  // their lengths: a sent mbuf is freed
  // The ring refused frames since the last rx_burst: only explicit flushes
  // try it again until then (the peer drains it while we read ours).
  bool ring_full_ = false;

  std::atomic<uint64_t> rx_packets_{0}, rx_bytes_{0}, tx_packets_{0}, tx_bytes_{0};
  std::atomic<uint64_t> rx_dropped_{0}, tx_dropped_{0};
  std::atomic<uint64_t> rx_linearized_{0}, rx_oversize_{0}, rx_bad_checksum_{0}, tx_retries_{0};
};

// The af_xdp ports' pool: objects that tile the pages (xdp_pool.cc).
// room: the frame octets each mbuf must hold after its headroom.
rte_mempool* create_xdp_pool(const char* name, uint32_t mbufs, uint32_t cache, uint32_t room,
                             std::string* why);

}  // namespace softrdma::net::dpdk_port
