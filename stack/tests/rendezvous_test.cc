// The local rendezvous takes link requests only from the process they
// name: a process of this user that forges another's pid (a BYE would
// make us reset that process's connections) is refused, and counted. It
// leaves no files behind and sweeps those of dead processes, and it can
// reserve a port that kernel connections in TIME-WAIT still hold.
#include "stack/net/rendezvous.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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
    send_raw(dir, rv.pid(), "LINK " + b + " " + b + ".memif");
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

// A fresh run directory in FI_SOFTRDMA_RUNDIR; removed at the end.
struct TempRundir {
  TempRundir() {
    char tmpl[] = "/tmp/softrdma-rv-XXXXXX";
    if (::mkdtemp(tmpl)) dir = tmpl;
    ::setenv("FI_SOFTRDMA_RUNDIR", dir.c_str(), 1);
  }
  ~TempRundir() { std::system(("rm -rf " + dir).c_str()); }
  void put(const std::string& name, const std::string& text) const {
    std::ofstream(dir + "/" + name) << text;
  }
  bool has(const std::string& name) const { return ::access((dir + "/" + name).c_str(), F_OK) == 0; }
  std::string dir;
};

pid_t dead_pid() {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return p;
}

TEST(Rendezvous, StartSweepsOnlyWhatDeadProcessesLeft) {
  TempRundir run;
  ASSERT_FALSE(run.dir.empty());
  const std::string dead = std::to_string(dead_pid());
  const std::string live = std::to_string(::getppid());
  run.put(dead + ".ctl", "");
  run.put(dead + ".memif", "");
  run.put("port-1001", dead + "\n");
  run.put("port-1002.tmp" + dead, dead + "\n");
  run.put(live + ".ctl", "");
  run.put(live + ".memif", "");
  run.put("port-1003", live + "\n");
  run.put("port-1004.tmp" + live, live + "\n");
  run.put("port-1005", "");  // not (yet) a pid: left alone
  run.put("notes", dead);
  Rendezvous rv;
  ASSERT_TRUE(rv.ok());
  EXPECT_FALSE(run.has(dead + ".ctl"));
  EXPECT_FALSE(run.has(dead + ".memif"));
  EXPECT_FALSE(run.has("port-1001"));
  EXPECT_FALSE(run.has("port-1002.tmp" + dead));
  for (const std::string& kept :
       {live + ".ctl", live + ".memif", std::string("port-1003"), "port-1004.tmp" + live, std::string("port-1005"),
        std::string("notes")})
    EXPECT_TRUE(run.has(kept)) << kept;
}

TEST(Rendezvous, DestroyedOrNotItsFilesGo) {
  TempRundir run;
  ASSERT_FALSE(run.dir.empty());
  uint16_t port = 0;
  {
    Rendezvous rv;
    ASSERT_TRUE(rv.ok());
    ASSERT_EQ(rv.reserve_and_publish(&port), 0);
    EXPECT_TRUE(run.has(std::to_string(::getpid()) + ".ctl"));
    EXPECT_TRUE(run.has("port-" + std::to_string(port)));
  }
  EXPECT_FALSE(run.has(std::to_string(::getpid()) + ".ctl"));
  EXPECT_FALSE(run.has("port-" + std::to_string(port)));
  // One that lives until exit (as the mesh's does) is gone after it.
  pid_t child = ::fork();
  if (child == 0) {
    auto* rv = new Rendezvous;  // never destroyed
    uint16_t p = 0;
    // Its memif socket, as DPDK's memif server makes it.
    std::ofstream(rv->link_socket(rv->pid())) << "";
    std::exit(rv->ok() && rv->reserve_and_publish(&p) == 0 ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  DIR* d = ::opendir(run.dir.c_str());
  ASSERT_NE(d, nullptr);
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ADD_FAILURE() << "left: " << e->d_name;
  }
  ::closedir(d);
}

// Unix socket paths have at most 107 octets: a run directory too long for
// this host's socket names is refused, saying so, not cut short.
TEST(Rendezvous, RefusesADirectoryTooLongForItsSockets) {
  TempRundir run;
  ASSERT_FALSE(run.dir.empty());
  const std::string dir = run.dir + "/" + std::string(100, 'd');
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ::setenv("FI_SOFTRDMA_RUNDIR", dir.c_str(), 1);
  ::testing::internal::CaptureStderr();
  {
    Rendezvous rv;
    EXPECT_FALSE(rv.ok());
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(dir), std::string::npos) << err;
  EXPECT_NE(err.find("too long for a Unix socket"), std::string::npos) << err;
  ::setenv("FI_SOFTRDMA_RUNDIR", run.dir.c_str(), 1);
  ::rmdir(dir.c_str());
}

// The port of kernel connections in TIME-WAIT can be reserved, and is then
// ours alone: no other reservation (which binds past TIME-WAIT the same
// way) or kernel socket takes it.
TEST(Rendezvous, ReservesAPortInTimeWaitAndKeepsIt) {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  ASSERT_EQ(::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(ls, 1), 0);
  ASSERT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len), 0);
  int c = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  int srv = ::accept(ls, nullptr, nullptr);
  ASSERT_GE(srv, 0);
  ::close(srv);  // closes first: TIME-WAIT on the listener's port
  char b;
  EXPECT_EQ(::read(c, &b, 1), 0);
  ::close(c);
  ::close(ls);

  uint16_t port = ntohs(a.sin_port);
  TempRundir one;
  Rendezvous rv;
  ASSERT_TRUE(rv.ok());
  ASSERT_EQ(rv.reserve_and_publish(&port), 0);
  EXPECT_EQ(port, ntohs(a.sin_port));
  TempRundir two;
  Rendezvous other;
  ASSERT_TRUE(other.ok());
  uint16_t same = port;
  EXPECT_EQ(other.reserve_and_publish(&same), -EADDRINUSE);
  int k = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::setsockopt(k, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)), 0);
  EXPECT_NE(::bind(k, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ::close(k);
}

}  // namespace
}  // namespace softrdma::net
