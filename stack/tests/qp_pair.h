// Two QPs over FakeConn with a buffer each and what their tests share:
// posting helpers, completions by wr_id, the flush rule, and a view into
// the QP's internals. No Engine and no MPA exchange (qp_state_test.cc,
// qp_terminate_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "stack/iwarp/qp_state.h"
#include "stack/iwarp/tx_frame.h"
#include "stack/tests/fake_conn.h"

namespace softrdma::iwarp {

// Lets a test see where the QP stands internally.
struct QpTestPeer {
  static bool receiving_message(const Qp& q) { return q.rx_msg_active_; }
  static size_t orq(const Qp& q) { return q.orq_.size(); }
  static size_t sq(const Qp& q) { return q.sq_.size(); }
  static int set_state(Qp& q, QpState to) { return q.set_state(to); }
  static void force_state(Qp& q, QpState s) { q.state_ = s; }  // a starting point only
  static void bound_unexpected(Qp& q, uint64_t bytes, uint32_t msgs) {
    q.unexp_.set_bounds(bytes, msgs);
  }
};

}  // namespace softrdma::iwarp

namespace softrdma::testing {

using iwarp::QpTestPeer;
using iwarp::Rtr;

inline constexpr uint32_t kAll =
    kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic;

inline uint8_t u8(auto v) { return static_cast<uint8_t>(v); }

// Two hosts with a buffer each (all rights) and a link between them.
struct Pair {
  explicit Pair(FakeConnConfig cfg = {}, uint64_t seed = 1)
      : abuf(1 << 20, 0x11), bbuf(1 << 20, 0x22) {
    astag = a.reg(abuf.data(), abuf.size(), kAll);
    bstag = b.reg(bbuf.data(), bbuf.size(), kAll);
    link = std::make_unique<FakeLink>(a.qp.get(), b.qp.get(), cfg, seed);
  }
  void start(Rtr rtr = Rtr::kNone, bool crc = true) {
    auto [ma, mb] = mpa_pair(crc, false, false, rtr);
    link->start(ma, mb);
  }
  uint64_t aaddr(size_t off) const { return reinterpret_cast<uint64_t>(abuf.data()) + off; }
  uint64_t baddr(size_t off) const { return reinterpret_cast<uint64_t>(bbuf.data()) + off; }

  SendWr send(uint64_t id, size_t off, uint32_t len, uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = id, .opcode = WrOpcode::kSend, .flags = flags, .num_sge = 1};
    wr.sg_list[0] = Sge{aaddr(off), len, astag};
    return wr;
  }
  // An RDMA Write or Read between a's buffer at off and b's raddr.
  SendWr rdma(WrOpcode op, uint64_t id, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey,
              uint32_t flags) const {
    SendWr wr{.wr_id = id, .opcode = op, .flags = flags, .num_sge = 1, .remote_addr = raddr,
              .rkey = rkey};
    wr.sg_list[0] = Sge{aaddr(off), len, astag};
    return wr;
  }
  SendWr write(uint64_t id, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey,
               uint32_t flags = kWrSignaled) const {
    return rdma(WrOpcode::kWrite, id, off, len, raddr, rkey, flags);
  }
  SendWr read(uint64_t id, size_t off, uint32_t len, uint64_t raddr, uint32_t rkey,
              uint32_t flags = kWrSignaled) const {
    return rdma(WrOpcode::kRead, id, off, len, raddr, rkey, flags);
  }
  SendWr fetch_add(uint64_t id, size_t off, uint64_t raddr, uint32_t rkey,
                   uint32_t flags = kWrSignaled) const {
    SendWr wr{.wr_id = id, .opcode = WrOpcode::kAtomicFetchAdd, .flags = flags, .num_sge = 1,
              .remote_addr = raddr, .rkey = rkey, .compare_add = 1};
    wr.sg_list[0] = Sge{aaddr(off), 8, astag};
    return wr;
  }
  static RecvWr recv(uint64_t id, uint64_t addr, uint32_t len, uint32_t stag) {
    RecvWr wr{.wr_id = id, .num_sge = 1};
    wr.sg_list[0] = Sge{addr, len, stag};
    return wr;
  }

  FakeHost a{1}, b{2};
  iwarp::Pd other_pd{99};  // a PD b's QP is not in
  std::vector<uint8_t> abuf, bbuf;
  uint32_t astag, bstag;
  std::unique_ptr<FakeLink> link;
};

// Every completion of a host, by wr_id; a second one for the same WR fails.
inline std::map<uint64_t, Wc> completions(FakeHost& h) {
  std::map<uint64_t, Wc> out;
  for (auto* cq : {&h.send_cq, &h.recv_cq}) {
    for (const Wc& wc : FakeHost::drain(*cq)) {
      EXPECT_TRUE(out.emplace(wc.wr_id, wc).second) << "wr_id " << wc.wr_id << " completed twice";
    }
  }
  return out;
}

// Expects exactly the WRs in `ids` to have completed: `first` with
// first_status, all others with kWrFlushErr, all with vendor_err.
inline void expect_flushed(const std::map<uint64_t, Wc>& wcs, const std::vector<uint64_t>& ids,
                    uint64_t first, WcStatus first_status, uint32_t vendor_err) {
  EXPECT_EQ(wcs.size(), ids.size());
  for (uint64_t id : ids) {
    auto it = wcs.find(id);
    if (it == wcs.end()) {
      ADD_FAILURE() << "wr_id " << id << " never completed";
      continue;
    }
    const WcStatus want = id == first ? first_status : WcStatus::kWrFlushErr;
    EXPECT_EQ(it->second.status, want) << "wr_id " << id << ": " << to_string(it->second.status)
                                       << ", want " << to_string(want);
    EXPECT_EQ(it->second.vendor_err, vendor_err) << "wr_id " << id;
  }
}

}  // namespace softrdma::testing
