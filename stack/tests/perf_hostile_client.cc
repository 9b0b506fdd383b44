// A client that asks an srdma_perf server for what it must refuse: one
// connection request per Hello below, each outside the protocol's limits
// (stack/tools/perf_protocol.h). Every one must be rejected with a reason;
// an accepted request, or a server that stops answering, fails.
//
//   perf_hostile_client <port>     (server on 127.0.0.1; exit 0: all rejected)
//
// perf_hardening_test.sh runs it against a real server, then checks that
// the server is still alive, stayed small, and serves a normal client.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "stack/engine.h"
#include "stack/tools/addresses.h"
#include "stack/tools/perf_protocol.h"
#include "stack/tools/tool_common.h"

namespace softrdma::perf {
namespace {

using tools::Clock;

struct Case {
  const char* name;
  Hello hello;
  size_t len = sizeof(Hello);  // private data bytes sent
};

class HostileClient {
 public:
  explicit HostileClient(uint16_t port) : peer_(tools::resolve_or_die("127.0.0.1", port)) {
    pd_ = eng_.alloc_pd();
    cq_ = eng_.create_cq(64);
    data_ = tools::alloc_touched(kDataBytes);
    ctrl_ = std::make_unique<CtrlBlock>();
    constexpr uint32_t kAll = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    data_stag_ = eng_.reg_mr(pd_, data_.get(), kDataBytes, kAll)->stag;
    ctrl_stag_ = eng_.reg_mr(pd_, ctrl_.get(), sizeof(CtrlBlock), kAll)->stag;
  }

  // A Hello a server accepts: 8 B send latency, check on. Each case breaks
  // one thing of it.
  Hello valid() const {
    Hello h;
    h.op = static_cast<uint8_t>(Op::kSend);
    h.kind = static_cast<uint8_t>(Kind::kLat);
    h.verify = 1;
    h.depth = 1;
    h.slots = 1;
    h.n_sizes = 1;
    h.stride = 64;
    h.data = {.addr = tools::addr_of(data_.get()), .len = kDataBytes, .rkey = data_stag_};
    h.ctrl = {.addr = tools::addr_of(ctrl_.get()), .len = sizeof(CtrlBlock), .rkey = ctrl_stag_};
    return h;
  }

  // True if the server rejected the request, with a reason.
  bool rejected(const Case& c) {
    Qp* qp = eng_.create_qp({.pd = pd_, .send_cq = cq_, .recv_cq = cq_});
    if (!qp) return fail(c, "create_qp failed");
    const Clock::time_point until = Clock::now() + std::chrono::seconds(10);
    CmEvent ev;
    bool got = false;
    for (int attempt = 0; !got && Clock::now() < until; ++attempt) {
      if (int rc = eng_.connect(qp, peer_, &c.hello, c.len); rc < 0)
        return fail(c, std::string("connect: ") + std::strerror(-rc), qp);
      while (!(got = eng_.poll_cm(&ev)) && Clock::now() < until) eng_.progress(1000);
      // Refused: the server is not listening (yet, or any more).
      if (got && ev.type == CmEventType::kUnreachable && ev.status == -ECONNREFUSED &&
          attempt == 0) {
        got = false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (!got) return fail(c, "no answer from the server in 10 s", qp);
    if (ev.type == CmEventType::kEstablished) {
      eng_.disconnect(qp);
      return fail(c, "the server ACCEPTED it", qp);
    }
    if (ev.type != CmEventType::kRejected) {
      return fail(c, std::string("got ") + to_string(ev.type) + " (" +
                         tools::describe_status(ev.status, ev.term) + "), not a reject", qp);
    }
    const std::string why(ev.private_data.begin(), ev.private_data.end());
    eng_.destroy_qp(qp);
    if (why.empty()) return fail(c, "rejected without a reason");
    std::printf("ok   %s: rejected: %s\n", c.name, why.c_str());
    return true;
  }

 private:
  static constexpr uint64_t kDataBytes = 4096;

  bool fail(const Case& c, const std::string& why, Qp* qp = nullptr) {
    if (qp) eng_.destroy_qp(qp);
    std::printf("FAIL %s: %s\n", c.name, why.c_str());
    return false;
  }

  Engine eng_;
  const sockaddr_in peer_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  tools::Buffer data_;
  std::unique_ptr<CtrlBlock> ctrl_;
  uint32_t data_stag_ = 0, ctrl_stag_ = 0;
};

std::vector<Case> hostile_cases(const HostileClient& client) {
  std::vector<Case> cases;
  auto add = [&](const char* name, auto edit, size_t len = sizeof(Hello)) {
    Case c{.name = name, .hello = client.valid(), .len = len};
    edit(c.hello);
    cases.push_back(c);
  };
  // Write bandwidth with 4 slots of `stride` bytes and a data region to
  // match: no client derives 4 slots from these strides (it would use 1).
  auto slots4 = [](uint64_t stride) {
    return [stride](Hello& h) {
      h.op = static_cast<uint8_t>(Op::kWrite);
      h.kind = static_cast<uint8_t>(Kind::kBw);
      h.depth = 4;
      h.slots = 4;
      h.stride = stride;
      h.data.len = 2 * 4 * stride;
    };
  };
  add("slots=4 stride=1G", slots4(uint64_t{1} << 30));      // 8 GiB of buffers
  add("slots=4 stride=128M", slots4(uint64_t{128} << 20));  // 1 GiB, within the old cap
  add("dlen=0", [](Hello& h) { h.data.len = 0; });
  add("clen=0", [](Hello& h) { h.ctrl.len = 0; });
  add("data addr wraps", [](Hello& h) { h.data.addr = ~uint64_t{0} - 100; });
  add("depth=0", [](Hello& h) { h.depth = 0; });
  add("lat depth=64", [](Hello& h) { h.depth = 64; });
  add("stride=100", [](Hello& h) { h.stride = 100; });
  add("stride=2G", [](Hello& h) { h.stride = uint64_t{2} << 30; });
  add("sizes=0", [](Hello& h) { h.n_sizes = 0; });
  add("sizes=1000", [](Hello& h) { h.n_sizes = 1000; });
  add("op=9", [](Hello& h) { h.op = 9; });
  add("verify=7", [](Hello& h) { h.verify = 7; });
  add("bad magic", [](Hello& h) { h.magic = 0x12345678; });
  add("short hello", [](Hello&) {}, sizeof(Hello) - 8);
  return cases;
}

}  // namespace
}  // namespace softrdma::perf

int main(int argc, char** argv) {
  using namespace softrdma::perf;
  const long port = argc == 2 ? std::strtol(argv[1], nullptr, 10) : 0;
  if (port <= 0 || port > 65535) {
    std::fprintf(stderr, "usage: perf_hostile_client <port>\n");
    return 2;
  }
  HostileClient client(static_cast<uint16_t>(port));
  int failed = 0;
  const std::vector<Case> cases = hostile_cases(client);
  for (const Case& c : cases) failed += client.rejected(c) ? 0 : 1;
  std::printf("perf_hostile_client: %zu rejected, %d not\n", cases.size() - failed, failed);
  return failed ? 1 : 0;
}
