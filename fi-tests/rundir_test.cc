// The run directory of the on-host mesh (FI_SOFTRDMA_RUNDIR here, a fresh
// one): each process of the DPDK path keeps its control socket there and a
// file per listening port. Processes that exit, normally or killed, must
// not leave them behind: an exiting process takes its own, and the next one
// to start sweeps what a killed one left. Over kernel TCP nothing is made.
// A directory another local user made first is refused.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "fi-tests/fi_test.h"
#include "stack/tests/local_user.h"

namespace fit {
namespace {

constexpr size_t kLen = 4096;

bool over_mesh() {
  const char* t = std::getenv("FI_SOFTRDMA_TRANSPORT");
  return t == nullptr || std::string(t) == "dpdk";
}

// Waits for the parent's word (or its end) before returning.
void wait_parent(int fd) {
  std::vector<uint8_t> go;
  recv_blob(fd, &go, kWaitMs * 4);
}

// Listens, tells the parent where, takes one message, exits when told.
int server(int fd) {
  Fabric f;
  f.listen();
  if (::testing::Test::HasFailure()) return 1;
  if (!send_blob(fd, &f.addr(), sizeof(sockaddr_in))) return 2;
  auto ep = accept_and_receive(f, kLen, 9);
  if (!ep) return 3;
  const uint8_t ok = 1;
  if (!send_blob(fd, &ok, 1)) return 4;
  wait_parent(fd);
  return 0;
}
FIT_CHILD(server, server);

// Connects to the address the parent gives, sends one message, exits when told.
int client(int fd) {
  std::vector<uint8_t> addr;
  if (!recv_blob(fd, &addr) || addr.size() != sizeof(sockaddr_in)) return 2;
  Fabric f;
  auto ep = connect_and_send(f, addr.data(), kLen, 9);
  const uint8_t ok = 1;
  if (!send_blob(fd, &ok, 1)) return 3;
  wait_parent(fd);
  return 0;
}
FIT_CHILD(client, client);

// Listens until it is killed.
int lingerer(int fd) {
  Fabric f;
  f.listen();
  if (::testing::Test::HasFailure()) return 1;
  if (!send_blob(fd, &f.addr(), sizeof(sockaddr_in))) return 2;
  wait_parent(fd);
  return 0;
}
FIT_CHILD(lingerer, lingerer);

// Starts the transport and exits.
int starter(int) {
  Fabric f;
  return f.fabric() ? 0 : 1;
}
FIT_CHILD(starter, starter);

constexpr const char* kWant = "FIT_RUNDIR_WANT";

// Run as another user by Rundir.AnotherUsersDirectoryIsRefused: the fabric
// must fail to start (want "refuse") or start and carry a connection ("ok").
int victim(int) {
  const char* want = std::getenv(kWant);
  if (want == nullptr) return 2;
  if (std::string(want) == "ok") {
    Fabric f;
    std::unique_ptr<Endpoint> c, s;
    f.connect(&c, &s);
    return ::testing::Test::HasFailure() ? 3 : 0;
  }
  Info list;
  if (getinfo(msg_hints().get(), &list) != 0) return 4;
  fid_fabric* fab = nullptr;
  const int rc = fi_fabric(list->fabric_attr, &fab, nullptr);
  if (fab) fi_close(&fab->fid);
  return rc == -FI_ENODEV ? 0 : 5;
}
FIT_CHILD(victim, victim);

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

std::string list(const std::set<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += " " + n;
  return s.empty() ? " (empty)" : s;
}

std::string port_file(const std::vector<uint8_t>& addr) {
  sockaddr_in a{};
  std::memcpy(&a, addr.data(), sizeof(a));
  return "port-" + std::to_string(ntohs(a.sin_port));
}

class Rundir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/softrdma-rundir-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::setenv("FI_SOFTRDMA_RUNDIR", dir_.c_str(), 1);  // the children's
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // While a process runs over the mesh, its files are there to be seen.
  void expect_files_of(pid_t pid, const std::string& port) {
    const std::set<std::string> now = entries(dir_);
    if (!over_mesh()) {
      EXPECT_TRUE(now.empty()) << "kernel TCP made files:" << list(now);
      return;
    }
    EXPECT_TRUE(now.count(std::to_string(pid) + ".ctl")) << list(now);
    // Its memif socket: a file here, not an abstract name (any user's).
    const std::string memif = dir_ + "/" + std::to_string(pid) + ".memif";
    struct stat st{};
    EXPECT_TRUE(::lstat(memif.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) << list(now);
    if (!port.empty()) {
      EXPECT_TRUE(now.count(port)) << list(now);
    }
  }
  void expect_empty(const char* when) {
    const std::set<std::string> now = entries(dir_);
    EXPECT_TRUE(now.empty()) << when << ":" << list(now);
  }

  std::string dir_;
};

TEST_F(Rundir, ExitedProcessesLeaveNothing) {
  int sfd, cfd;
  pid_t srv = spawn("server", &sfd);
  std::vector<uint8_t> addr, ok;
  ASSERT_TRUE(recv_blob(sfd, &addr));
  pid_t cli = spawn("client", &cfd);
  ASSERT_TRUE(send_blob(cfd, addr.data(), addr.size()));
  ASSERT_TRUE(recv_blob(cfd, &ok));
  ASSERT_TRUE(recv_blob(sfd, &ok));
  expect_files_of(srv, port_file(addr));
  expect_files_of(cli, "");
  // Both return from main: exit handlers run, nothing is torn down by hand.
  ASSERT_TRUE(send_blob(sfd, "x", 1));
  ASSERT_TRUE(send_blob(cfd, "x", 1));
  EXPECT_TRUE(child_ok(cli));
  EXPECT_TRUE(child_ok(srv));
  ::close(sfd);
  ::close(cfd);
  expect_empty("after a server and a client exited");
}

TEST_F(Rundir, NextStartSweepsAKilledProcess) {
  int fd;
  pid_t victim = spawn("lingerer", &fd);
  std::vector<uint8_t> addr;
  ASSERT_TRUE(recv_blob(fd, &addr));
  expect_files_of(victim, port_file(addr));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(victim, &st, 0), victim);
  ::close(fd);
  // A killed process runs no exit handler: its files stay until the next
  // process of this user starts.
  if (over_mesh()) {
    EXPECT_TRUE(entries(dir_).count(std::to_string(victim) + ".ctl")) << list(entries(dir_));
    EXPECT_TRUE(entries(dir_).count(std::to_string(victim) + ".memif")) << list(entries(dir_));
  }
  int sfd;
  pid_t next = spawn("starter", &sfd);
  EXPECT_TRUE(child_ok(next));
  ::close(sfd);
  expect_empty("after the next start");
}

// Another local user made the victim's /tmp/softrdma-<uid> first: over the
// DPDK path the victim's transport refuses it, by name, and does not start;
// once it is gone, the victim starts in a directory of its own. (The kernel
// transport has no use for the directory, and leaves it alone.)
TEST_F(Rundir, AnotherUsersDirectoryIsRefused) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to make the two users";
  softrdma::test::LocalUser victim_user("srdmavictim"), attacker("srdmaattacker");
  ASSERT_TRUE(victim_user.ok() && attacker.ok()) << "useradd failed";
  const std::string dir = "/tmp/softrdma-" + std::to_string(victim_user.uid());
  const std::string err = dir_ + "/victim.err";  // root's: the victim's stderr, via the shell
  std::filesystem::remove_all(dir);
  auto start = [&](const char* want) {
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe");
    const int rc = std::system((victim_user.as() + "env -u FI_SOFTRDMA_RUNDIR -u XDG_RUNTIME_DIR " +
                                kWant + "=" + want + " " + exe +
                                " --fit-child=victim --fit-fd=0 >/dev/null 2>" + err)
                                   .c_str());
    std::ifstream f(err);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::filesystem::remove(err);
    EXPECT_EQ(rc, 0) << "the victim's start (" << want << ") went otherwise: " << text;
    return text;
  };
  ASSERT_EQ(std::system((attacker.as() + "sh -c 'mkdir -m 777 " + dir + " && chmod 777 " + dir +
                         "'").c_str()),
            0);
  const std::string text = start(over_mesh() ? "refuse" : "ok");
  if (over_mesh()) {
    EXPECT_NE(text.find("refusing rendezvous directory " + dir + ": it belongs to uid " +
                        std::to_string(attacker.uid())),
              std::string::npos)
        << text;
  }
  EXPECT_TRUE(entries(dir).empty()) << list(entries(dir));
  std::filesystem::remove_all(dir);

  start("ok");
  struct stat st{};
  if (over_mesh()) {
    ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, victim_user.uid());
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_TRUE(entries(dir).empty()) << list(entries(dir));
  } else {
    EXPECT_NE(::lstat(dir.c_str(), &st), 0) << "the kernel transport made " << dir;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fit
