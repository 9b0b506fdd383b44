// The addresses the tools listen on and connect to.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace softrdma::tools {

// INADDR_ANY:port, for a listener.
sockaddr_in any_address(uint16_t port);

// host:port as an IPv4 address; false with *err set if it does not resolve.
bool resolve_ipv4(const std::string& host, uint16_t port, sockaddr_in* out, std::string* err);

// As resolve_ipv4, or die (exit 2) with "cannot resolve <host>: <why>".
sockaddr_in resolve_or_die(const std::string& host, uint16_t port);

}  // namespace softrdma::tools
