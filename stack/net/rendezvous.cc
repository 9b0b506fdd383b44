#include "stack/net/rendezvous.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>

#include "stack/common/settings.h"

namespace softrdma::net {

namespace {

// Why an existing dir must not be used ("" if it may): it holds our control
// socket and port files, so whoever owns it could read, replace or redirect
// them. It must be a real directory (no symbolic link), ours, with no group
// or other access.
std::string private_dir_problem(const std::string& dir) {
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  // What is checked is what the descriptor names, not a path swapped since.
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  const int rc = ::fstat(fd, &st);
  ::close(fd);
  if (rc != 0) return std::strerror(errno);
  if (st.st_uid != ::getuid())
    return "it belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
           std::to_string(::getuid());
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("its mode ") + mode + " lets group or others in";
  }
  return "";
}

// $XDG_RUNTIME_DIR/softrdma, if the variable names a directory path.
std::string xdg_rundir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  return xdg && *xdg == '/' ? std::string(xdg) + "/softrdma" : "";
}

// Root: /run/softrdma. Others: $XDG_RUNTIME_DIR/softrdma (a directory only
// that user has). Then /tmp/softrdma-<uid>, which anybody could have made
// first. The first one that exists or can be made (0700) is checked, and
// used or refused: "" (the reason on stderr).
std::string pick_dir() {
  if (std::string d = settings::get_string(settings::Id::kRundir); !d.empty()) return d;
  for (std::string d : {std::string("/run/softrdma"),
                        xdg_rundir(), "/tmp/softrdma-" + std::to_string(::getuid())}) {
    if (d.empty() || (d == "/run/softrdma" && ::getuid() != 0)) continue;
    if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) continue;
    if (std::string why = private_dir_problem(d); !why.empty()) {
      std::fprintf(stderr, "softrdma: refusing rendezvous directory %s: %s\n", d.c_str(),
                   why.c_str());
      return "";
    }
    return d;
  }
  std::fprintf(stderr, "softrdma: no rendezvous directory could be made\n");
  return "";
}

// This process's files in run directories. The mesh's Rendezvous lives as
// long as the process and is never destroyed, so its files go at exit
// instead (after the mesh's goodbyes, which registered later). Each path is
// kept with the pid that made it: a forked child's exit leaves its parent's.
class OwnFiles {
 public:
  static OwnFiles& get() {
    static auto* files = new OwnFiles;  // outlives static destructors
    return *files;
  }
  void add(const std::string& path) {
    std::lock_guard g(mu_);
    paths_[path] = ::getpid();
  }
  void remove(const std::string& path) {
    std::lock_guard g(mu_);
    paths_.erase(path);
  }

 private:
  OwnFiles() {
    std::atexit([] { get().remove_all(); });
  }
  void remove_all() {
    std::lock_guard g(mu_);
    for (const auto& [path, pid] : paths_)
      if (pid == ::getpid()) ::unlink(path.c_str());
    paths_.clear();
  }
  std::mutex mu_;
  std::map<std::string, pid_t> paths_;
};

// The pid a run-directory entry belongs to: <pid>.ctl, <pid>.memif,
// port-<n>.tmp<pid>, or port-<n>, whose content is its publisher's pid.
// 0: not one of ours.
pid_t entry_pid(const std::string& dir, const char* name, ino_t* ino) {
  long pid = 0, port = 0;
  int end = 0;
  if (std::sscanf(name, "%ld.ctl%n", &pid, &end) == 1 && name[end] == 0) return pid;
  if (std::sscanf(name, "%ld.memif%n", &pid, &end) == 1 && name[end] == 0) return pid;
  if (std::sscanf(name, "port-%ld.tmp%ld%n", &port, &pid, &end) == 2 && name[end] == 0)
    return pid;
  if (std::sscanf(name, "port-%ld%n", &port, &end) != 1 || name[end] != 0) return 0;
  int fd = ::open((dir + "/" + name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32] = {};
  struct stat st{};
  const bool read_ok = ::fstat(fd, &st) == 0 && ::read(fd, buf, sizeof(buf) - 1) > 0;
  ::close(fd);
  if (!read_ok || std::sscanf(buf, "%ld", &pid) != 1) return 0;
  *ino = st.st_ino;
  return pid;
}

// Start-up: entries this user's dead processes left (killed, or gone
// without exit handlers) would otherwise pile up for ever.
void sweep_dead(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    ino_t ino = 0;
    const pid_t pid = entry_pid(dir, e->d_name, &ino);
    if (pid <= 0 || Rendezvous::alive(pid)) continue;
    const std::string path = dir + "/" + e->d_name;
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0 || st.st_uid != ::getuid()) continue;
    if (ino != 0 && st.st_ino != ino) continue;  // republished since it was read
    ::unlink(path.c_str());
  }
  ::closedir(d);
}

sockaddr_un unix_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  return a;
}

std::string ctl_path(const std::string& dir, pid_t pid) {
  return dir + "/" + std::to_string(pid) + ".ctl";
}

std::string memif_name(pid_t pid) { return std::to_string(pid) + ".memif"; }

// Why dir cannot hold this host's sockets ("" if it can): a Unix socket's
// path has at most 107 octets, and memif device strings are split at commas.
std::string socket_dir_problem(const std::string& dir) {
  // The longest names: the largest pid Linux gives (pid_max <= 2^22).
  constexpr pid_t kMaxPid = 4194304;
  const size_t longest = std::max(ctl_path(dir, kMaxPid).size(),
                                  (dir + "/" + memif_name(kMaxPid)).size());
  if (longest >= sizeof(sockaddr_un::sun_path))
    return "its path is too long for a Unix socket (" + std::to_string(longest) + " of at most " +
           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " octets)";
  if (dir.find(',') != std::string::npos) return "its path has a comma (memif device strings)";
  return "";
}

std::string port_path(const std::string& dir, uint16_t port) {
  return dir + "/port-" + std::to_string(port);
}

// Is ip one of this host's own addresses (loopback included)?
bool is_local(in_addr ip) {
  if ((ntohl(ip.s_addr) >> 24) == 127) return true;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return false;
  bool found = false;
  for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
      found = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == ip.s_addr;
  }
  ::freeifaddrs(ifs);
  return found;
}

}  // namespace

Rendezvous::Rendezvous() : dir_(pick_dir()), pid_(::getpid()) {
  if (dir_.empty()) return;  // refused: pick_dir said why
  if (std::string why = socket_dir_problem(dir_); !why.empty()) {
    std::fprintf(stderr, "softrdma: refusing rendezvous directory %s: %s\n", dir_.c_str(),
                 why.c_str());
    return;
  }
  sweep_dead(dir_);
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  // The kernel then tags every datagram with its sender's real pid and uid,
  // so a request cannot speak for another process.
  const int on = 1;
  if (::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  std::string path = ctl_path(dir_, pid_);
  ::unlink(path.c_str());  // a pid reused after a crash left its file
  sockaddr_un a = unix_addr(path);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  OwnFiles::get().add(path);
  // The memif server (DPDK) makes this one when the first link needs it; a
  // crashed process with this pid left one (its bind would fail).
  const std::string memif = link_socket(pid_);
  ::unlink(memif.c_str());
  OwnFiles::get().add(memif);
}

Rendezvous::~Rendezvous() {
  for (uint16_t p : std::set<uint16_t>(published_)) withdraw(p);
  if (fd_ >= 0) {
    ::close(fd_);
    const std::string path = ctl_path(dir_, pid_);
    ::unlink(path.c_str());
    OwnFiles::get().remove(path);
    const std::string memif = link_socket(pid_);
    ::unlink(memif.c_str());
    OwnFiles::get().remove(memif);
  }
}

in_addr Rendezvous::address_of(pid_t pid) {
  return in_addr{htonl(kVirtualNet + static_cast<uint32_t>(pid))};
}

bool Rendezvous::is_virtual(in_addr a) {
  return (ntohl(a.s_addr) >> (32 - kVirtualPrefix)) == (kVirtualNet >> (32 - kVirtualPrefix));
}

pid_t Rendezvous::pid_of(in_addr a) {
  return is_virtual(a) ? static_cast<pid_t>(ntohl(a.s_addr) - kVirtualNet) : 0;
}

void Rendezvous::mac_of(pid_t pid, uint8_t mac[6]) {
  const uint32_t p = static_cast<uint32_t>(pid);
  const uint8_t m[6] = {0x02, 0x53, 0x52, static_cast<uint8_t>(p >> 16),
                        static_cast<uint8_t>(p >> 8), static_cast<uint8_t>(p)};
  std::memcpy(mac, m, 6);
}

bool Rendezvous::sender_ok(const ucred* cred, pid_t claimed) {
  if (cred == nullptr || cred->pid != claimed) return false;
  return cred->uid == ::getuid() || cred->uid == 0;
}

bool Rendezvous::alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

int Rendezvous::resolve(in_addr ip, uint16_t port, pid_t* pid) const {
  if (is_virtual(ip)) {
    *pid = pid_of(ip);
    return alive(*pid) ? 0 : -EHOSTUNREACH;
  }
  if (!is_local(ip)) return -ENETUNREACH;
  std::ifstream f(port_path(dir_, port));
  long publisher = 0;
  if (!(f >> publisher) || !alive(static_cast<pid_t>(publisher))) return -ECONNREFUSED;
  *pid = static_cast<pid_t>(publisher);
  return 0;
}

int Rendezvous::reserve_and_publish(uint16_t* port) {
  // A kernel socket bound to 127.0.0.1:port keeps the number ours: no other
  // process's kernel TCP or SoftRDMA listener can take it meanwhile.
  PortReservation r;
  if (int rc = r.take(in_addr{htonl(INADDR_LOOPBACK)}, *port); rc < 0) return rc;
  *port = r.port();
  // Write then rename: a reader never sees a half-written file.
  std::string path = port_path(dir_, *port), tmp = path + ".tmp" + std::to_string(pid_);
  {
    std::ofstream f(tmp);
    f << pid_ << "\n";
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return -errno;
  OwnFiles::get().add(path);
  reservations_.emplace(*port, std::move(r));
  published_.insert(*port);
  return 0;
}

void Rendezvous::withdraw(uint16_t port) {
  if (!published_.erase(port)) return;
  const std::string path = port_path(dir_, port);
  ::unlink(path.c_str());
  OwnFiles::get().remove(path);
  reservations_.erase(port);
}

std::string Rendezvous::link_name(pid_t peer) const { return memif_name(std::min(pid_, peer)); }

std::string Rendezvous::link_socket(pid_t peer) const { return dir_ + "/" + link_name(peer); }

uint32_t Rendezvous::link_id(pid_t peer) const {
  return static_cast<uint32_t>(std::max(pid_, peer));
}

int Rendezvous::send(pid_t peer, const std::string& msg) const {
  sockaddr_un a = unix_addr(ctl_path(dir_, peer));
  if (::sendto(fd_, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0)
    return -errno;
  return 0;
}

int Rendezvous::send_link(pid_t peer, const std::string& name) const {
  return send(peer, "LINK " + std::to_string(pid_) + " " + name);
}

int Rendezvous::send_serve(pid_t peer) const { return send(peer, "SERVE " + std::to_string(pid_)); }
int Rendezvous::send_bye(pid_t peer) const { return send(peer, "BYE " + std::to_string(pid_)); }
int Rendezvous::send_bye_ack(pid_t peer) const {
  return send(peer, "BYEACK " + std::to_string(pid_));
}

bool Rendezvous::next_request(Request* r) {
  char buf[512];
  for (;;) {
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(ucred))];
    iovec iov{buf, sizeof(buf) - 1};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof(ctl);
    ssize_t n = ::recvmsg(fd_, &mh, 0);
    if (n <= 0) return false;
    buf[n] = 0;
    const ucred* cred = nullptr;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
          c->cmsg_len >= CMSG_LEN(sizeof(ucred)))
        cred = reinterpret_cast<const ucred*>(CMSG_DATA(c));
    }
    long pid = 0;
    char name[sizeof(buf)] = {};
    // Other processes of this user write here: check what they say.
    if (std::sscanf(buf, "LINK %ld %500s", &pid, name) == 2) {
      r->kind = Request::Kind::kLink;
    } else if (std::sscanf(buf, "SERVE %ld", &pid) == 1) {
      r->kind = Request::Kind::kServe;
    } else if (std::sscanf(buf, "BYEACK %ld", &pid) == 1) {
      r->kind = Request::Kind::kByeAck;
    } else if (std::sscanf(buf, "BYE %ld", &pid) == 1) {
      r->kind = Request::Kind::kBye;
    } else {
      continue;
    }
    if (pid <= 0 || pid == pid_ || !alive(static_cast<pid_t>(pid))) continue;
    // The pid a request names must be its sender's (a forged BYE would reset
    // another process's connections), and the sender must be this user or root.
    if (!sender_ok(cred, static_cast<pid_t>(pid))) {
      ++refused_;
      continue;
    }
    r->peer = static_cast<pid_t>(pid);
    r->name = name;
    return true;
  }
}

}  // namespace softrdma::net
