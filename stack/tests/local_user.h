// A second local user for tests that play another user of the host: made
// with useradd (a system user, no home) unless it exists, removed again if
// the test made it. Commands run as it through setpriv. Needs root.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace softrdma::test {

class LocalUser {
 public:
  explicit LocalUser(const std::string& name) : name_(name) {
    if (!lookup() && std::system(("useradd --system --no-create-home --shell /usr/sbin/nologin " +
                                  name_ + " >/dev/null 2>&1").c_str()) == 0) {
      made_ = lookup();
    }
  }
  ~LocalUser() {
    if (made_) (void)!std::system(("userdel " + name_ + " >/dev/null 2>&1").c_str());
  }
  LocalUser(const LocalUser&) = delete;
  LocalUser& operator=(const LocalUser&) = delete;

  bool ok() const { return ok_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  // A shell command prefix that runs what follows as this user.
  std::string as() const {
    return "setpriv --reuid=" + std::to_string(uid_) + " --regid=" + std::to_string(gid_) +
           " --clear-groups -- ";
  }

 private:
  bool lookup() {
    const passwd* p = ::getpwnam(name_.c_str());
    if (p == nullptr) return false;
    uid_ = p->pw_uid;
    gid_ = p->pw_gid;
    ok_ = true;
    return true;
  }
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool ok_ = false;
  bool made_ = false;
};

}  // namespace softrdma::test
