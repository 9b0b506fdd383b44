#include "fi-tests/fi_test.h"

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

namespace fit {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t next(uint64_t* s) {  // xorshift64*
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545f4914f6cdd1dULL;
}

}  // namespace

Info msg_hints(uint64_t caps) {
  Info h(fi_allocinfo());
  h->caps = caps;
  h->mode = FI_CONTEXT | FI_RX_CQ_DATA;
  h->ep_attr->type = FI_EP_MSG;
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->fabric_attr->prov_name = strdup(kProv);
  h->addr_format = FI_SOCKADDR_IN;
  return h;
}

Info rdm_hints(uint64_t caps) {
  Info h(fi_allocinfo());
  h->caps = caps;
  h->mode = FI_CONTEXT;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->domain_attr->av_type = FI_AV_MAP;
  h->fabric_attr->prov_name = strdup(kRxmProv);
  return h;
}

int getinfo(const fi_info* hints, Info* out, const char* node, const char* service, uint64_t flags,
            uint32_t version) {
  fi_info* list = nullptr;
  int rc = fi_getinfo(version, node, service, flags, hints, &list);
  out->reset(rc == 0 ? list : nullptr);
  return rc;
}

bool poll_until(const std::function<bool()>& step, int timeout_ms) {
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (step()) return true;
    if (Clock::now() >= end) return false;
  }
}

ssize_t eq_wait(fid_eq* eq, uint32_t* event, void* buf, size_t len, fi_eq_err_entry* err,
                int timeout_ms) {
  ssize_t rd = -FI_EAGAIN;
  poll_until(
      [&] {
        rd = fi_eq_read(eq, event, buf, len, 0);
        return rd != -FI_EAGAIN;
      },
      timeout_ms);
  if (rd == -FI_EAVAIL && err) {
    EXPECT_EQ(fi_eq_readerr(eq, err, 0), static_cast<ssize_t>(sizeof(*err)));
  }
  return rd;
}

ssize_t cq_wait(fid_cq* cq, fi_cq_data_entry* e, fi_cq_err_entry* err, int timeout_ms) {
  ssize_t rd = -FI_EAGAIN;
  poll_until(
      [&] {
        rd = fi_cq_read(cq, e, 1);
        return rd != -FI_EAGAIN;
      },
      timeout_ms);
  if (rd == -FI_EAVAIL) {
    fi_cq_err_entry tmp{};
    EXPECT_EQ(fi_cq_readerr(cq, err ? err : &tmp, 0), 1);
  }
  return rd;
}

bool cq_quiet(fid_cq* cq, int ms) {
  fi_cq_data_entry e;
  return !poll_until([&] { return fi_cq_read(cq, &e, 1) != -FI_EAGAIN; }, ms);
}

void fill(void* p, size_t n, uint64_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = next(&s);
    std::memcpy(b + i, &v, 8);
  }
  if (i == n) return;
  uint64_t v = next(&s);
  std::memcpy(b + i, &v, n - i);
}

::testing::AssertionResult same(const void* p, size_t n, uint64_t seed) {
  std::vector<uint8_t> want(n);
  fill(want.data(), n, seed);
  if (n == 0 || std::memcmp(p, want.data(), n) == 0) return ::testing::AssertionSuccess();
  const auto* b = static_cast<const uint8_t*>(p);
  size_t i = 0;
  while (b[i] == want[i]) ++i;
  return ::testing::AssertionFailure() << "data differs at byte " << i << " of " << n;
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

uint16_t dead_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

Endpoint::~Endpoint() {
  // The endpoint first: it names the CQs and the EQ.
  for (fid* f : {ep ? &ep->fid : nullptr, tx ? &tx->fid : nullptr,
                 rx && rx != tx ? &rx->fid : nullptr, eq ? &eq->fid : nullptr}) {
    if (f) {
      EXPECT_EQ(fi_close(f), 0);
    }
  }
}

Fabric::Fabric(Info hints) {
  Info list;
  int rc = getinfo(hints.get(), &list);
  EXPECT_EQ(rc, 0) << fi_strerror(-rc);
  if (rc != 0) return;
  info_.reset(fi_dupinfo(list.get()));
  EXPECT_EQ(fi_fabric(info_->fabric_attr, &fabric_, nullptr), 0);
  EXPECT_EQ(fi_domain(fabric_, info_.get(), &domain_, nullptr), 0);
}

Fabric::~Fabric() {
  if (pep_) {
    EXPECT_EQ(fi_close(&pep_->fid), 0);
  }
  if (pep_eq_) {
    EXPECT_EQ(fi_close(&pep_eq_->fid), 0);
  }
  if (domain_) {
    EXPECT_EQ(fi_close(&domain_->fid), 0);
  }
  if (fabric_) {
    EXPECT_EQ(fi_close(&fabric_->fid), 0);
  }
}

void Fabric::listen() {
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_UNSPEC;
  ASSERT_EQ(fi_eq_open(fabric_, &ea, &pep_eq_, nullptr), 0);
  ASSERT_EQ(fi_passive_ep(fabric_, info_.get(), &pep_, nullptr), 0);
  ASSERT_EQ(fi_pep_bind(pep_, &pep_eq_->fid, 0), 0);
  ASSERT_EQ(fi_listen(pep_), 0);
  size_t len = sizeof(addr_);
  ASSERT_EQ(fi_getname(&pep_->fid, &addr_, &len), 0);
  ASSERT_EQ(len, sizeof(sockaddr_in));
  ASSERT_NE(addr_.sin_port, 0);
}

std::unique_ptr<Endpoint> Fabric::open_ep(fi_info* info, const EpOptions& o) {
  auto e = std::make_unique<Endpoint>();
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_UNSPEC;
  EXPECT_EQ(fi_eq_open(fabric_, &ea, &e->eq, nullptr), 0);
  fi_cq_attr ca{};
  ca.format = FI_CQ_FORMAT_DATA;
  ca.wait_obj = o.wait;
  ca.size = o.cq_size;
  EXPECT_EQ(fi_cq_open(domain_, &ca, &e->tx, nullptr), 0);
  EXPECT_EQ(fi_cq_open(domain_, &ca, &e->rx, nullptr), 0);
  EXPECT_EQ(fi_endpoint(domain_, info, &e->ep, e.get()), 0);
  if (!e->ep) return e;
  EXPECT_EQ(fi_ep_bind(e->ep, &e->eq->fid, 0), 0);
  EXPECT_EQ(fi_ep_bind(e->ep, &e->tx->fid, o.tx_bind), 0);
  EXPECT_EQ(fi_ep_bind(e->ep, &e->rx->fid, o.rx_bind), 0);
  EXPECT_EQ(fi_enable(e->ep), 0);
  return e;
}

fid_mr* Fabric::reg(void* buf, size_t len, uint64_t access) {
  fid_mr* mr = nullptr;
  EXPECT_EQ(fi_mr_reg(domain_, buf, len, access, 0, 0, 0, &mr, nullptr), 0);
  return mr;
}

Info wait_connreq(fid_eq* eq, std::vector<uint8_t>* data) {
  std::vector<uint8_t> buf(sizeof(fi_eq_cm_entry) + 1024);
  uint32_t event = 0;
  fi_eq_err_entry err{};
  ssize_t rd = eq_wait(eq, &event, buf.data(), buf.size(), &err);
  EXPECT_GE(rd, static_cast<ssize_t>(sizeof(fi_eq_cm_entry)))
      << fi_strerror(static_cast<int>(-rd)) << " err " << err.err;
  if (rd < static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) return nullptr;
  EXPECT_EQ(event, FI_CONNREQ);
  auto* e = reinterpret_cast<fi_eq_cm_entry*>(buf.data());
  if (data) data->assign(buf.data() + sizeof(*e), buf.data() + rd);
  return Info(e->info);
}

::testing::AssertionResult wait_connected(fid_eq* eq, fid_ep* ep, std::vector<uint8_t>* data) {
  std::vector<uint8_t> buf(sizeof(fi_eq_cm_entry) + 1024);
  uint32_t event = 0;
  fi_eq_err_entry err{};
  ssize_t rd = eq_wait(eq, &event, buf.data(), buf.size(), &err);
  if (rd < static_cast<ssize_t>(sizeof(fi_eq_cm_entry)))
    return ::testing::AssertionFailure()
           << "no FI_CONNECTED: " << fi_strerror(static_cast<int>(-rd)) << " (err " << err.err
           << ")";
  auto* e = reinterpret_cast<fi_eq_cm_entry*>(buf.data());
  if (event != FI_CONNECTED) return ::testing::AssertionFailure() << "event " << event;
  if (e->fid != &ep->fid) return ::testing::AssertionFailure() << "FI_CONNECTED for another fid";
  if (data) data->assign(buf.data() + sizeof(*e), buf.data() + rd);
  return ::testing::AssertionSuccess();
}

void Fabric::connect(std::unique_ptr<Endpoint>* client, std::unique_ptr<Endpoint>* server,
                     const std::vector<uint8_t>& cdata, const std::vector<uint8_t>& adata,
                     const EpOptions& o) {
  connect_unread(client, server, cdata, adata, o);
  if (::testing::Test::HasFatalFailure()) return;
  std::vector<uint8_t> back;
  ASSERT_TRUE(wait_connected((*client)->eq, (*client)->ep, &back));
  EXPECT_EQ(back, adata);
  ASSERT_TRUE(wait_connected((*server)->eq, (*server)->ep));
}

void Fabric::connect_unread(std::unique_ptr<Endpoint>* client, std::unique_ptr<Endpoint>* server,
                            const std::vector<uint8_t>& cdata, const std::vector<uint8_t>& adata,
                            const EpOptions& o) {
  if (!pep_) {
    listen();
    if (::testing::Test::HasFatalFailure()) return;
  }
  *client = open_ep(info_.get(), o);
  ASSERT_NE((*client)->ep, nullptr);
  ASSERT_EQ(fi_connect((*client)->ep, &addr_, cdata.empty() ? nullptr : cdata.data(), cdata.size()),
            0);
  std::vector<uint8_t> got;
  Info req = wait_connreq(pep_eq_, &got);
  ASSERT_TRUE(req);
  EXPECT_EQ(got, cdata);
  *server = open_ep(req.get(), o);
  ASSERT_NE((*server)->ep, nullptr);
  ASSERT_EQ(fi_accept((*server)->ep, adata.empty() ? nullptr : adata.data(), adata.size()), 0);
}

std::unique_ptr<Endpoint> connect_and_send(Fabric& f, const void* addr, size_t len,
                                           uint64_t seed) {
  auto ep = f.open_ep(f.info());
  if (ep->ep == nullptr) return ep;
  EXPECT_EQ(fi_connect(ep->ep, addr, nullptr, 0), 0);
  if (!wait_connected(ep->eq, ep->ep)) {
    ADD_FAILURE() << "not connected";
    return ep;
  }
  std::vector<uint8_t> buf(len);
  fill(buf.data(), len, seed);
  EXPECT_EQ(fi_send(ep->ep, buf.data(), len, nullptr, 0, nullptr), 0);
  fi_cq_data_entry e;
  EXPECT_EQ(cq_wait(ep->tx, &e), 1);
  return ep;
}

std::unique_ptr<Endpoint> accept_and_receive(Fabric& f, size_t len, uint64_t seed, int stall_ms) {
  Info req = wait_connreq(f.pep_eq());
  if (!req) return nullptr;
  auto ep = f.open_ep(req.get());
  std::vector<uint8_t> buf(len);
  EXPECT_EQ(fi_recv(ep->ep, buf.data(), len, nullptr, 0, nullptr), 0);
  EXPECT_EQ(fi_accept(ep->ep, nullptr, 0), 0);
  if (!wait_connected(ep->eq, ep->ep)) {
    ADD_FAILURE() << "not connected";
    return ep;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
  fi_cq_data_entry e{};
  fi_cq_err_entry err{};
  EXPECT_EQ(cq_wait(ep->rx, &e, &err), 1) << "receive failed: " << fi_strerror(err.err);
  EXPECT_EQ(e.len, len);
  EXPECT_TRUE(same(buf.data(), len, seed));
  return ep;
}

namespace {

std::map<std::string, ChildFn>& children() {
  static std::map<std::string, ChildFn> m;
  return m;
}

}  // namespace

ChildRegistrar::ChildRegistrar(const char* name, ChildFn fn) { children()[name] = fn; }

pid_t spawn(const char* name, int* parent_fd) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  EXPECT_TRUE(children().count(name)) << name;
  std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::string child_arg = std::string("--fit-child=") + name;
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::dup(sv[1]);  // without CLOEXEC: survives the exec
    std::string fd_arg = "--fit-fd=" + std::to_string(fd);
    ::execl(self.c_str(), self.c_str(), child_arg.c_str(), fd_arg.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(sv[1]);
  *parent_fd = sv[0];
  return pid;
}

::testing::AssertionResult child_ok(pid_t pid, int timeout_ms) {
  int status = 0;
  bool done = poll_until(
      [&] {
        if (::waitpid(pid, &status, WNOHANG) == pid) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return false;
      },
      timeout_ms);
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return ::testing::AssertionFailure() << "child timed out";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return ::testing::AssertionFailure() << "child failed, status " << status;
  return ::testing::AssertionSuccess();
}

bool send_blob(int fd, const void* p, size_t n) {
  uint32_t len = static_cast<uint32_t>(n);
  return ::write(fd, &len, 4) == 4 && ::write(fd, p, n) == static_cast<ssize_t>(n);
}

bool recv_blob(int fd, std::vector<uint8_t>* out, int timeout_ms) {
  auto read_all = [&](void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
      ssize_t r = ::read(fd, b, n);
      if (r <= 0) return false;
      b += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  };
  uint32_t len = 0;
  if (!read_all(&len, 4)) return false;
  out->resize(len);
  return read_all(out->data(), len);
}

}  // namespace fit

namespace fit {

void Connected::notify(Endpoint& from, Endpoint& to) {
  static char ctx_rx, ctx_tx;
  ASSERT_EQ(fi_recv(to.ep, nullptr, 0, nullptr, 0, &ctx_rx), 0);
  ASSERT_EQ(fi_send(from.ep, nullptr, 0, nullptr, 0, &ctx_tx), 0);
  fi_cq_data_entry e;
  ASSERT_EQ(cq_wait(to.rx, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_rx);
  EXPECT_EQ(e.len, 0u);
  ASSERT_EQ(cq_wait(from.tx, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_tx);
}

}  // namespace fit

// The test binaries' main: googletest, or a child entry (see spawn()).
int main(int argc, char** argv) {
  if (argc == 3 && std::strncmp(argv[1], "--fit-child=", 12) == 0) {
    auto it = fit::children().find(argv[1] + 12);
    if (it == fit::children().end()) return 126;
    int fd = std::atoi(argv[2] + std::strlen("--fit-fd="));
    int rc = it->second(fd);
    return rc ? rc : (::testing::Test::HasFailure() ? 1 : 0);
  }
  // A child that died early makes the test's next write to it fail (EPIPE),
  // reported by the assertion on that write, instead of killing the test.
  ::signal(SIGPIPE, SIG_IGN);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
