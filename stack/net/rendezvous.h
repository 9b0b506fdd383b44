// The embedded default topology: with no configuration, every process on
// the host reaches every other over the DPDK path. Each process takes a
// virtual address derived from its pid (10.128.0.0/9 + pid) and answers
// link requests on a Unix datagram socket in a run directory; a listener
// publishes its port there so that the addresses users type (127.0.0.1 or
// the host's own IP, and a port, as with libfabric's tcp provider) lead to
// the listening process. A connecting process creates a memif link (its
// side in server role) and asks the peer, through its socket, to attach as
// the client; each side then routes the other's address over that link.
//
// POSIX only: no DPDK or lwIP headers here.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "stack/net/port_reserve.h"

namespace softrdma::net {

class Rendezvous {
 public:
  static constexpr uint32_t kVirtualNet = 0x0a800000;  // 10.128.0.0/9, host order
  static constexpr int kVirtualPrefix = 9;

  // Creates the run directory (FI_SOFTRDMA_RUNDIR; else /run/softrdma for
  // root, $XDG_RUNTIME_DIR/softrdma or /tmp/softrdma-<uid> for others; a
  // directory not private to this user, or whose path is too long for a
  // Unix socket, is refused, with the reason on stderr, and ok() is false), removes what dead processes of this user
  // left there, and makes this process's request socket. This process's
  // files there go when it is destroyed or, at the latest, at exit.
  Rendezvous();
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;
  bool ok() const { return fd_ >= 0; }

  static in_addr address_of(pid_t pid);
  static bool is_virtual(in_addr a);
  static pid_t pid_of(in_addr a);
  // Locally administered MAC of a process's links: 02:53:52 + pid.
  static void mac_of(pid_t pid, uint8_t mac[6]);

  in_addr self() const { return address_of(pid_); }
  pid_t pid() const { return pid_; }

  // The process that serves ip:port on this host (*pid), or why none does,
  // as the kernel would say it: a virtual address names its process (gone:
  // -EHOSTUNREACH); a loopback or local address is looked up in the
  // published ports (none, or a dead publisher: -ECONNREFUSED); any other
  // address is off the mesh (-ENETUNREACH). 0 when found.
  int resolve(in_addr ip, uint16_t port, pid_t* pid) const;

  // A port no other process (kernel sockets included) uses: reserved by a
  // kernel socket bound to it, held until withdraw(). Then published.
  int reserve_and_publish(uint16_t* port);
  void withdraw(uint16_t port);

  // Link set-up messages between processes (Unix datagrams):
  //  LINK <pid> <name>: attach, as memif client, to my server socket <name>;
  //  SERVE <pid>: open a memif server for me (I am the higher pid: the lower
  //  pid of a pair always serves, so crossed requests make one link);
  //  BYE <pid>: I am about to close our link: stop polling your end;
  //  BYEACK <pid>: done, close it.
  struct Request {
    enum class Kind : uint8_t { kLink, kServe, kBye, kByeAck } kind;
    pid_t peer;
    std::string name;
  };
  int send_link(pid_t peer, const std::string& name) const;
  int send_serve(pid_t peer) const;
  int send_bye(pid_t peer) const;
  int send_bye_ack(pid_t peer) const;
  // The next pending request, without blocking. Requests are taken only
  // from the process they name (the kernel's SCM_CREDENTIALS say who sent
  // each datagram) and from this user or root; others are dropped, counted.
  bool next_request(Request* r);
  uint64_t refused() const { return refused_; }
  // The memif socket of the link between this process and peer: the serving
  // (lower) pid's one socket, shared by all its links; the link's memif
  // interface id is the higher pid (link_id), unique on it. link_name is
  // its name in the run directory (what LINK carries), link_socket its path:
  // a file there, not an abstract name any local user could connect to
  // (the directory is this user's alone), and the same in every network
  // namespace. It goes with this process's other files, and a dead
  // process's is swept.
  std::string link_name(pid_t peer) const;
  std::string link_socket(pid_t peer) const;
  uint32_t link_id(pid_t peer) const;
  // Whether a process with this pid exists.
  static bool alive(pid_t pid);

 private:
  int send(pid_t peer, const std::string& msg) const;
  static bool sender_ok(const struct ucred* cred, pid_t claimed);
  std::string dir_;
  pid_t pid_;
  int fd_ = -1;
  std::set<uint16_t> published_;
  std::map<uint16_t, PortReservation> reservations_;
  uint64_t refused_ = 0;
};

}  // namespace softrdma::net
