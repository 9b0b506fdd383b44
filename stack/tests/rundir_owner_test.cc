// A user's rendezvous directory (/tmp/softrdma-<uid> when there is no
// $XDG_RUNTIME_DIR) is a name in a world-writable directory: another local
// user can make it first, as a directory of their own or as a symbolic link
// to one, and would then receive the victim's control sockets and port
// files. The victim must refuse such a directory by name, and start fine
// once it is gone. Two local users made by the test play the parts (root
// only: the test skips otherwise).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "stack/net/rendezvous.h"
#include "stack/tests/local_user.h"

namespace softrdma::net {
namespace {

namespace fs = std::filesystem;

constexpr const char* kVictim = "srdmavictim";
constexpr const char* kAttacker = "srdmaattacker";
constexpr const char* kRole = "SOFTRDMA_RUNDIR_VICTIM";  // set in the victim only

// The victim's side: with kRole set (by the test below, running this binary
// as the victim user), the process starts a rendezvous and exits before any
// test runs: 0 when the outcome was the one wanted ("ok" or "refuse").
const bool kVictimMode = [] {
  const char* want = std::getenv(kRole);
  if (want == nullptr) return false;
  bool ok;
  {
    Rendezvous rv;
    ok = rv.ok();
  }
  std::exit(ok == (std::string(want) == "ok") ? 0 : 1);
}();

int run(const std::string& cmd) { return std::system(cmd.c_str()); }

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class RundirOwner : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(kVictimMode);
    if (::getuid() != 0) GTEST_SKIP() << "needs root to make the two users";
    victim_ = std::make_unique<test::LocalUser>(kVictim);
    attacker_ = std::make_unique<test::LocalUser>(kAttacker);
    ASSERT_TRUE(victim_->ok() && attacker_->ok()) << "useradd failed";
    dir_ = "/tmp/softrdma-" + std::to_string(victim_->uid());
    bait_ = "/tmp/softrdma-bait-" + std::to_string(attacker_->uid());
    xdg_ = "/tmp/softrdma-xdg-" + std::to_string(victim_->uid());
    clean();
  }
  void TearDown() override { clean(); }
  void clean() {
    std::error_code ec;
    for (const std::string& p : {dir_, bait_, xdg_}) fs::remove_all(p, ec);
  }

  // The victim starts a rendezvous with no configured directory; want: "ok"
  // or "refuse". Returns its stderr.
  std::string start_victim(const char* want, const std::string& xdg = "") {
    const std::string err = "/tmp/softrdma-victim-err-" + std::to_string(::getpid());
    const std::string exe = fs::read_symlink("/proc/self/exe");
    const std::string env = "env -u FI_SOFTRDMA_RUNDIR -u XDG_RUNTIME_DIR " +
                            (xdg.empty() ? "" : "XDG_RUNTIME_DIR=" + xdg + " ") + kRole + "=" +
                            want + " ";
    EXPECT_EQ(run(victim_->as() + env + exe + " >/dev/null 2>" +
                  err),
              0)
        << "the victim's start did not go as wanted (" << want << "): " << slurp(err);
    std::string out = slurp(err);
    fs::remove(err);
    return out;
  }
  // Nothing of the victim's may be in the attacker's directory.
  void expect_untouched(const std::string& dir) {
    for (const auto& e : fs::directory_iterator(dir)) ADD_FAILURE() << "left there: " << e.path();
  }

  std::unique_ptr<test::LocalUser> victim_, attacker_;
  std::string dir_, bait_, xdg_;
};

TEST_F(RundirOwner, RefusesADirectoryAnotherUserMadeFirst) {
  ASSERT_EQ(run(attacker_->as() + "sh -c 'mkdir -m 777 " + dir_ + " && chmod 777 " + dir_ + "'"),
            0);
  const std::string err = start_victim("refuse");
  EXPECT_NE(err.find(dir_), std::string::npos) << err;
  EXPECT_NE(err.find("belongs to uid " + std::to_string(attacker_->uid())), std::string::npos)
      << err;
  expect_untouched(dir_);
}

TEST_F(RundirOwner, RefusesASymbolicLinkAnotherUserMadeFirst) {
  ASSERT_EQ(run(attacker_->as() + "sh -c 'mkdir -m 777 " + bait_ + " && chmod 777 " + bait_ +
                " && ln -s " + bait_ + " " + dir_ + "'"),
            0);
  const std::string err = start_victim("refuse");
  EXPECT_NE(err.find(dir_), std::string::npos) << err;
  EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
  expect_untouched(bait_);
}

TEST_F(RundirOwner, RefusesItsOwnDirectoryOpenToOthers) {
  ASSERT_EQ(run(victim_->as() + "sh -c 'mkdir " + dir_ + " && chmod 755 " + dir_ + "'"), 0);
  const std::string err = start_victim("refuse");
  EXPECT_NE(err.find(dir_), std::string::npos) << err;
  EXPECT_NE(err.find("mode 0755"), std::string::npos) << err;
}

TEST_F(RundirOwner, CleanStartMakesAPrivateDirectory) {
  EXPECT_EQ(start_victim("ok"), "");
  struct stat st{};
  ASSERT_EQ(::lstat(dir_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_uid, victim_->uid());
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Once the attacker's directory is gone, the victim starts there too.
  clean();
  ASSERT_EQ(run(attacker_->as() + "mkdir -m 777 " + dir_), 0);
  start_victim("refuse");
  clean();
  EXPECT_EQ(start_victim("ok"), "");
}

TEST_F(RundirOwner, UsesXdgRuntimeDir) {
  // The /tmp name is taken, but $XDG_RUNTIME_DIR is the user's own.
  ASSERT_EQ(run(attacker_->as() + "mkdir -m 777 " + dir_), 0);
  ASSERT_EQ(run(victim_->as() + "mkdir -m 700 " + xdg_), 0);
  EXPECT_EQ(start_victim("ok", xdg_), "");
  struct stat st{};
  ASSERT_EQ(::lstat((xdg_ + "/softrdma").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, victim_->uid());
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  expect_untouched(dir_);
}

TEST_F(RundirOwner, FallsBackWhenXdgRuntimeDirIsNotWritable) {
  // Root's directory, where the victim can make nothing: /tmp/softrdma-<uid>.
  ASSERT_EQ(run("mkdir -m 755 " + xdg_), 0);
  EXPECT_EQ(start_victim("ok", xdg_), "");
  struct stat st{};
  ASSERT_EQ(::lstat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, victim_->uid());
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace softrdma::net
