// Test fixture pieces: two engines on 127.0.0.1 over the kernel-TCP
// transport, a connected QP pair, registered buffers, and progress loops
// that give up after a deadline instead of hanging.
#pragma once

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "stack/engine.h"

namespace softrdma::testing {

inline sockaddr_in loopback(uint16_t port = 0) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Progresses every engine until pred() holds; false on timeout.
inline bool run_until(std::initializer_list<Engine*> engines, const std::function<bool()>& pred,
                      int timeout_ms = 20000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    for (Engine* e : engines) e->progress(0);
  }
  return true;
}

struct Side {
  std::unique_ptr<Engine> eng;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  std::vector<Wc> wcs;  // completions collected so far

  explicit Side(const EngineConfig& cfg, uint32_t depth = 1024, uint16_t ord = 16)
      : eng(std::make_unique<Engine>(cfg)) {
    pd = eng->alloc_pd();
    cq = eng->create_cq(depth * 2);
    qp = eng->create_qp({.pd = pd, .send_cq = cq, .recv_cq = cq, .sq_depth = depth,
                         .rq_depth = depth, .ord = ord, .ird = ord});
  }
  // Drains the CQ into wcs; returns how many were added.
  size_t reap() {
    Wc buf[64];
    size_t got = 0;
    for (int n; (n = eng->poll_cq(cq, buf, 64)) > 0; got += static_cast<size_t>(n))
      wcs.insert(wcs.end(), buf, buf + n);
    return got;
  }
  Mr* reg(std::vector<uint8_t>& buf, uint32_t access) {
    return eng->reg_mr(pd, buf.data(), buf.size(), access);
  }
};

// A connected pair: a (client, the MPA initiator) and b (server).
struct Pair {
  Side a, b;
  Listener* listener = nullptr;
  std::vector<CmEvent> events_a, events_b;

  explicit Pair(const EngineConfig& cfg = EngineConfig{}, uint32_t depth = 1024,
                uint16_t ord = 16)
      : a(cfg, depth, ord), b(cfg, depth, ord) {}

  // Connects with the given private data; true once both sides are
  // established. The server accepts with accept_pdata.
  bool connect(const std::vector<uint8_t>& pdata = {}, const std::vector<uint8_t>& accept_pdata = {}) {
    if (b.eng->listen(loopback(0), 16, &listener) != 0) return false;
    sockaddr_in addr = b.eng->listen_addr(listener);
    if (a.eng->connect(a.qp, addr, pdata.data(), pdata.size()) != 0) return false;
    bool a_up = false, b_up = false;
    return run_until({a.eng.get(), b.eng.get()}, [&] {
      CmEvent ev;
      while (b.eng->poll_cm(&ev)) {
        events_b.push_back(ev);
        if (ev.type == CmEventType::kConnectRequest)
          b.eng->accept(ev.req, b.qp, accept_pdata.data(), accept_pdata.size());
        if (ev.type == CmEventType::kEstablished) b_up = true;
      }
      while (a.eng->poll_cm(&ev)) {
        events_a.push_back(ev);
        if (ev.type == CmEventType::kEstablished) a_up = true;
        if (ev.type != CmEventType::kEstablished) return true;  // failed: stop
      }
      return a_up && b_up;
    }) && a_up && b_up;
  }
  bool run(const std::function<bool()>& pred, int timeout_ms = 30000) {
    return run_until({a.eng.get(), b.eng.get()}, [&] {
      a.reap();
      b.reap();
      return pred();
    }, timeout_ms);
  }
};

inline Sge sge(const std::vector<uint8_t>& buf, Mr* mr, size_t off = 0, size_t len = SIZE_MAX) {
  if (len == SIZE_MAX) len = buf.size() - off;
  return Sge{reinterpret_cast<uint64_t>(buf.data() + off), static_cast<uint32_t>(len),
             mr ? mr->stag : 0};
}

inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

}  // namespace softrdma::testing
