// FI_EP_RDM through ofi_rxm over softrdma ("softrdma;ofi_rxm"): tagged
// messages in rxm's eager, SAR and rendezvous (fi_readv on softrdma) ranges,
// a process sending to itself, and two processes.
#include <unistd.h>

#include <cstring>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

// 0 and 8 B: inject/eager; 16 KiB: rxm's eager limit; 200 KiB: past the SAR
// limit (rendezvous); 8 MiB: rendezvous with a large Read.
const std::vector<size_t> kRdmSizes = {0, 8, 16 << 10, 200 << 10, 8 << 20};

class RdmEp {
 public:
  explicit RdmEp(Info hints = rdm_hints()) {
    Info list;
    int rc = getinfo(hints.get(), &list);
    EXPECT_EQ(rc, 0) << fi_strerror(-rc);
    if (rc) return;
    info_.reset(fi_dupinfo(list.get()));
    EXPECT_STREQ(info_->fabric_attr->prov_name, kRxmProv);
    EXPECT_EQ(fi_fabric(info_->fabric_attr, &fabric_, nullptr), 0);
    EXPECT_EQ(fi_domain(fabric_, info_.get(), &domain_, nullptr), 0);
    fi_av_attr aa{};
    aa.type = info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_MAP : info_->domain_attr->av_type;
    EXPECT_EQ(fi_av_open(domain_, &aa, &av_, nullptr), 0);
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    EXPECT_EQ(fi_cq_open(domain_, &ca, &cq_, nullptr), 0);
    EXPECT_EQ(fi_endpoint(domain_, info_.get(), &ep_, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &av_->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep_), 0);
  }
  ~RdmEp() {
    for (fid_mr* m : mrs_) {
      EXPECT_EQ(fi_close(&m->fid), 0);
    }
    for (fid* f : {ep_ ? &ep_->fid : nullptr, av_ ? &av_->fid : nullptr, cq_ ? &cq_->fid : nullptr,
                   domain_ ? &domain_->fid : nullptr, fabric_ ? &fabric_->fid : nullptr})
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
  }

  fid_ep* ep() const { return ep_; }
  fid_cq* cq() const { return cq_; }
  const fi_info* info() const { return info_.get(); }

  std::vector<uint8_t> name() {
    std::vector<uint8_t> n(256);
    size_t len = n.size();
    EXPECT_EQ(fi_getname(&ep_->fid, n.data(), &len), 0);
    n.resize(len);
    return n;
  }
  fi_addr_t insert(const std::vector<uint8_t>& name) {
    fi_addr_t a = FI_ADDR_NOTAVAIL;
    EXPECT_EQ(fi_av_insert(av_, name.data(), 1, &a, 0, nullptr), 1);
    return a;
  }
  // A descriptor for buf if the returned mr_mode asks for local registration.
  void* desc(void* buf, size_t len) {
    if (!(info_->domain_attr->mr_mode & FI_MR_LOCAL)) return nullptr;
    fid_mr* mr = nullptr;
    EXPECT_EQ(
        fi_mr_reg(domain_, buf, std::max<size_t>(len, 1), FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr),
        0);
    mrs_.push_back(mr);
    return fi_mr_desc(mr);
  }
  // Posts with op(), retrying while it says -FI_EAGAIN (rxm does until its
  // connection is up) and progressing meanwhile; returns op's last result.
  ssize_t post(const std::function<ssize_t()>& op) {
    ssize_t rc = -FI_EAGAIN;
    poll_until([&] {
      rc = op();
      if (rc != -FI_EAGAIN) return true;
      poll_once();
      return false;
    });
    return rc;
  }
  // Reads completions until `out` holds `want`.
  ::testing::AssertionResult reap(std::vector<fi_cq_tagged_entry>* out, size_t want) {
    auto take = [&] {
      while (out->size() < want && !done_.empty()) {
        out->push_back(done_.front());
        done_.erase(done_.begin());
      }
      return out->size() >= want;
    };
    bool ok = poll_until([&] { return take() || !poll_once(); });
    if (!ok || out->size() < want)
      return ::testing::AssertionFailure() << "got " << out->size() << " of " << want;
    return ::testing::AssertionSuccess();
  }
  // Progress without waiting for anything (completions are kept for reap).
  void progress(int reads) {
    for (int i = 0; i < reads; ++i) poll_once();
  }

 private:
  Info info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<fid_mr*> mrs_;
  std::vector<fi_cq_tagged_entry> done_;  // read, not yet reaped

  // One fi_cq_read; false on an error completion (reported).
  bool poll_once() {
    fi_cq_tagged_entry e[8];
    ssize_t n = fi_cq_read(cq_, e, 8);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq_, &err, 0);
      ADD_FAILURE() << "error completion: " << fi_strerror(err.err) << " "
                    << fi_cq_strerror(cq_, err.prov_errno, err.err_data, nullptr, 0);
      return false;
    }
    for (ssize_t k = 0; k < n; ++k) done_.push_back(e[k]);
    return true;
  }
};

// Posts a tagged receive and a tagged send of `size` to `to` and waits for
// both completions on one endpoint (a process talking to itself).
void self_round(RdmEp& e, fi_addr_t self, size_t size, uint64_t tag, uint64_t seed) {
  std::vector<uint8_t> src(size + 1), dst(size + 1, 0xee);
  fill(src.data(), size, seed);
  ASSERT_EQ(fi_trecv(e.ep(), dst.data(), size, e.desc(dst.data(), dst.size()), FI_ADDR_UNSPEC, tag,
                     0, &dst),
            0);
  void* sd = e.desc(src.data(), src.size());
  ASSERT_EQ(e.post([&] { return fi_tsend(e.ep(), src.data(), size, sd, self, tag, &src); }), 0);
  std::vector<fi_cq_tagged_entry> got;
  ASSERT_TRUE(e.reap(&got, 2));
  for (const auto& c : got) {
    if (c.op_context == &dst) {
      EXPECT_EQ(c.flags & (FI_RECV | FI_TAGGED), FI_RECV | FI_TAGGED);
      EXPECT_EQ(c.len, size);
      EXPECT_EQ(c.tag, tag);
    } else {
      EXPECT_EQ(c.op_context, &src);
      EXPECT_EQ(c.flags & (FI_SEND | FI_TAGGED), FI_SEND | FI_TAGGED);
    }
  }
  EXPECT_TRUE(same(dst.data(), size, seed));
  EXPECT_EQ(dst[size], 0xee);
}

TEST(Rdm, ProcessSendsToItself) {
  RdmEp e;
  ASSERT_FALSE(HasFailure());
  fi_addr_t self = e.insert(e.name());
  uint64_t seed = 1;
  for (size_t size : kRdmSizes) {
    SCOPED_TRACE(size);
    self_round(e, self, size, 0x100 + seed, seed);
    ++seed;
    if (HasFatalFailure()) return;
  }
}

TEST(Rdm, TagMatchingAndUnexpectedMessages) {
  RdmEp e;
  ASSERT_FALSE(HasFailure());
  fi_addr_t self = e.insert(e.name());
  for (size_t size : {size_t{100}, size_t{300} << 10}) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> a(size), b(size), ra(size), rb(size), ru(size);
    fill(a.data(), size, 1);
    fill(b.data(), size, 2);
    // Posted in the order A, B; sent B, A: each lands by tag.
    ASSERT_EQ(
        fi_trecv(e.ep(), ra.data(), size, e.desc(ra.data(), size), FI_ADDR_UNSPEC, 0xA, 0, &ra), 0);
    ASSERT_EQ(
        fi_trecv(e.ep(), rb.data(), size, e.desc(rb.data(), size), FI_ADDR_UNSPEC, 0xB, 0, &rb), 0);
    void* ad = e.desc(a.data(), size);
    void* bd = e.desc(b.data(), size);
    ASSERT_EQ(e.post([&] { return fi_tsend(e.ep(), b.data(), size, bd, self, 0xB, &b); }), 0);
    ASSERT_EQ(e.post([&] { return fi_tsend(e.ep(), a.data(), size, ad, self, 0xA, &a); }), 0);
    std::vector<fi_cq_tagged_entry> got;
    ASSERT_TRUE(e.reap(&got, 4));
    EXPECT_TRUE(same(ra.data(), size, 1));
    EXPECT_TRUE(same(rb.data(), size, 2));
    // Sent before any receive is posted (unexpected), then matched with
    // ignore bits.
    ASSERT_EQ(e.post([&] { return fi_tsend(e.ep(), a.data(), size, ad, self, 0x1234, &a); }), 0);
    got.clear();
    e.progress(100);  // let it arrive
    ASSERT_EQ(fi_trecv(e.ep(), ru.data(), size, e.desc(ru.data(), size), FI_ADDR_UNSPEC, 0x1200,
                       0xff, &ru),
              0);
    ASSERT_TRUE(e.reap(&got, 2));
    bool matched = false;
    for (const auto& c : got)
      if (c.op_context == &ru) {
        matched = true;
        EXPECT_EQ(c.tag, 0x1234u);
        EXPECT_EQ(c.len, size);
      }
    EXPECT_TRUE(matched);
    EXPECT_TRUE(same(ru.data(), size, 1));
  }
}

TEST(Rdm, UntaggedMessagesAndInject) {
  RdmEp e;
  ASSERT_FALSE(HasFailure());
  fi_addr_t self = e.insert(e.name());
  std::vector<uint8_t> src(50000), dst(50000);
  fill(src.data(), src.size(), 5);
  ASSERT_EQ(
      fi_recv(e.ep(), dst.data(), dst.size(), e.desc(dst.data(), dst.size()), FI_ADDR_UNSPEC, &dst),
      0);
  void* sd = e.desc(src.data(), src.size());
  ASSERT_EQ(e.post([&] { return fi_send(e.ep(), src.data(), src.size(), sd, self, &src); }), 0);
  std::vector<fi_cq_tagged_entry> got;
  ASSERT_TRUE(e.reap(&got, 2));
  EXPECT_EQ(src, dst);
  // fi_tinject up to the advertised inject size; no send completion.
  size_t inj = std::min<size_t>(e.info()->tx_attr->inject_size, 1024);
  ASSERT_GT(inj, 0u);
  std::vector<uint8_t> small(inj), rsmall(inj);
  fill(small.data(), inj, 6);
  ASSERT_EQ(fi_trecv(e.ep(), rsmall.data(), inj, e.desc(rsmall.data(), inj), FI_ADDR_UNSPEC, 9, 0,
                     &rsmall),
            0);
  ASSERT_EQ(e.post([&] { return fi_tinject(e.ep(), small.data(), inj, self, 9); }), 0);
  std::memset(small.data(), 0, inj);
  got.clear();
  ASSERT_TRUE(e.reap(&got, 1));
  EXPECT_EQ(got[0].op_context, &rsmall);
  EXPECT_TRUE(same(rsmall.data(), inj, 6));
  EXPECT_TRUE(cq_quiet(e.cq(), 100));
}

// Child: receives every size from the parent (tag = size), checks it and
// sends it back with the next seed.
int rdm_peer(int fd) {
  RdmEp e;
  if (::testing::Test::HasFailure()) return 1;
  std::vector<uint8_t> mine = e.name(), theirs;
  if (!send_blob(fd, mine.data(), mine.size()) || !recv_blob(fd, &theirs)) return 2;
  fi_addr_t peer = e.insert(theirs);
  uint64_t seed = 10;
  for (size_t size : kRdmSizes) {
    std::vector<uint8_t> buf(size + 1);
    EXPECT_EQ(fi_trecv(e.ep(), buf.data(), size, e.desc(buf.data(), buf.size()), FI_ADDR_UNSPEC,
                       size, 0, nullptr),
              0);
    std::vector<fi_cq_tagged_entry> got;
    if (!e.reap(&got, 1)) return 3;
    EXPECT_EQ(got[0].len, size);
    EXPECT_TRUE(same(buf.data(), size, seed)) << size;
    fill(buf.data(), size, seed + 1);
    void* bd = e.desc(buf.data(), buf.size());
    EXPECT_EQ(e.post([&] { return fi_tsend(e.ep(), buf.data(), size, bd, peer, size, nullptr); }),
              0);
    got.clear();
    if (!e.reap(&got, 1)) return 4;
    seed += 2;
  }
  std::vector<uint8_t> done;
  recv_blob(fd, &done);  // keep serving until the parent has its last reply
  return ::testing::Test::HasFailure() ? 5 : 0;
}

FIT_CHILD(rdm_peer, rdm_peer);

TEST(Rdm, TwoProcesses) {
  int fd = -1;
  pid_t pid = spawn("rdm_peer", &fd);
  ASSERT_GT(pid, 0);
  {
    RdmEp e;
    ASSERT_FALSE(HasFailure());
    std::vector<uint8_t> mine = e.name(), theirs;
    ASSERT_TRUE(recv_blob(fd, &theirs));
    ASSERT_TRUE(send_blob(fd, mine.data(), mine.size()));
    fi_addr_t peer = e.insert(theirs);
    uint64_t seed = 10;
    for (size_t size : kRdmSizes) {
      SCOPED_TRACE(size);
      std::vector<uint8_t> out(size + 1), in(size + 1);
      fill(out.data(), size, seed);
      ASSERT_EQ(fi_trecv(e.ep(), in.data(), size, e.desc(in.data(), in.size()), FI_ADDR_UNSPEC,
                         size, 0, &in),
                0);
      void* od = e.desc(out.data(), out.size());
      ASSERT_EQ(e.post([&] { return fi_tsend(e.ep(), out.data(), size, od, peer, size, &out); }),
                0);
      std::vector<fi_cq_tagged_entry> got;
      ASSERT_TRUE(e.reap(&got, 2));
      EXPECT_TRUE(same(in.data(), size, seed + 1));
      seed += 2;
    }
    uint8_t done = 1;
    send_blob(fd, &done, 1);
  }
  EXPECT_TRUE(child_ok(pid));
  ::close(fd);
}

}  // namespace
}  // namespace fit
