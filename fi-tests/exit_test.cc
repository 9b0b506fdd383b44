// A process that lives on after libfabric has let go of the provider: at
// exit, libfabric's destructor unloads its providers (dlclose) while the
// process still runs its remaining destructors, and Open MPI ranks exit the
// same way after MPI_Finalize. The DPDK state the provider started cannot
// go with it (EAL cannot be torn down and restarted), and DPDK's interrupt
// thread keeps serving the memif links: when a peer exits, it tears the
// link to it down and calls back into the provider's memif guard. The
// client here lingers in a late destructor (exit_linger.c) until its peer
// has exited; it must not crash.
#include <dlfcn.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

constexpr size_t kLen = 64 << 10;

// The server: accepts one connection, checks one message, then keeps
// progressing (it answers the client's goodbye) until told to exit.
int server(int fd) {
  Fabric f;
  f.listen();
  if (::testing::Test::HasFailure()) return 1;
  if (!send_blob(fd, &f.addr(), sizeof(sockaddr_in))) return 2;
  auto ep = accept_and_receive(f, kLen, 42);
  if (!ep) return 3;
  uint8_t ok = ::testing::Test::HasFailure() ? 0 : 1;
  if (!send_blob(fd, &ok, 1)) return 4;
  pollfd pfd{fd, POLLIN, 0};
  fi_cq_data_entry e;
  poll_until([&] {
    fi_cq_read(ep->rx, &e, 1);  // progress
    return ::poll(&pfd, 1, 1) > 0;
  });
  // Read whole, so the test's write is not cut short by this exit.
  std::vector<uint8_t> go;
  EXPECT_TRUE(recv_blob(fd, &go));
  return ::testing::Test::HasFailure() ? 5 : 0;
}
FIT_CHILD(server, server);

// The client: connects, sends one message, closes everything, and exits
// through the lingering destructor.
int client(int fd) {
  std::vector<uint8_t> addr;
  if (!recv_blob(fd, &addr) || addr.size() != sizeof(sockaddr_in)) return 2;
  {
    Fabric f;
    auto ep = connect_and_send(f, addr.data(), kLen, 42);
    // Closed once the server has it all (close_test.cc covers closing
    // with bytes in flight).
    std::vector<uint8_t> got;
    EXPECT_TRUE(recv_blob(fd, &got));
    if (::testing::Test::HasFailure()) return 3;
  }
  const char* dir = std::getenv("FI_PROVIDER_PATH");
  if (dir == nullptr) return 4;
  ::setenv("FIT_LINGER_FD", std::to_string(fd).c_str(), 1);
  ::setenv("FIT_LINGER_PROVIDER", (std::string(dir) + "/libsoftrdma-fi.so").c_str(), 1);
  if (dlopen(FIT_LINGER, RTLD_NOW) == nullptr) return 5;
  return 0;
}
FIT_CHILD(client, client);

TEST(Exit, ProcessOutlivesItsUnloadedProvider) {
  int sfd = -1, cfd = -1;
  pid_t spid = spawn("server", &sfd);
  ASSERT_GT(spid, 0);
  std::vector<uint8_t> addr, ok;
  ASSERT_TRUE(recv_blob(sfd, &addr));
  pid_t cpid = spawn("client", &cfd);
  ASSERT_GT(cpid, 0);
  ASSERT_TRUE(send_blob(cfd, addr.data(), addr.size()));
  ASSERT_TRUE(recv_blob(sfd, &ok));
  ASSERT_EQ(ok, std::vector<uint8_t>{1}) << "the server did not get the client's message intact";
  ASSERT_TRUE(send_blob(cfd, ok.data(), ok.size()));
  // The client is past libfabric's destructor.
  char state = 0;
  pollfd pfd{cfd, POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, kWaitMs), 1);
  ASSERT_EQ(::read(cfd, &state, 1), 1);
  std::printf("client's provider after libfabric's exit: %s\n",
              state == 'k' ? "kept loaded" : "unloaded");
  // Now the server exits, and with it the client's link to it.
  uint8_t go = 1;
  ASSERT_TRUE(send_blob(sfd, &go, 1));
  EXPECT_TRUE(child_ok(spid));
  ASSERT_EQ(::write(cfd, &go, 1), 1);
  EXPECT_TRUE(child_ok(cpid));
  ::close(sfd);
  ::close(cfd);
}

}  // namespace
}  // namespace fit
