// softrdma-switch's set-up and control: the NIC, the control socket, ranks
// attaching (their shared rings), holding and letting go of ports, and
// ranks going. Nothing here runs per frame.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "stack/common/settings.h"
#include "stack/net/switch/switch.h"

namespace softrdma::net::sw {

namespace {

constexpr size_t kMaxRanks = 1024;
// Frames per ring: MTU-sized slots, or (packet socket) 64 KiB ones, fewer:
// 16 MiB a ring, its pages touched only as frames fill them.
constexpr uint32_t kSlots = 1024, kSegmentSlots = 256;

uint16_t unprivileged_port_start() {
  std::ifstream f("/proc/sys/net/ipv4/ip_unprivileged_port_start");
  unsigned v = 1024;
  f >> v;
  return static_cast<uint16_t>(std::min(v, 65535u));
}

void watch(int ep, int fd, uint64_t tag) {
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = tag;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

int send_with_fds(int s, const Msg& m, const int* fds, int n) {
  char ctl[CMSG_SPACE(sizeof(int) * 3)]{};
  iovec iov{const_cast<Msg*>(&m), sizeof(m)};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  if (n > 0) {
    h.msg_control = ctl;
    h.msg_controllen = CMSG_SPACE(sizeof(int) * n);
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
  }
  return ::sendmsg(s, &h, MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof(m) ? 0 : -errno;
}

// The rings of a rank: sealed so that the rank cannot shrink them under us
// (a read past the end would kill the switch).
int make_rings(Rank* r, uint32_t slots, uint32_t slot_size, int* memfd) {
  const size_t one = FrameRing::bytes(slots, slot_size);
  r->bytes = 2 * one;
  int fd = ::memfd_create("softrdma-switch-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  if (::ftruncate(fd, static_cast<off_t>(r->bytes)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    int e = errno;
    ::close(fd);
    return -e;
  }
  void* p = ::mmap(nullptr, r->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  r->kick_switch = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  r->kick_rank = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p == MAP_FAILED || r->kick_switch < 0 || r->kick_rank < 0) {
    ::close(fd);
    return -ENOMEM;
  }
  r->base = p;
  r->to_rank = std::make_unique<FrameRing>(p, slots, slot_size);
  r->to_switch = std::make_unique<FrameRing>(static_cast<uint8_t*>(p) + one, slots, slot_size);
  r->heads.assign(size_t{slots} * kCheckedHead, 0);
  *memfd = fd;
  return 0;
}

}  // namespace

// epoll tags: the kind in the top bits, a rank's control fd below.
enum : uint64_t { kTagCtl = 1ull << 32, kTagNic = 2ull << 32, kTagRank = 3ull << 32, kTagKick = 4ull << 32 };

Rank::~Rank() {
  if (base != nullptr) ::munmap(base, bytes);
  for (int fd : {ctl, kick_switch, kick_rank})
    if (fd >= 0) ::close(fd);
}

int Switch::open(const std::string& ifname, std::string* error) {
  std::optional<HostIface> h = host_iface_named(ifname);
  if (!h) {
    *error = ifname + ": no such up, non-loopback interface with an IPv4 address";
    return -ENODEV;
  }
  iface_ = *h;
  const NicKind kind = settings::get_choice(settings::Id::kNic) == 0 ? NicKind::kAfXdp
                                                                     : NicKind::kPacket;
  if (int rc = open_nic_port(iface_, kind, &nic_, error); rc < 0) return rc;
  std::memcpy(mac_, nic_.port->mac(), 6);
  mtu_ = nic_.port->mtu();
  // A packet socket's frames are as large as GRO makes them, up to the
  // 65535 octets a rank's lwIP takes.
  slot_size_ = kind == NicKind::kPacket ? 65536 : (mtu_ + 18 + 63) & ~63u;
  slots_ = kind == NicKind::kPacket ? kSegmentSlots : kSlots;
  offloads_ = kind == NicKind::kPacket ? kOffloadTcp : 0;
  unprivileged_start_ = unprivileged_port_start();

  // The directory is root's: only the switch can place its socket there.
  ::mkdir(kDir, 0755);
  struct stat st{};
  if (::lstat(kDir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0) {
    *error = std::string(kDir) + ": not a directory of root's, writable by root only";
    return -EPERM;
  }
  const std::string path = ctl_path(ifname);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) {
    *error = path + ": name too long";
    return -ENAMETOOLONG;
  }
  std::memcpy(a.sun_path, path.c_str(), path.size());
  ::unlink(path.c_str());  // a switch before us that died
  ctl_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (ctl_ < 0 || ::bind(ctl_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::chmod(path.c_str(), 0666) != 0 || ::listen(ctl_, 128) != 0) {
    *error = path + ": " + std::strerror(errno);
    return -errno;
  }
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  watch(ep_, ctl_, kTagCtl);
  if (nic_.fd >= 0) watch(ep_, nic_.fd, kTagNic);
  return 0;
}

Switch::~Switch() {
  if (nic_.port) nic_.port->tx_discard();  // frames lent from the ranks' rings
  for (auto& r : ranks_)  // the NIC's buffers go back before the NIC closes
    for (const RxFrame& f : r->waiting) nic_.port->rx_release(f.handle);
  ranks_.clear();  // their ports first: the reservations close
  if (ctl_ >= 0) {
    ::unlink(ctl_path(iface_.name).c_str());
    ::close(ctl_);
  }
  if (ep_ >= 0) ::close(ep_);
}

void Switch::accept_ranks() {
  for (;;) {
    int fd = ::accept4(ctl_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    ucred cr{};
    socklen_t len = sizeof(cr);
    if (ranks_.size() >= kMaxRanks || ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
      std::fprintf(stderr, "softrdma-switch: %s: refused a rank (%zu attached)\n",
                   iface_.name.c_str(), ranks_.size());
      ::close(fd);
      continue;
    }
    auto r = std::make_unique<Rank>();
    r->ctl = fd;
    r->pid = cr.pid;
    r->uid = cr.uid;
    watch(ep_, fd, kTagRank | static_cast<uint32_t>(fd));
    ranks_.push_back(std::move(r));
  }
}

void Switch::serve(Rank* r) {
  Msg m;
  ssize_t n = ::recv(r->ctl, &m, sizeof(m), MSG_DONTWAIT | MSG_TRUNC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return drop(r);
  if (n != sizeof(m) || m.magic != kMagic || m.version != kVersion) {
    std::fprintf(stderr, "softrdma-switch: %s: pid %d sent a malformed request; dropped\n",
                 iface_.name.c_str(), static_cast<int>(r->pid));
    return drop(r);
  }
  Msg reply;
  reply.op = Op::kReply;
  if (m.op == Op::kHello && !r->to_rank) {
    int memfd = -1;
    reply.op = Op::kWelcome;
    reply.rc = make_rings(r, slots_, slot_size_, &memfd);
    if (reply.rc < 0) return (void)send_with_fds(r->ctl, reply, nullptr, 0), drop(r);
    std::memcpy(reply.mac, mac_, 6);
    reply.addr = iface_.addr.s_addr;
    reply.prefix = static_cast<uint32_t>(iface_.prefix);
    reply.mtu = mtu_;
    reply.slots = slots_;
    reply.slot_size = slot_size_;
    reply.offloads = offloads_;
    const int fds[3] = {memfd, r->kick_switch, r->kick_rank};
    int rc = send_with_fds(r->ctl, reply, fds, 3);
    ::close(memfd);
    if (rc < 0) return drop(r);
    watch(ep_, r->kick_switch, kTagKick | static_cast<uint32_t>(r->kick_switch));
    ++c_.ranks_attached;
    std::fprintf(stderr, "softrdma-switch: %s: pid %d (uid %u) attached\n", iface_.name.c_str(),
                 static_cast<int>(r->pid), static_cast<unsigned>(r->uid));
    return;
  }
  if (!r->to_rank || (m.op != Op::kHold && m.op != Op::kLetGo)) {
    std::fprintf(stderr, "softrdma-switch: %s: pid %d sent request %u out of turn; dropped\n",
                 iface_.name.c_str(), static_cast<int>(r->pid), static_cast<unsigned>(m.op));
    return drop(r);
  }
  if (m.op == Op::kHold) {
    reply.rc = hold(r, m.port, &reply.port);
  } else {
    let_go(r, m.port);
    reply.port = m.port;
  }
  if (send_with_fds(r->ctl, reply, nullptr, 0) < 0) drop(r);
}

int Switch::hold(Rank* r, uint16_t port, uint16_t* got) {
  if (port != 0 && r->ports.count(port)) {
    *got = port;
    return 0;
  }
  if (r->ports.size() >= kMaxPortsPerRank) return -ENOSPC;
  // The kernel's rule for its own sockets, for the ports we bind for others.
  if (port != 0 && port < unprivileged_start_ && r->uid != 0) return -EACCES;
  PortReservation res;
  if (int rc = res.take(iface_.addr, port); rc < 0) return rc;
  if (int rc = nic_.steer->add(res.port()); rc < 0) return rc;
  *got = res.port();
  by_port_[*got] = r;
  r->ports.emplace(*got, std::move(res));
  return 0;
}

void Switch::let_go(Rank* r, uint16_t port) {
  auto it = r->ports.find(port);
  if (it == r->ports.end()) return;
  nic_.steer->remove(port);
  by_port_[port] = nullptr;
  r->ports.erase(it);
}

void Switch::drop(Rank* r) {
  if (r->ctl < 0) return;  // dropped already this pass
  for (auto& [port, res] : r->ports) {
    nic_.steer->remove(port);
    by_port_[port] = nullptr;
  }
  std::fprintf(stderr, "softrdma-switch: %s: pid %d gone; %zu ports let go\n", iface_.name.c_str(),
               static_cast<int>(r->pid), r->ports.size());
  r->ports.clear();
  for (const RxFrame& f : r->waiting) nic_.port->rx_release(f.handle);
  waiting_ -= r->waiting.size();
  r->waiting.clear();
  ::epoll_ctl(ep_, EPOLL_CTL_DEL, r->ctl, nullptr);
  if (r->kick_switch >= 0) ::epoll_ctl(ep_, EPOLL_CTL_DEL, r->kick_switch, nullptr);
  ::close(r->ctl);
  r->ctl = -1;
  ++c_.ranks_dropped;
  dropped_.push_back(r);
}

void Switch::sweep_dropped() {
  if (dropped_.empty()) return;
  // A dropped rank's rings go with it: frames lent from them leave first.
  const auto lent = [this] {
    return std::any_of(dropped_.begin(), dropped_.end(), [](const Rank* r) { return r->lent > 0; });
  };
  if (lent()) nic_.port->tx_flush();
  if (lent()) nic_.port->tx_discard();
  std::erase_if(ranks_, [](const std::unique_ptr<Rank>& r) { return r->ctl < 0; });
  dropped_.clear();
}

void Switch::handle_events(int timeout_ms) {
  epoll_event evs[64];
  const int n = ::epoll_wait(ep_, evs, 64, timeout_ms);
  for (int i = 0; i < n; ++i) {
    const uint64_t tag = evs[i].data.u64 & ~0xffffffffull;
    const int fd = static_cast<int>(evs[i].data.u64 & 0xffffffffu);
    if (tag == kTagCtl) {
      accept_ranks();
    } else if (tag == kTagRank) {
      for (auto& r : ranks_)
        if (r->ctl == fd) serve(r.get());
    } else if (tag == kTagKick) {
      uint64_t v;  // a rank published frames: the next pass takes them
      (void)!::read(fd, &v, sizeof(v));
    }
  }
}

}  // namespace softrdma::net::sw
