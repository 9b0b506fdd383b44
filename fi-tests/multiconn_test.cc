// 256 connections between two processes (a forked server), every one of
// them passing verified data both ways; shared EQ and CQ on each side, the
// connection's index carried in the CM private data.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

constexpr int kConns = 256;
constexpr size_t kLen = 4096;

struct Side {
  explicit Side(Fabric& f) {
    fi_eq_attr ea{};
    ea.wait_obj = FI_WAIT_UNSPEC;
    EXPECT_EQ(fi_eq_open(f.fabric(), &ea, &eq, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_DATA;
    ca.size = 4 * kConns;
    EXPECT_EQ(fi_cq_open(f.domain(), &ca, &cq, nullptr), 0);
    eps.assign(kConns, nullptr);
    rx.assign(kConns, std::vector<uint8_t>(kLen));
    tx.assign(kConns, std::vector<uint8_t>(kLen));
  }
  ~Side() {
    for (fid_ep* ep : eps)
      if (ep) {
        EXPECT_EQ(fi_close(&ep->fid), 0);
      }
    EXPECT_EQ(fi_close(&cq->fid), 0);
    EXPECT_EQ(fi_close(&eq->fid), 0);
  }
  // Opens endpoint i for info, receive posted, context = its index.
  fid_ep* open(Fabric& f, fi_info* info, int i) {
    fid_ep* ep = nullptr;
    EXPECT_EQ(fi_endpoint(f.domain(), info, &ep, reinterpret_cast<void*>(intptr_t{i})), 0);
    EXPECT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep), 0);
    EXPECT_EQ(fi_recv(ep, rx[i].data(), kLen, nullptr, 0, rx[i].data()), 0);
    eps[i] = ep;
    return ep;
  }
  int index_of_rx(void* ctx) {
    for (int i = 0; i < kConns; ++i)
      if (rx[i].data() == ctx) return i;
    return -1;
  }
  // Reads the shared CQ until `want` receives arrived, each checked against
  // seed_base + index; on_recv runs for each.
  bool receive_all(int want, uint64_t seed_base, const std::function<void(int)>& on_recv,
                   int* sends_done) {
    int got = 0;
    return poll_until([&] {
      fi_cq_data_entry e[32];
      ssize_t n = fi_cq_read(cq, e, 32);
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        ADD_FAILURE() << "error completion " << fi_strerror(err.err);
        return true;
      }
      for (ssize_t k = 0; k < n; ++k) {
        if (e[k].flags & FI_SEND) {
          ++*sends_done;
          continue;
        }
        int i = index_of_rx(e[k].op_context);
        EXPECT_GE(i, 0);
        if (i < 0) continue;
        EXPECT_EQ(e[k].len, kLen);
        EXPECT_TRUE(same(rx[i].data(), kLen, seed_base + i)) << "connection " << i;
        ++got;
        on_recv(i);
      }
      return got == want && *sends_done == want;
    });
  }

  fid_eq* eq = nullptr;
  fid_cq* cq = nullptr;
  std::vector<fid_ep*> eps;
  std::vector<std::vector<uint8_t>> rx, tx;
};

// The server: accepts kConns connections, answers each message with its own.
int serve(int fd) {
  Fabric f;
  f.listen();
  if (::testing::Test::HasFailure()) return 1;
  if (!send_blob(fd, &f.addr(), sizeof(sockaddr_in))) return 2;
  Side s(f);
  int connected = 0;
  bool ok = poll_until([&] {
    uint32_t event;
    std::vector<uint8_t> buf(sizeof(fi_eq_cm_entry) + 64);
    ssize_t rd = fi_eq_read(f.pep_eq(), &event, buf.data(), buf.size(), 0);
    if (rd == static_cast<ssize_t>(sizeof(fi_eq_cm_entry) + 4) && event == FI_CONNREQ) {
      auto* e = reinterpret_cast<fi_eq_cm_entry*>(buf.data());
      uint32_t i;
      std::memcpy(&i, e->data, 4);
      Info info(e->info);
      EXPECT_LT(i, static_cast<uint32_t>(kConns));
      if (i >= kConns || s.eps[i]) return true;
      fid_ep* ep = s.open(f, info.get(), static_cast<int>(i));
      EXPECT_EQ(fi_accept(ep, nullptr, 0), 0);
    } else if (rd != -FI_EAGAIN) {
      ADD_FAILURE() << "unexpected listener event " << rd;
      return true;
    }
    rd = fi_eq_read(s.eq, &event, buf.data(), buf.size(), 0);
    if (rd >= static_cast<ssize_t>(sizeof(fi_eq_cm_entry)) && event == FI_CONNECTED)
      ++connected;
    else if (rd != -FI_EAGAIN) {
      ADD_FAILURE() << "unexpected endpoint event " << rd;
    }
    return connected == kConns;
  });
  if (!ok || ::testing::Test::HasFailure()) return 3;
  int sent = 0;
  ok = s.receive_all(
      kConns, 0,
      [&](int i) {
        fill(s.tx[i].data(), kLen, 1000 + i);
        EXPECT_EQ(fi_send(s.eps[i], s.tx[i].data(), kLen, nullptr, 0, s.tx[i].data()), 0);
      },
      &sent);
  if (!ok || ::testing::Test::HasFailure()) return 4;
  std::vector<uint8_t> done;
  if (!recv_blob(fd, &done)) return 5;  // the client has everything
  return ::testing::Test::HasFailure() ? 6 : 0;
}

FIT_CHILD(serve, serve);

TEST(MultiConn, TwoProcesses256Connections) {
  int fd = -1;
  pid_t pid = spawn("serve", &fd);
  ASSERT_GT(pid, 0);
  std::vector<uint8_t> addr;
  ASSERT_TRUE(recv_blob(fd, &addr));
  ASSERT_EQ(addr.size(), sizeof(sockaddr_in));
  {
    Fabric f;
    Side c(f);
    for (int i = 0; i < kConns; ++i) {
      fid_ep* ep = c.open(f, f.info(), i);
      uint32_t idx = static_cast<uint32_t>(i);
      ASSERT_EQ(fi_connect(ep, addr.data(), &idx, sizeof(idx)), 0) << i;
    }
    int connected = 0;
    ASSERT_TRUE(poll_until([&] {
      uint32_t event;
      fi_eq_cm_entry entry;
      ssize_t rd = fi_eq_read(c.eq, &event, &entry, sizeof(entry), 0);
      if (rd == -FI_EAVAIL) {
        fi_eq_err_entry err{};
        fi_eq_readerr(c.eq, &err, 0);
        ADD_FAILURE() << "connect failed: " << fi_strerror(err.err);
        return true;
      }
      if (rd > 0) {
        EXPECT_EQ(event, FI_CONNECTED);
        int i = static_cast<int>(reinterpret_cast<intptr_t>(entry.fid->context));
        fill(c.tx[i].data(), kLen, i);
        EXPECT_EQ(fi_send(c.eps[i], c.tx[i].data(), kLen, nullptr, 0, c.tx[i].data()), 0);
        ++connected;
      }
      return connected == kConns;
    }));
    ASSERT_FALSE(HasFailure());
    int sent = 0;
    EXPECT_TRUE(c.receive_all(
        kConns, 1000, [](int) {}, &sent));
    EXPECT_EQ(sent, kConns);
    uint8_t done = 1;
    send_blob(fd, &done, 1);
  }
  EXPECT_TRUE(child_ok(pid));
  ::close(fd);
}

}  // namespace
}  // namespace fit
