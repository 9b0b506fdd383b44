#include "stack/tools/addresses.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

#include "stack/tools/tool_die.h"

namespace softrdma::tools {

sockaddr_in any_address(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  return a;
}

bool resolve_ipv4(const std::string& host, uint16_t port, sockaddr_in* out, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0 || !res) {
    *err = rc ? gai_strerror(rc) : "no address";
    return false;
  }
  std::memcpy(out, res->ai_addr, sizeof(*out));
  freeaddrinfo(res);
  out->sin_port = htons(port);
  return true;
}

sockaddr_in resolve_or_die(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  std::string err;
  if (!resolve_ipv4(host, port, &a, &err))
    die(kExitError, "cannot resolve %s: %s", host.c_str(), err.c_str());
  return a;
}

}  // namespace softrdma::tools
