#include "stack/net/port_reserve.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace softrdma::net {

namespace {

// Binds the reservation socket s to a: 0 or -errno. Past connections in
// TIME-WAIT, never past a socket in use.
int bind_reserving(int s, const sockaddr_in& a) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&a);
  if (::bind(s, sa, sizeof(a)) == 0) return 0;
  if (errno != EADDRINUSE || a.sin_port == 0) return -errno;
  // Perhaps only connections in TIME-WAIT hold the port (a kernel TCP server
  // on it just closed them): SO_REUSEADDR binds past those, never past a
  // socket in use. It goes off again at once so that the port stays ours: a
  // later SO_REUSEADDR bind conflicts with a socket that lacks it. (Not on
  // the first try: a bind with it would let such binds share a free port.)
  const int on = 1, off = 0;
  if (::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0) return -errno;
  if (::bind(s, sa, sizeof(a)) != 0) return -errno;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &off, sizeof(off));
  return 0;
}

}  // namespace

PortReservation& PortReservation::operator=(PortReservation&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    port_ = o.port_;
    o.fd_ = -1;
  }
  return *this;
}

int PortReservation::take(in_addr ip, uint16_t port) {
  release();
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = ip;
  a.sin_port = htons(port);
  socklen_t len = sizeof(a);
  int rc = bind_reserving(s, a);
  if (rc == 0 && ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) rc = -errno;
  if (rc < 0) {
    ::close(s);
    return rc;
  }
  fd_ = s;
  port_ = ntohs(a.sin_port);
  return 0;
}

void PortReservation::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  port_ = 0;
}

}  // namespace softrdma::net
