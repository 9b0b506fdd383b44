// Shared helpers for the provider tests. Only libfabric's public API is used
// here: the tests see softrdma exactly as an application does (loaded from
// FI_PROVIDER_PATH, selected by FI_PROVIDER / prov_name).
//
// Every wait is bounded (kWaitMs); a hang becomes a failed expectation, and
// ctest's TIMEOUT catches anything else.
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fit {

inline constexpr uint32_t kVersion = FI_VERSION(1, 17);
inline constexpr int kWaitMs = 30000;
inline constexpr const char* kProv = "softrdma";
inline constexpr const char* kRxmProv = "softrdma;ofi_rxm";

struct InfoDeleter {
  void operator()(fi_info* i) const { fi_freeinfo(i); }
};
using Info = std::unique_ptr<fi_info, InfoDeleter>;

// Closes any fid (fi_close) when it goes out of scope.
template <typename T>
struct FidDeleter {
  void operator()(T* f) const {
    if (f) {
      EXPECT_EQ(fi_close(&f->fid), 0) << "fi_close";
    }
  }
};
template <typename T>
using Fid = std::unique_ptr<T, FidDeleter<T>>;

// Hints for a softrdma FI_EP_MSG endpoint: the given caps, the MR modes an
// RMA application supports, FI_RX_CQ_DATA accepted (for fi_writedata).
Info msg_hints(uint64_t caps = FI_MSG | FI_RMA | FI_ATOMIC);
// Hints for FI_EP_RDM through ofi_rxm over softrdma.
Info rdm_hints(uint64_t caps = FI_TAGGED | FI_MSG);
// fi_getinfo; returns its code and the list in *out.
int getinfo(const fi_info* hints, Info* out, const char* node = nullptr,
            const char* service = nullptr, uint64_t flags = 0, uint32_t version = kVersion);

// Calls step until it returns true or timeout_ms passes.
bool poll_until(const std::function<bool()>& step, int timeout_ms = kWaitMs);

// One EQ event: *event and the entry (with CM data) in buf. Returns what
// fi_eq_read returned (bytes, -FI_EAVAIL with *err filled, -FI_EAGAIN on
// timeout).
ssize_t eq_wait(fid_eq* eq, uint32_t* event, void* buf, size_t len, fi_eq_err_entry* err = nullptr,
                int timeout_ms = kWaitMs);
// One completion, FI_CQ_FORMAT_DATA. Returns 1, -FI_EAVAIL with *err filled
// (err may be null), or -FI_EAGAIN on timeout.
ssize_t cq_wait(fid_cq* cq, fi_cq_data_entry* e, fi_cq_err_entry* err = nullptr,
                int timeout_ms = kWaitMs);
// True if the CQ reports nothing while polled for ms.
bool cq_quiet(fid_cq* cq, int ms);

// Deterministic data: fill with a seed, check against it.
void fill(void* p, size_t n, uint64_t seed);
::testing::AssertionResult same(const void* p, size_t n, uint64_t seed);

// A free TCP port on 127.0.0.1 nobody listens on (bound, then released).
uint16_t dead_port();
sockaddr_in loopback(uint16_t port);

// One MSG endpoint with its own EQ and transmit/receive CQs.
struct Endpoint {
  fid_ep* ep = nullptr;
  fid_eq* eq = nullptr;
  fid_cq* tx = nullptr;
  fid_cq* rx = nullptr;
  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();
};

struct EpOptions {
  uint64_t tx_bind = FI_TRANSMIT;  // | FI_SELECTIVE_COMPLETION
  uint64_t rx_bind = FI_RECV;
  fi_wait_obj wait = FI_WAIT_NONE;
  size_t cq_size = 0;
};

// A fabric, a domain and (after listen()) a passive endpoint with its EQ.
class Fabric {
 public:
  explicit Fabric(Info hints = msg_hints());
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  fi_info* info() const { return info_.get(); }
  fid_fabric* fabric() const { return fabric_; }
  fid_domain* domain() const { return domain_; }
  fid_pep* pep() const { return pep_; }
  fid_eq* pep_eq() const { return pep_eq_; }
  const sockaddr_in& addr() const { return addr_; }

  void listen();
  // Opens, binds and enables an endpoint for info (ours, or a CONNREQ's).
  std::unique_ptr<Endpoint> open_ep(fi_info* info, const EpOptions& o = {});
  fid_mr* reg(void* buf, size_t len, uint64_t access);

  // Client connects to our PEP with cdata; the server side accepts with
  // adata. Both ends see FI_CONNECTED. Receives can be pre-posted by
  // before_accept(server). Asserts on failure (check HasFatalFailure).
  void connect(std::unique_ptr<Endpoint>* client, std::unique_ptr<Endpoint>* server,
               const std::vector<uint8_t>& cdata = {}, const std::vector<uint8_t>& adata = {},
               const EpOptions& o = {});
  // connect() up to fi_accept: both FI_CONNECTED events are left unread.
  void connect_unread(std::unique_ptr<Endpoint>* client, std::unique_ptr<Endpoint>* server,
                      const std::vector<uint8_t>& cdata = {},
                      const std::vector<uint8_t>& adata = {}, const EpOptions& o = {});

 private:
  Info info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_pep* pep_ = nullptr;
  fid_eq* pep_eq_ = nullptr;
  sockaddr_in addr_{};
};

// Waits for FI_CONNREQ on eq; returns its info (owned) and CM data.
Info wait_connreq(fid_eq* eq, std::vector<uint8_t>* data = nullptr);
// Waits for FI_CONNECTED naming ep; returns the CM data that came with it.
::testing::AssertionResult wait_connected(fid_eq* eq, fid_ep* ep,
                                          std::vector<uint8_t>* data = nullptr);

// One message across two processes. The client connects an endpoint of f
// to addr (the server's sockaddr_in) and sends len bytes filled with seed,
// its completion reaped. The server accepts the connection f's listener
// gets, a receive of len bytes posted first, leaves it unpolled for
// stall_ms (a slow reader: the sender's buffers fill), and checks what
// arrives. Both record failures (check HasFailure).
std::unique_ptr<Endpoint> connect_and_send(Fabric& f, const void* addr, size_t len, uint64_t seed);
std::unique_ptr<Endpoint> accept_and_receive(Fabric& f, size_t len, uint64_t seed,
                                             int stall_ms = 0);

// Child processes are fresh executions of the test binary (fork + exec: a
// process that has started DPDK must not fork-and-continue), entering a
// function registered by name. FIT_CHILD(name, fn) registers fn(int fd).
using ChildFn = int (*)(int fd);
struct ChildRegistrar {
  ChildRegistrar(const char* name, ChildFn fn);
};
#define FIT_CHILD(name, fn) static ::fit::ChildRegistrar fit_child_##name(#name, fn)
// Starts child `name` with fd: one end of a socketpair, the parent gets the
// other. Returns the child's pid.
pid_t spawn(const char* name, int* parent_fd);
// Waits (bounded) for the child's exit; its status must be 0.
::testing::AssertionResult child_ok(pid_t pid, int timeout_ms = kWaitMs * 4);
// Length-prefixed blobs over a socket (address exchange).
bool send_blob(int fd, const void* p, size_t n);
bool recv_blob(int fd, std::vector<uint8_t>* out, int timeout_ms = kWaitMs);

}  // namespace fit

namespace fit {

// A fabric with one connected pair: c_ (client) and s_ (server).
class Connected : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = std::make_unique<Fabric>(hints());
    ASSERT_NE(f_->domain(), nullptr);
    f_->connect(&c_, &s_, {}, {}, options());
  }
  virtual Info hints() { return msg_hints(); }
  virtual EpOptions options() { return {}; }

  // A zero-byte message from `from` to `to`, both completions awaited. After
  // it arrives, every earlier RMA Write from `from` has been placed
  // (FI_ORDER_SAW).
  void notify(Endpoint& from, Endpoint& to);

  std::unique_ptr<Fabric> f_;
  std::unique_ptr<Endpoint> c_, s_;
};

// Sizes that cross every boundary: empty, one byte, unaligned, one page,
// larger than a socket buffer, 64 MiB.
inline const std::vector<size_t> kSizes = {0, 1, 4095, 65536, (1u << 20) + 13, 64u << 20};

}  // namespace fit
