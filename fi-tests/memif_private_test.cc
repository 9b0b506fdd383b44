// A process's memif socket on the embedded mesh is reached only by the
// processes of its own user: it is a file in the private run directory
// (0700), not an abstract name, which any local user could connect to and
// speak memif's control protocol on. The victim is this test process, a
// root libfabric application listening through the provider. Another local
// user (made by the test) cannot even connect; this user can, and is
// greeted by DPDK's memif HELLO, so the socket is the live one. Over
// kernel TCP there is no memif socket at all.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "fi-tests/fi_test.h"
#include "stack/tests/local_user.h"

namespace fit {
namespace {

using softrdma::test::LocalUser;

bool over_mesh() {
  const char* t = std::getenv("FI_SOFTRDMA_TRANSPORT");
  return t == nullptr || std::string(t) == "dpdk";
}

constexpr const char* kOther = "srdmamemifpeer";

// Connects a memif-style socket (SOCK_SEQPACKET) to path, "@name" for an
// abstract name; 0 or -errno. hello: the first message's length, if any came.
int try_connect(const std::string& path, ssize_t* hello) {
  const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), std::min(path.size(), sizeof(a.sun_path) - 1));
  socklen_t len = sizeof(a);
  if (path[0] == '@') {
    a.sun_path[0] = '\0';
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  }
  int rc = ::connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0 ? 0 : -errno;
  if (rc == 0 && hello != nullptr) {
    pollfd p{s, POLLIN, 0};
    char buf[256];
    *hello = ::poll(&p, 1, 5000) == 1 ? ::recv(s, buf, sizeof(buf), 0) : -1;
  }
  ::close(s);
  return rc;
}

// try_connect in a child process, as uid/gid if given; the child's result.
int connect_as(const LocalUser* user, const std::string& path, ssize_t* hello) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return -errno;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipefd[0]);
    int out[2] = {-EPERM, -1};
    if (user == nullptr || (::setgroups(0, nullptr) == 0 &&
                            ::setgid(user->gid()) == 0 && ::setuid(user->uid()) == 0)) {
      ssize_t h = -1;
      out[0] = try_connect(path, &h);
      out[1] = static_cast<int>(h);
    }
    (void)!::write(pipefd[1], out, sizeof(out));
    ::_exit(0);
  }
  ::close(pipefd[1]);
  int out[2] = {-ECHILD, -1};
  if (::read(pipefd[0], out, sizeof(out)) != static_cast<ssize_t>(sizeof(out))) out[0] = -ECHILD;
  ::close(pipefd[0]);
  int st = 0;
  ::waitpid(child, &st, 0);
  if (hello != nullptr) *hello = out[1];
  return out[0];
}

TEST(MemifPrivate, OnlyThisUserReachesAProcesssMemifSocket) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to make the other user";
  LocalUser other(kOther);
  ASSERT_TRUE(other.ok()) << "useradd failed";
  char tmpl[] = "/tmp/softrdma-memif-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ::setenv("FI_SOFTRDMA_RUNDIR", dir.c_str(), 1);

  // A listening application: the mesh opened its memif socket as it started.
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const std::string path = dir + "/" + std::to_string(::getpid()) + ".memif";
  struct stat st{};
  if (!over_mesh()) {
    EXPECT_NE(::lstat(path.c_str(), &st), 0) << "kernel TCP made " << path;
    EXPECT_EQ(connect_as(&other, "@softrdma-" + std::to_string(::getpid()), nullptr),
              -ECONNREFUSED);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return;
  }
  ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
  EXPECT_TRUE(S_ISSOCK(st.st_mode));

  // This user: connected, and memif's HELLO arrives.
  ssize_t hello = -1;
  EXPECT_EQ(connect_as(nullptr, path, &hello), 0);
  EXPECT_GT(hello, 0) << "no memif HELLO on " << path;

  // Another user: the directory keeps it out before memif sees anything.
  hello = -1;
  EXPECT_EQ(connect_as(&other, path, &hello), -EACCES);
  EXPECT_EQ(hello, -1);
  // Nor is the old abstract name served, under which anyone could.
  EXPECT_EQ(connect_as(&other, "@softrdma-" + std::to_string(::getpid()), nullptr),
            -ECONNREFUSED);
  EXPECT_EQ(connect_as(&other, "@" + path, nullptr), -ECONNREFUSED);
  // The mesh lives until exit (its files go then, fi_rundir_test): only the
  // directory is left to the test.
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace fit
