#include "stack/net/dpdk/port.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <rte_alarm.h>
#include <rte_bus.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pause.h>

#include "stack/common/settings.h"
#include "stack/net/dpdk/eal.h"
#include "stack/net/dpdk/memif_guard.h"

namespace softrdma::net {
namespace {

constexpr uint32_t kEthHeader = 14;
constexpr uint32_t kVlanTag = 4;
constexpr uint32_t kFrameSlack = 8;  // a VLAN tag and the CRC, if a PMD keeps them
constexpr uint32_t kPoolCache = 256;
constexpr uint16_t kMaxBurst = 512;

static_assert(kFramePrivSize % RTE_MBUF_PRIV_ALIGN == 0);

// Probing, removal and pool creation touch process-wide DPDK state.
std::mutex g_mu;
std::set<uint16_t> g_open_ports;

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

uint32_t round_up(uint32_t v, uint32_t to) { return (v + to - 1) / to * to; }

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

// The value of key in "name,key=value,..." (empty if absent).
std::string devarg(const std::string& devargs, const std::string& key) {
  const std::string k = "," + key + "=";
  const auto pos = devargs.find(k);
  if (pos == std::string::npos) return "";
  const auto start = pos + k.size();
  return devargs.substr(start, devargs.find(',', start) - start);
}

// DPDK 22.11 memif corrupts frames that span ring descriptors: its tx
// leaves a stale "next" flag on reused descriptors, so once the ring wraps
// frames merge or break, and a lap of chained frames corrupts the DPDK heap
// (seen with 3-4 KB frames over 1 KB descriptors). The client's bsize sizes
// the shared buffers, so every port gets one descriptor per frame: bsize is
// added when absent and a frame needs more than the default 2048, and a
// given bsize below the largest frame is refused.
bool memif_buffer_size(std::string* devargs, uint32_t mtu, std::string* why) {
  constexpr uint32_t kDefaultBsize = 2048;
  const uint32_t frame = mtu + kEthHeader + kVlanTag;
  const std::string given = devarg(*devargs, "bsize");
  if (given.empty()) {
    if (frame > kDefaultBsize)
      *devargs += ",bsize=" + std::to_string(std::min<uint32_t>(round_up(frame, 128), UINT16_MAX));
    return true;
  }
  const unsigned long bsize = std::strtoul(given.c_str(), nullptr, 0);
  if (bsize < frame) {
    *why = "memif bsize " + std::to_string(bsize) + " < frame " + std::to_string(frame) +
           ": DPDK 22.11 memif corrupts frames chained over descriptors";
    return false;
  }
  return true;
}

// A memif link's shared region (rings and a buffer per descriptor, 4.7 MB
// for the mesh's 256-descriptor rings of jumbo buffers) is a memfd both
// processes map; its pages fault in one descriptor at a time, so the first
// lap of each ring (1024 frames with DPDK's default rings) paid a
// page fault on each side per frame: 6.5 us per half round trip instead of
// 1.3 for the first thousand messages of every connection's link. When a
// link comes up, populate the page tables of the regions not seen before.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif
void populate_memif_regions() {
  static std::mutex mu;
  static std::set<std::pair<unsigned long, unsigned long>> done;  // (address, memfd inode)
  std::lock_guard<std::mutex> lock(mu);
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  char line[512];
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    if (std::strstr(line, "memfd:memif_region") == nullptr) continue;
    unsigned long lo = 0, hi = 0, inode = 0;
    if (std::sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &inode) != 3 ||
        !done.insert({lo, inode}).second)
      continue;
    if (madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE) == 0) continue;
    for (uintptr_t a = lo; a < hi; a += page)  // older kernels: a read maps a shmem page
      (void)*reinterpret_cast<volatile const char*>(a);
  }
  std::fclose(maps);
}

// Where EAL's interrupt thread is, from /proc (its state, the syscall it
// is in and, as root, its kernel stack): for the diagnostic of a thread
// that stopped serving its alarms.
void describe_interrupt_thread() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return;
  auto slurp = [](const std::string& path) {
    std::string out;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
      std::fclose(f);
    }
    return out;
  };
  while (dirent* e = readdir(d)) {
    const std::string task = std::string("/proc/self/task/") + e->d_name;
    if (slurp(task + "/comm").rfind("eal-intr-thread", 0) != 0) continue;
    std::fprintf(stderr, "softrdma: interrupt thread %s: stat %s syscall %s wchan %s\n%s",
                 e->d_name, slurp(task + "/stat").c_str(), slurp(task + "/syscall").c_str(),
                 slurp(task + "/wchan").c_str(), slurp(task + "/stack").c_str());
  }
  closedir(d);
}

// EAL's interrupt thread dispatches each epoll batch by descriptor number.
// Two control calls in one batch (its alarm loop runs every alarm already
// due, and the caller posts the next as soon as one returns) can close a
// memif socket and open another under the same number; an event of the
// closed one still in the batch then goes to the new one, whose blocking
// recvmsg or accept holds the thread for good (seen as a link that never
// comes up, the thread in recvmsg). The fence: an eventfd source, whose
// callback can only run in a batch after the one a call ran in; the next
// call waits for it.
class BatchFence {
 public:
  // Returns once the interrupt thread has begun a new batch (or 5 s on).
  void pass() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!registered()) return;
    const uint64_t ticket = ++asked_;
    const uint64_t one = 1;
    if (write(fd_, &one, sizeof(one)) != sizeof(one)) return;
    if (!cv_.wait_for(lock, std::chrono::seconds(5), [&] { return seen_ >= ticket; })) {
      std::fprintf(stderr, "softrdma: EAL's interrupt thread has not come back to its wait "
                           "for 5 s\n");
      describe_interrupt_thread();
    }
  }

 private:
  bool registered() {
    if (fd_ >= 0) return true;
    if (tried_) return false;
    tried_ = true;
    // Kept for the life of the process, like EAL's own sources.
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    rte_intr_handle* h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
    if (fd >= 0 && h != nullptr && rte_intr_fd_set(h, fd) == 0 &&
        rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) == 0 &&
        rte_intr_callback_register(h, on_event, this) == 0) {
      fd_ = fd;
      handle_ = h;  // EAL registered a copy; ours is kept with the fence
      return true;
    }
    if (h != nullptr) rte_intr_instance_free(h);
    if (fd >= 0) close(fd);
    return false;
  }
  static void on_event(void* arg) {
    auto* f = static_cast<BatchFence*>(arg);
    std::lock_guard<std::mutex> lock(f->mu_);  // fd_ was set under it too
    uint64_t n;
    while (read(f->fd_, &n, sizeof(n)) == sizeof(n)) {
    }
    f->seen_ = f->asked_;
    f->cv_.notify_all();
  }

  int fd_ = -1;
  rte_intr_handle* handle_ = nullptr;
  bool tried_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t asked_ = 0, seen_ = 0;
};

// Runs fn on EAL's interrupt thread and waits. memif (22.11) runs its
// control channel there without locking against the application: a peer's
// disconnect handled there while the application stops the port frees the
// shared regions twice (seen as "EAL: Error: Invalid memory", then crashes),
// and a connection accepted between a server's probe and start is refused.
// Every memif control call therefore runs there too, one at a time with its
// callbacks (and the caller's network namespace entered there as well), and
// each in an epoll batch of its own (BatchFence).
void on_interrupt_thread(const std::function<void()>& fn) {
  if (rte_thread_is_intr()) {
    fn();
    return;
  }
  // Never destroyed: teardowns run from static destructors too.
  static auto* one_at_a_time = new std::mutex;
  static auto* fence = new BatchFence;
  std::lock_guard<std::mutex> serial(*one_at_a_time);
  struct Call {
    const std::function<void()>* fn;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  } call{&fn};
  auto run = [](void* arg) {
    auto* c = static_cast<Call*>(arg);
    (*c->fn)();
    std::lock_guard<std::mutex> lock(c->mu);
    c->done = true;
    c->cv.notify_one();  // under the lock: the waiter owns (and frees) *c
  };
  if (rte_eal_alarm_set(1, run, &call) != 0) {
    fn();
    return;
  }
  {
    std::unique_lock<std::mutex> lock(call.mu);
    // It cannot be given up on (the call lives here), but a wait of seconds
    // means the interrupt thread is stuck: say so once.
    if (!call.cv.wait_for(lock, std::chrono::seconds(5), [&] { return call.done; })) {
      std::fprintf(stderr, "softrdma: EAL's interrupt thread has not run a memif control call "
                           "for 5 s\n");
      describe_interrupt_thread();
      call.cv.wait(lock, [&] { return call.done; });
    }
  }
  fence->pass();
}

// memif (22.11) frees a socket's state with the last device using it but
// leaves a server's listener open and registered with the interrupt thread:
// the name stays taken (a new server on it fails with EADDRINUSE) and the
// next client to connect has that thread use freed memory. Once that last
// device is gone, the listener's descriptor is pointed at an eventfd that
// never fires: the name is released and the stale registration stays
// silent, at the price of one descriptor. Runs on the interrupt thread, in
// the device's network namespace (abstract names are per namespace).
void retire_memif_listener(const std::string& sock, bool abstract) {
  const std::string bound = (abstract ? "@" : "") + sock;
  constexpr unsigned long kAcceptCon = 0x10000;  // __SO_ACCEPTCON: listening
  std::set<unsigned long> inodes;
  if (FILE* f = std::fopen("/proc/thread-self/net/unix", "r")) {
    char line[512], path[256];
    unsigned long flags, inode;
    while (std::fgets(line, sizeof(line), f)) {
      path[0] = '\0';
      if (std::sscanf(line, "%*s %*s %*s %lx %*s %*s %lu %255s", &flags, &inode, path) == 3 &&
          (flags & kAcceptCon) && bound == path)
        inodes.insert(inode);
    }
    std::fclose(f);
  }
  if (inodes.empty()) return;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    char target[64] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;
    unsigned long inode;
    if (std::sscanf(target, "socket:[%lu]", &inode) != 1 || !inodes.count(inode)) continue;
    const int inert = eventfd(0, EFD_CLOEXEC);
    if (inert >= 0) {
      dup2(inert, std::atoi(e->d_name));
      close(inert);
    }
  }
  closedir(d);
}

// memif devices of this process per socket name: the last one to go takes
// the socket's state with it (see retire_memif_listener).
struct MemifSocketUse {
  int devices = 0;
  bool listener = false;  // made by a server (a client-made one has none)
  bool abstract = true;
};
std::map<std::string, MemifSocketUse> g_memif_sockets;

void bump(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

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
  void shutdown();

  uint16_t port_ = RTE_MAX_ETHPORTS;
  std::string name_, driver_;
  uint8_t mac_[6] = {};
  uint32_t mtu_ = 0;
  uint32_t max_frame_ = 0;     // pool data room after headroom
  uint32_t max_tx_frame_ = 0;  // mtu + Ethernet header + a VLAN tag
  uint16_t burst_ = 32;
  bool trusted_ = false;
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

  std::atomic<uint64_t> rx_packets_{0}, rx_bytes_{0}, tx_packets_{0}, tx_bytes_{0};
  std::atomic<uint64_t> rx_dropped_{0}, tx_dropped_{0};
  std::atomic<uint64_t> rx_linearized_{0}, rx_oversize_{0}, rx_bad_checksum_{0}, tx_retries_{0};
};

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
    trusted_ = true;  // shared memory between two stacks: nothing corrupts frames
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

// A chained frame (a PMD that scatters, such as newer memif with one mbuf
// per ring descriptor, or a peer's frame beyond our data room) becomes one
// segment: in place when the first mbuf has the tailroom, else copied into
// a fresh mbuf; dropped if it cannot fit one.
bool DpdkPortImpl::linearize(rte_mbuf** pm) {
  rte_mbuf* m = *pm;
  // The copies below trust pkt_len; a chain that disagrees would overrun.
  uint32_t sum = 0;
  uint16_t segs = 0;
  for (const rte_mbuf* s = m; s != nullptr; s = s->next, ++segs) sum += s->data_len;
  if (sum != m->pkt_len || segs != m->nb_segs) {
    bump(rx_dropped_, 1);
    rte_pktmbuf_free(m);
    return false;
  }
  if (rte_pktmbuf_linearize(m) == 0) {
    bump(rx_linearized_, 1);
    return true;
  }
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  rte_mbuf* fresh = len <= max_frame_ ? rte_pktmbuf_alloc(pool_) : nullptr;
  if (fresh == nullptr) {
    if (len > max_frame_) bump(rx_oversize_, 1);
    bump(rx_dropped_, 1);
    rte_pktmbuf_free(m);
    return false;
  }
  auto* dst = rte_pktmbuf_mtod(fresh, uint8_t*);
  const void* src = rte_pktmbuf_read(m, 0, len, dst);
  if (src != dst) std::memcpy(dst, src, len);
  fresh->data_len = static_cast<uint16_t>(len);
  fresh->pkt_len = len;
  fresh->ol_flags = m->ol_flags;
  fresh->port = m->port;
  rte_pktmbuf_free(m);
  *pm = fresh;
  bump(rx_linearized_, 1);
  return true;
}

int DpdkPortImpl::rx_burst(RxFrame* out, int max) {
  if (!tx_pending_.empty()) tx_flush();  // what a full ring refused before
  if (intr_armed_) {
    rte_eth_dev_rx_intr_disable(port_, 0);
    intr_armed_ = false;
  }
  int got = 0;
  uint64_t bytes = 0;
  while (got < max) {
    const uint16_t want = static_cast<uint16_t>(std::min<int>(max - got, burst_));
    const uint16_t n = rx_some(want);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = rx_mbufs_[i];
      if (m->nb_segs > 1 && !linearize(&m)) continue;
      if (check_csum_) {
        const uint64_t f = m->ol_flags;
        if ((f & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
            (f & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
          bump(rx_bad_checksum_, 1);
          bump(rx_dropped_, 1);
          rte_pktmbuf_free(m);
          continue;
        }
      }
      RxFrame& f = out[got++];
      f.handle = m;
      f.data = rte_pktmbuf_mtod(m, const uint8_t*);
      f.len = m->data_len;
      f.priv = rte_mbuf_to_priv(m);
      bytes += m->data_len;
    }
    if (n < want) break;
  }
  if (got > 0) {
    bump(rx_packets_, got);
    bump(rx_bytes_, bytes);
  }
  return got;
}

// Back-pressure, not loss: while frames wait for a full ring, refuse new
// ones (the TCP above keeps its segment and tries again on a later poll).
bool DpdkPortImpl::tx_room() {
  if (tx_pending_.size() < kMaxPending) return true;
  tx_flush();
  if (tx_pending_.size() < kMaxPending) return true;
  bump(tx_retries_, 1);
  return false;
}

uint8_t* DpdkPortImpl::tx_begin(uint32_t len, void** handle) {
  if (!tx_room()) return nullptr;
  rte_mbuf* m = len <= max_tx_frame_ ? rte_pktmbuf_alloc(pool_) : nullptr;
  if (m == nullptr) {
    bump(tx_dropped_, 1);
    return nullptr;
  }
  *handle = m;
  return rte_pktmbuf_mtod(m, uint8_t*);
}

void DpdkPortImpl::tx_commit(void* handle, uint32_t len) {
  auto* m = static_cast<rte_mbuf*>(handle);
  if (len > max_tx_frame_) {
    bump(tx_dropped_, 1);
    rte_pktmbuf_free(m);
    return;
  }
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  tx_pending_.push_back(m);
  if (tx_pending_.size() >= burst_) tx_flush();
}

// The frame rides in an mbuf as an external buffer; the mbuf's own data
// room goes unused and its private area (free on transmit) holds the shared
// info, whose free callback is the caller's done. The driver copies the
// frame into its ring and frees the mbuf within tx_burst, which calls done.
int DpdkPortImpl::tx_lend(const uint8_t* frame, uint32_t len, TxDone done, void* ctx) {
  if (!lends_ || len > max_tx_frame_) return 0;
  if (!tx_room()) return -ENOBUFS;
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) {
    bump(tx_dropped_, 1);
    return -ENOBUFS;
  }
  static_assert(sizeof(rte_mbuf_ext_shared_info) <= kFramePrivSize);
  auto* sh = static_cast<rte_mbuf_ext_shared_info*>(rte_mbuf_to_priv(m));
  sh->free_cb = done;
  sh->fcb_opaque = ctx;
  rte_mbuf_ext_refcnt_set(sh, 1);
  // No IOVA: only drivers that copy in software (lends_) see this mbuf.
  rte_pktmbuf_attach_extbuf(m, const_cast<uint8_t*>(frame), RTE_BAD_IOVA,
                            static_cast<uint16_t>(len), sh);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  tx_pending_.push_back(m);
  if (tx_pending_.size() >= burst_) tx_flush();
  return 1;
}

void DpdkPortImpl::tx_flush() {
  const uint16_t n = static_cast<uint16_t>(tx_pending_.size());
  if (n == 0) return;
  uint64_t bytes = 0;
  for (rte_mbuf* m : tx_pending_) bytes += m->pkt_len;
  rte_mbuf** pkts = tx_pending_.data();
  uint16_t sent = tx_some(pkts, n);
  if (sent < n) {
    // A full ring usually drains within microseconds; dropping would cost
    // the TCP above a retransmission timeout.
    const uint64_t deadline = rte_get_timer_cycles() + tx_retry_cycles_;
    do {
      bump(tx_retries_, 1);
      rte_pause();
      sent += tx_some(pkts + sent, static_cast<uint16_t>(n - sent));
    } while (sent < n && rte_get_timer_cycles() < deadline);
  }
  // What the ring did not take stays queued, in order, for the next flush:
  // the peer is a process that may simply not have been scheduled yet.
  for (uint16_t i = sent; i < n; ++i) bytes -= pkts[i]->pkt_len;
  bump(tx_packets_, sent);
  bump(tx_bytes_, bytes);
  tx_pending_.erase(tx_pending_.begin(), tx_pending_.begin() + sent);
}

void DpdkPortImpl::tx_discard() {
  bump(tx_dropped_, tx_pending_.size());
  if (!tx_pending_.empty()) {
    rte_pktmbuf_free_bulk(tx_pending_.data(), static_cast<unsigned>(tx_pending_.size()));
  }
  tx_pending_.clear();
}

void DpdkPortImpl::rx_wait_arm() {
  if (intr_fd_ < 0) return;
  // Consume the event that woke the caller so the fd is quiet until the next.
  pollfd p{intr_fd_, POLLIN, 0};
  uint64_t v;
  while (poll(&p, 1, 0) == 1 && (p.revents & POLLIN) && read(intr_fd_, &v, sizeof(v)) > 0) {
  }
  intr_armed_ = rte_eth_dev_rx_intr_enable(port_, 0) == 0;
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

}  // namespace

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
