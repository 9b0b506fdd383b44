// DPDK 22.11 memif's quirks and their workarounds: descriptor sizing,
// populating the shared regions, and running control calls on EAL's
// interrupt thread one batch at a time.
#include "stack/net/dpdk/memif_quirks.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include <rte_alarm.h>
#include <rte_interrupts.h>

#include "stack/net/dpdk/port_impl.h"

namespace softrdma::net::dpdk_port {

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

namespace {

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

}  // namespace

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

}  // namespace softrdma::net::dpdk_port
