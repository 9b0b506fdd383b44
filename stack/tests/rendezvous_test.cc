// The local rendezvous takes link requests only from the process they
// name: a process of this user that forges another's pid (a BYE would
// make us reset that process's connections) is refused, and counted.
#include "stack/net/rendezvous.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace softrdma::net {
namespace {

// Sends text to pid's request socket in dir from a socket of our own.
void send_raw(const std::string& dir, pid_t to, const std::string& text) {
  int s = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s/%d.ctl", dir.c_str(), static_cast<int>(to));
  ::sendto(s, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::close(s);
}

TEST(Rendezvous, TakesRequestsOnlyFromTheProcessTheyName) {
  char tmpl[] = "/tmp/softrdma-rv-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ::setenv("FI_SOFTRDMA_RUNDIR", dir.c_str(), 1);
  Rendezvous rv;
  ASSERT_TRUE(rv.ok());

  // A second live process whose pid a forger can name: it says nothing.
  int hold[2];
  ASSERT_EQ(::pipe(hold), 0);
  pid_t bystander = ::fork();
  if (bystander == 0) {
    char c;
    (void)!::read(hold[0], &c, 1);
    ::_exit(0);
  }
  ASSERT_GT(bystander, 0);

  // The sender: one genuine BYE, then forged ones in the bystander's name,
  // and a LINK claiming the receiver itself; it stays alive until read.
  int done[2];
  ASSERT_EQ(::pipe(done), 0);
  pid_t sender = ::fork();
  if (sender == 0) {
    Rendezvous own;
    if (own.send_bye(rv.pid()) != 0) ::_exit(2);
    const std::string b = std::to_string(bystander);
    send_raw(dir, rv.pid(), "BYE " + b);
    send_raw(dir, rv.pid(), "LINK " + b + " softrdma-" + b);
    send_raw(dir, rv.pid(), "SERVE " + b);
    char c;
    (void)!::read(done[0], &c, 1);
    ::_exit(0);
  }
  ASSERT_GT(sender, 0);

  std::vector<Rendezvous::Request> got;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (rv.refused() < 3 && std::chrono::steady_clock::now() < until) {
    Rendezvous::Request r;
    while (rv.next_request(&r)) got.push_back(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  (void)!::write(done[1], "x", 1);
  (void)!::write(hold[1], "x", 1);
  int st = 0;
  ASSERT_EQ(::waitpid(sender, &st, 0), sender);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ASSERT_EQ(::waitpid(bystander, &st, 0), bystander);

  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kind, Rendezvous::Request::Kind::kBye);
  EXPECT_EQ(got[0].peer, sender);
  EXPECT_EQ(rv.refused(), 3u);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace softrdma::net
