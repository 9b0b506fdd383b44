// TCP ports held in the kernel for lwIP, as iwpmd holds an iWARP NIC's:
// a kernel socket bound to the address and port (never listening) keeps
// the kernel from giving the port to anyone else while lwIP uses it.
#pragma once

#include <netinet/in.h>

#include <cstdint>

namespace softrdma::net {

class PortReservation {
 public:
  PortReservation() = default;
  PortReservation(PortReservation&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  PortReservation& operator=(PortReservation&& o) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation() { release(); }

  // Holds ip:port (port 0: one the kernel picks). 0 or -errno.
  int take(in_addr ip, uint16_t port);
  void release();
  uint16_t port() const { return port_; }  // host byte order
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace softrdma::net
