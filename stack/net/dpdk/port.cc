#include "stack/net/dpdk/port.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <rte_bus.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "stack/common/settings.h"
#include "stack/net/dpdk/eal.h"
#include "stack/net/dpdk/memif_guard.h"
#include "stack/net/dpdk/memif_quirks.h"
#include "stack/net/dpdk/port_impl.h"

namespace softrdma::net::dpdk_port {
namespace {

// Probing, removal and pool creation touch process-wide DPDK state.
std::mutex g_mu;
std::set<uint16_t> g_open_ports;

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

// Data room (after headroom) that holds a whole frame of this MTU.
uint32_t data_room_for(uint32_t mtu) {
  const uint32_t frame = mtu + kEthHeader + kFrameSlack;
  return std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM, round_up(frame, 1024));
}

// FI_SOFTRDMA_MBUFS=n: the process's pool holds n mbufs instead of
// PortOptions::pool_mbufs (at least 64). For tests and small hosts: a pool
// that runs dry is back-pressure (tx_begin refuses, rx leaves frames in the
// ring), never loss.
uint32_t pool_mbufs(const PortOptions& o) {
  if (!settings::is_set(settings::Id::kMbufs)) return o.pool_mbufs;
  return static_cast<uint32_t>(settings::get_int(settings::Id::kMbufs));
}

// The process's pools: one for every port but af_xdp, one for af_xdp ports
// (made when the first opens). The first is a LIFO ("stack" ops): the mbufs
// freed last are handed out first, so a process works in the few it keeps
// warm in the CPU's caches and its RSS is what it uses at once. The default
// ring is FIFO, and threads that are not EAL lcores (ours) get no per-lcore
// cache, so every frame walked the whole pool, touching all of it. af_xdp
// turns its pool into the socket's UMEM and moves no frame over a stack
// pool (DPDK 22.11: nothing is received), so it keeps the ring.
struct Pool {
  const char* name;
  const char* ops;
  rte_mempool* mp = nullptr;
};
Pool g_main_pool{"softrdma_mbufs", "stack"};
Pool g_xdp_pool{"softrdma_xdp_mbufs", "ring_mp_mc"};

rte_mempool* ensure_pool(const PortOptions& o, std::string* why) {
  Pool& pool = o.devargs.rfind("net_af_xdp", 0) == 0 ? g_xdp_pool : g_main_pool;
  const uint32_t need = o.mtu + kEthHeader + kVlanTag;
  if (pool.mp == nullptr) {
    const uint32_t mbufs = pool_mbufs(o);
    // rte_mempool_create refuses a per-lcore cache above n / 1.5.
    const uint32_t cache = std::min<uint32_t>(kPoolCache, mbufs * 2 / 3);
    uint32_t room = o.pool_data_room ? o.pool_data_room : data_room_for(o.mtu);
    if (room < need) {
      *why = "pool_data_room " + std::to_string(room) + " < frame " + std::to_string(need);
      return nullptr;
    }
    if (room + RTE_PKTMBUF_HEADROOM > UINT16_MAX) {
      *why = "mbuf data room too large: " + std::to_string(room);
      return nullptr;
    }
    if (&pool == &g_xdp_pool) return pool.mp = create_xdp_pool(pool.name, mbufs, cache, need, why);
    const uint16_t size = static_cast<uint16_t>(room + RTE_PKTMBUF_HEADROOM);
    pool.mp = rte_pktmbuf_pool_create_by_ops(pool.name, mbufs, cache, kFramePrivSize, size,
                                             SOCKET_ID_ANY, pool.ops);
    if (pool.mp == nullptr) {  // the stack driver is a plugin that may be missing
      pool.mp = rte_pktmbuf_pool_create(pool.name, mbufs, cache, kFramePrivSize, size,
                                        SOCKET_ID_ANY);
    }
    if (pool.mp == nullptr) {
      *why = "rte_pktmbuf_pool_create(" + std::to_string(mbufs) + " x " +
             std::to_string(room) + " B): " + rte_strerror(rte_errno) +
             " (raise EalOptions::memory_mb?)";
      return nullptr;
    }
    return pool.mp;
  }
  const uint32_t have = rte_pktmbuf_data_room_size(pool.mp) - RTE_PKTMBUF_HEADROOM;
  if (have < need) {
    *why = "mtu " + std::to_string(o.mtu) + " needs " + std::to_string(need) +
           " B mbufs, the process pool has " + std::to_string(have) +
           " (set pool_data_room on the first open)";
    return nullptr;
  }
  return pool.mp;
}

// Switches the calling thread into a network namespace until destroyed.
class NetnsScope {
 public:
  NetnsScope() = default;
  // Enters target_fd (if >= 0), best effort.
  explicit NetnsScope(int target_fd) {
    std::string unused;
    enter(target_fd, &unused);
  }
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;
  ~NetnsScope() {
    if (home_ >= 0) {
      setns(home_, CLONE_NEWNET);
      close(home_);
    }
  }
  bool enter(int target_fd, std::string* why) {
    if (target_fd < 0) return true;
    home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home_ < 0 || setns(target_fd, CLONE_NEWNET) != 0) {
      *why = std::string("setns: ") + std::strerror(errno);
      return false;
    }
    return true;
  }

 private:
  int home_ = -1;
};

// memif devices of this process per socket name: the last one to go takes
// the socket's state with it (see retire_memif_listener).
struct MemifSocketUse {
  int devices = 0;
  bool listener = false;  // made by a server (a client-made one has none)
  bool abstract = true;
};
std::map<std::string, MemifSocketUse> g_memif_sockets;

}  // namespace

bool DpdkPortImpl::open(const PortOptions& o, std::string* why) {
  if (o.devargs.empty()) {
    *why = "empty devargs";
    return false;
  }
  if (o.mtu < 68 || o.mtu > 65535 - kEthHeader - kFrameSlack - RTE_PKTMBUF_HEADROOM) {
    *why = "bad mtu " + std::to_string(o.mtu);
    return false;
  }
  mtu_ = o.mtu;
  burst_ = std::clamp<uint16_t>(o.burst, 1, kMaxBurst);
  name_ = o.devargs.substr(0, o.devargs.find(','));

  if (const int rc = dpdk_eal_init(EalOptions::from_env()); rc != 0) {
    *why = "EAL init failed: " + errno_text(rc);
    return false;
  }
  if (!dpdk_eal_hold()) {
    *why = "EAL not available (cleaned up?)";
    return false;
  }
  held_ = true;

  if (!o.netns.empty()) {
    const std::string path = o.netns[0] == '/' ? o.netns : "/run/netns/" + o.netns;
    netns_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns_fd_ < 0) {
      *why = "netns " + path + ": " + std::strerror(errno);
      return false;
    }
  }
  std::string devargs = o.devargs;
  memif_ = name_.rfind("net_memif", 0) == 0;
  if (memif_ && !memif_buffer_size(&devargs, o.mtu, why)) return false;

  NetnsScope ns;
  if (!ns.enter(netns_fd_, why)) return false;
  int start_rc = -1;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    pool_ = ensure_pool(o, why);
    if (pool_ == nullptr) return false;
    bool ok = false;
    auto setup = [&] {
      NetnsScope inner(memif_ ? netns_fd_ : -1);  // on the interrupt thread
      ok = probe(devargs, why);
      if (ok && memif_ && probed_by_us_) count_memif_socket(devargs);
      ok = ok && configure(o, why);
      // A memif server starts in the same go, before any client is served.
      if (ok && memif_) start_rc = rte_eth_dev_start(port_);
    };
    memif_ ? on_interrupt_thread(setup) : setup();
    if (!ok) return false;
  }
  // The driver is loaded now: its unmapping of a link's rings waits for
  // bursts in progress (memif_guard.cc). Without the guard memif still works,
  // with the window the guard closes.
  if (memif_ && !memif_guard::install() && settings::get_bool(settings::Id::kDebug))
    std::fprintf(stderr, "softrdma: memif guard not installed\n");
  return start(o, start_rc, why);
}

bool DpdkPortImpl::probe(const std::string& devargs, std::string* why) {
  std::set<uint16_t> before;
  uint16_t p;
  RTE_ETH_FOREACH_DEV(p) before.insert(p);

  const int rc = rte_dev_probe(devargs.c_str());
  if (rc < 0 && rc != -EEXIST) {
    *why = "rte_dev_probe(" + devargs + "): " + errno_text(rc);
    return false;
  }
  probed_by_us_ = rc == 0;
  // By name for vdevs and canonical PCI names; else whichever port is new.
  if (rte_eth_dev_get_port_by_name(name_.c_str(), &port_) != 0) {
    port_ = RTE_MAX_ETHPORTS;
    RTE_ETH_FOREACH_DEV(p) {
      if (!before.count(p)) {
        port_ = p;
        break;
      }
    }
  }
  rte_eth_dev_info info{};
  if (port_ < RTE_MAX_ETHPORTS && rte_eth_dev_info_get(port_, &info) == 0) device_ = info.device;
  if (port_ >= RTE_MAX_ETHPORTS || device_ == nullptr) {
    *why = "no ethdev port appeared for " + devargs;
    if (probed_by_us_) {
      // A device without an ethdev port (not a NIC?): unplug it again.
      rte_devargs da{};
      if (rte_devargs_parse(&da, devargs.c_str()) == 0) {
        rte_eal_hotplug_remove(rte_bus_name(da.bus), da.name);
        rte_devargs_reset(&da);
      }
    }
    probed_by_us_ = false;
    device_ = nullptr;
    return false;
  }
  if (!g_open_ports.insert(port_).second) {
    *why = "port " + name_ + " is already open";
    probed_by_us_ = false;  // belongs to the other link
    device_ = nullptr;
    return false;
  }
  registered_ = true;
  return true;
}

bool DpdkPortImpl::configure(const PortOptions& o, std::string* why) {
  rte_eth_dev_info info{};
  int rc = rte_eth_dev_info_get(port_, &info);
  if (rc != 0) {
    *why = "rte_eth_dev_info_get: " + errno_text(rc);
    return false;
  }
  driver_ = info.driver_name ? info.driver_name : "";
  const bool memif = driver_ == "net_memif";
  // Both copy each frame into their ring inside tx_burst and free the mbuf
  // there (DPDK 22.11; memif without zero-copy): frames can be lent.
  lends_ = memif || driver_ == "net_af_packet";
  char dev_name[RTE_ETH_NAME_MAX_LEN] = {};
  if (rte_eth_dev_get_name_by_port(port_, dev_name) == 0) name_ = dev_name;

  // ethdev's own MTU bound: overhead is what the PMD says, else Ethernet+CRC.
  const uint32_t overhead =
      (info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu)
          ? info.max_rx_pktlen - info.max_mtu
          : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  const uint32_t dev_max_mtu = std::min<uint32_t>(info.max_mtu, info.max_rx_pktlen - overhead);
  uint32_t conf_mtu = o.mtu;
  if (o.mtu > dev_max_mtu) {
    // memif reports a 1518-octet maximum it never enforces: it copies any
    // length, and memif_buffer_size gave it descriptors that hold a frame.
    if (!memif) {
      *why = driver_ + " supports mtu <= " + std::to_string(dev_max_mtu);
      return false;
    }
    conf_mtu = dev_max_mtu;
  }
  max_frame_ = rte_pktmbuf_data_room_size(pool_) - RTE_PKTMBUF_HEADROOM;
  max_tx_frame_ = std::min(max_frame_, o.mtu + kEthHeader + kVlanTag);

  rte_eth_conf conf{};
  conf.rxmode.mtu = conf_mtu;
  constexpr uint64_t kRxCsum =
      RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
  if (memif) {
    trusted_ = lossless_ = true;  // shared memory between two stacks: nothing corrupts frames
  } else if ((info.rx_offload_capa & kRxCsum) == kRxCsum) {
    conf.rxmode.offloads |= kRxCsum;
    trusted_ = check_csum_ = true;
  }
  conf.intr_conf.rxq = o.interrupt_mode ? 1 : 0;
  rc = rte_eth_dev_configure(port_, 1, 1, &conf);
  if (rc != 0 && o.interrupt_mode) {
    conf.intr_conf.rxq = 0;  // the PMD refuses rx interrupts: poll instead
    rc = rte_eth_dev_configure(port_, 1, 1, &conf);
  }
  if (rc != 0) {
    *why = "rte_eth_dev_configure: " + errno_text(rc);
    return false;
  }
  uint16_t nb_rxd = o.rx_descriptors, nb_txd = o.tx_descriptors;
  rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_, &nb_rxd, &nb_txd);
  if (rc != 0) {
    *why = "rte_eth_dev_adjust_nb_rx_tx_desc: " + errno_text(rc);
    return false;
  }
  const int socket = rte_eth_dev_socket_id(port_);
  rte_eth_rxconf rxconf = info.default_rxconf;
  rxconf.offloads = conf.rxmode.offloads;
  rc = rte_eth_rx_queue_setup(port_, 0, nb_rxd, socket, &rxconf, pool_);
  if (rc != 0) {
    *why = "rte_eth_rx_queue_setup: " + errno_text(rc);
    return false;
  }
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  rc = rte_eth_tx_queue_setup(port_, 0, nb_txd, socket, &txconf);
  if (rc != 0) {
    *why = "rte_eth_tx_queue_setup: " + errno_text(rc);
    return false;
  }
  rx_mbufs_.resize(burst_);
  tx_pending_.reserve(burst_);
  tx_pending_len_.reserve(burst_);
  tx_retry_cycles_ = rte_get_timer_hz() / 1000000 * o.tx_retry_us;
  return true;
}

void DpdkPortImpl::count_memif_socket(const std::string& devargs) {
  memif_socket_ = devarg(devargs, "socket");
  if (memif_socket_.empty()) memif_socket_ = "/run/memif.sock";  // the PMD's default
  MemifSocketUse& use = g_memif_sockets[memif_socket_];
  if (use.devices++ == 0) {
    const std::string role = devarg(devargs, "role");
    use.listener = role == "server" || role == "master";
    use.abstract = devarg(devargs, "socket-abstract") != "no";
  }
}

bool DpdkPortImpl::start(const PortOptions& o, int first_rc, std::string* why) {
  // A memif client cannot start until the server's socket exists.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(o.start_timeout_ms);
  int rc = first_rc;
  auto start_once = [&] {
    NetnsScope inner(memif_ ? netns_fd_ : -1);  // on the interrupt thread
    rc = rte_eth_dev_start(port_);
  };
  if (!memif_) start_once();
  auto pause = std::chrono::milliseconds(5);
  while (rc != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(pause);  // each failure logs: back off
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
    memif_ ? on_interrupt_thread(start_once) : start_once();
  }
  if (rc != 0) {
    *why = "rte_eth_dev_start(" + name_ + "): " + errno_text(rc);
    return false;
  }
  started_ = true;
  rte_ether_addr addr{};
  if (rte_eth_macaddr_get(port_, &addr) == 0) std::memcpy(mac_, addr.addr_bytes, 6);
  if (o.interrupt_mode && rte_eth_dev_rx_intr_enable(port_, 0) == 0) {
    intr_fd_ = rte_eth_dev_rx_intr_ctl_q_get_fd(port_, 0);
    rte_eth_dev_rx_intr_disable(port_, 0);  // armed only while the caller sleeps
    if (intr_fd_ < 0) intr_fd_ = -1;
  }
  return true;
}

DpdkPortCounters DpdkPortImpl::dpdk_counters() const {
  DpdkPortCounters c;
  c.link.rx_packets = rx_packets_.load(std::memory_order_relaxed);
  c.link.rx_bytes = rx_bytes_.load(std::memory_order_relaxed);
  c.link.tx_packets = tx_packets_.load(std::memory_order_relaxed);
  c.link.tx_bytes = tx_bytes_.load(std::memory_order_relaxed);
  c.link.rx_dropped = rx_dropped_.load(std::memory_order_relaxed);
  c.link.tx_dropped = tx_dropped_.load(std::memory_order_relaxed);
  c.rx_linearized = rx_linearized_.load(std::memory_order_relaxed);
  c.rx_oversize = rx_oversize_.load(std::memory_order_relaxed);
  c.rx_bad_checksum = rx_bad_checksum_.load(std::memory_order_relaxed);
  c.tx_retries = tx_retries_.load(std::memory_order_relaxed);
  rte_eth_stats s{};
  if (started_ && rte_eth_stats_get(port_, &s) == 0) {
    c.hw_missed = s.imissed;
    c.hw_rx_errors = s.ierrors;
    c.hw_tx_errors = s.oerrors;
    c.hw_rx_nombuf = s.rx_nombuf;
    c.link.rx_dropped += s.imissed + s.rx_nombuf;
  }
  return c;
}

void DpdkPortImpl::shutdown() {
  if (!held_) return;
  NetnsScope ns(netns_fd_);  // af_packet's stop/close ioctl the interface by name
  tx_discard();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto teardown = [&] {
      NetnsScope inner(memif_ ? netns_fd_ : -1);  // on the interrupt thread
      if (started_) rte_eth_dev_stop(port_);
      if (registered_) {
        // Devices we hot-plugged go away entirely; ones probed at EAL init
        // (PCI) are only closed.
        if (probed_by_us_ && device_ != nullptr)
          rte_dev_remove(device_);
        else
          rte_eth_dev_close(port_);
      }
      if (!memif_socket_.empty()) {
        auto it = g_memif_sockets.find(memif_socket_);
        if (--it->second.devices == 0) {
          if (it->second.listener) retire_memif_listener(memif_socket_, it->second.abstract);
          g_memif_sockets.erase(it);
        }
      }
    };
    memif_ ? on_interrupt_thread(teardown) : teardown();
    if (registered_) g_open_ports.erase(port_);
  }
  if (netns_fd_ >= 0) close(netns_fd_);
  netns_fd_ = -1;
  held_ = false;
  dpdk_eal_release();
}

}  // namespace softrdma::net::dpdk_port

namespace softrdma::net {

using dpdk_port::DpdkPortImpl;
using dpdk_port::ensure_pool;
using dpdk_port::errno_text;
using dpdk_port::g_main_pool;
using dpdk_port::g_mu;
using dpdk_port::g_xdp_pool;
using dpdk_port::Pool;

std::unique_ptr<FrameLink> open_dpdk_port(const PortOptions& options, std::string* error) {
  auto port = std::make_unique<DpdkPortImpl>();
  std::string why;
  if (!port->open(options, &why)) {
    port.reset();
    if (error != nullptr)
      *error = why;
    else
      std::fprintf(stderr, "softrdma: open_dpdk_port(%s): %s\n", options.devargs.c_str(),
                   why.c_str());
    return nullptr;
  }
  return port;
}

bool dpdk_prepare(const PortOptions& o, std::string* error) {
  if (const int rc = dpdk_eal_init(EalOptions::from_env()); rc != 0) {
    *error = "EAL init failed: " + errno_text(rc);
    return false;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  return ensure_pool(o, error) != nullptr;
}

MbufPoolInfo dpdk_mbuf_pool_info() {
  std::lock_guard<std::mutex> lock(g_mu);
  MbufPoolInfo info;
  for (const Pool* p : {&g_xdp_pool, &g_main_pool}) {  // sizes from the main one, if any
    if (p->mp == nullptr) continue;
    info.size += p->mp->size;
    info.available += rte_mempool_avail_count(p->mp);
    info.data_room = rte_pktmbuf_data_room_size(p->mp) - RTE_PKTMBUF_HEADROOM;
    info.priv_size = rte_pktmbuf_priv_size(p->mp);
  }
  return info;
}

}  // namespace softrdma::net
