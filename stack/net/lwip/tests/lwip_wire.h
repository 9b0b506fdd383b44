// Pipe links in the process-wide lwIP stack for tests: addresses, and a
// pipe whose two ends are links with host routes that make each address's
// traffic leave through its own end (routed, not looped back).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstdint>

#include "stack/net/lwip/lwip_transport.h"
#include "stack/net/lwip/tests/pipe_link.h"

namespace softrdma::net::testing {

inline in_addr ip4(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a;
}

inline sockaddr_in addr(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr = ip4(ip);
  return a;
}

struct Wire {
  PipeLink* end[2] = {};
  int link[2] = {-1, -1};
};

// ip0 on end 0, ip1 on end 1, both /24.
inline Wire add_wire(const char* ip0, const char* ip1, const PipeOptions& opt,
                     LinkChecksums checksums = LinkChecksums::kAuto) {
  Wire w;
  auto [e0, e1] = make_pipe_pair(opt);
  w.end[0] = e0.get();
  w.end[1] = e1.get();
  LwipStack& s = LwipStack::get();
  LwipLinkOptions lo;
  lo.checksums = checksums;
  w.link[0] = s.add_link(std::move(e0), ip4(ip0), ip4("255.255.255.0"), in_addr{}, lo);
  w.link[1] = s.add_link(std::move(e1), ip4(ip1), ip4("255.255.255.0"), in_addr{}, lo);
  EXPECT_GE(w.link[0], 0);
  EXPECT_GE(w.link[1], 0);
  EXPECT_EQ(s.add_route(ip4(ip1), 32, w.link[0]), 0);
  EXPECT_EQ(s.add_route(ip4(ip0), 32, w.link[1]), 0);
  return w;
}

}  // namespace softrdma::net::testing
