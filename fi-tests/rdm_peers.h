// Native FI_EP_RDM endpoints (provider "softrdma") for the RDM tests: one
// domain and AV, and peers with a CQ (tagged entries, fi_cq_readfrom) and a
// registered window each.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "fi-tests/fi_test.h"
#include "prov/fi_ext_softrdma.h"

namespace fit {

inline Info native_rdm_hints(uint64_t caps = FI_RMA | FI_ATOMIC) {
  Info h(fi_allocinfo());
  h->caps = caps;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  h->fabric_attr->prov_name = strdup(kProv);
  return h;
}

// The native endpoint's info in a list that has ofi_rxm's too; null if none.
inline const fi_info* native(const fi_info* list) {
  for (const fi_info* i = list; i; i = i->next)
    if (std::strcmp(i->fabric_attr->prov_name, kProv) == 0) return i;
  return nullptr;
}

// One domain and AV; endpoints with a CQ each and a registered window of
// kWindow bytes that every peer may read, write and update atomically.
inline constexpr size_t kWindow = 1 << 20;

class Domain {
 public:
  explicit Domain(uint64_t caps = FI_RMA | FI_ATOMIC) {
    Info hints = native_rdm_hints(caps);
    Info list;
    int rc = getinfo(hints.get(), &list);
    EXPECT_EQ(rc, 0) << fi_strerror(-rc);
    if (rc) return;
    const fi_info* ours = native(list.get());
    EXPECT_NE(ours, nullptr);
    if (!ours) return;
    info_.reset(fi_dupinfo(ours));
    EXPECT_EQ(fi_fabric(info_->fabric_attr, &fabric_, nullptr), 0);
    EXPECT_EQ(fi_domain(fabric_, info_.get(), &domain_, nullptr), 0);
    fi_av_attr aa{};
    aa.type = FI_AV_MAP;
    EXPECT_EQ(fi_av_open(domain_, &aa, &av_, nullptr), 0);
  }
  ~Domain() {
    for (fid* f : {av_ ? &av_->fid : nullptr, domain_ ? &domain_->fid : nullptr,
                   fabric_ ? &fabric_->fid : nullptr})
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
  }
  fi_info* info() const { return info_.get(); }
  fid_domain* domain() const { return domain_; }
  fid_av* av() const { return av_; }
  // The engine's counters (the process's one engine).
  softrdma_counters counters() {
    softrdma_counters c{};
    void* p = nullptr;
    EXPECT_EQ(fi_open_ops(&domain_->fid, FI_SOFTRDMA_COUNTERS_OPS, 0, &p, nullptr), 0);
    if (p) {
      EXPECT_EQ(static_cast<fi_softrdma_counters_ops*>(p)->read(&domain_->fid, &c, sizeof(c)), 0);
    }
    return c;
  }

 private:
  Info info_;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
};

class Peer {
 public:
  // cq_size 0: the provider's default.
  explicit Peer(Domain& d, size_t cq_size = 0) : window_(kWindow, 0) {
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = cq_size;
    EXPECT_EQ(fi_cq_open(d.domain(), &ca, &cq_, nullptr), 0);
    EXPECT_EQ(fi_endpoint(d.domain(), d.info(), &ep_, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &d.av()->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), 0);
    EXPECT_EQ(fi_enable(ep_), 0);
    EXPECT_EQ(fi_mr_reg(d.domain(), window_.data(), window_.size(),
                        FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr_, nullptr),
              0);
    sockaddr_in name{};
    size_t len = sizeof(name);
    EXPECT_EQ(fi_getname(&ep_->fid, &name, &len), 0);
    EXPECT_EQ(fi_av_insert(d.av(), &name, 1, &addr_, 0, nullptr), 1);
  }
  ~Peer() {
    for (fid* f : {mr_ ? &mr_->fid : nullptr, ep_ ? &ep_->fid : nullptr, cq_ ? &cq_->fid : nullptr})
      if (f) {
        EXPECT_EQ(fi_close(f), 0);
      }
  }
  fid_ep* ep() const { return ep_; }
  fid_cq* cq() const { return cq_; }
  fi_addr_t addr() const { return addr_; }  // in the shared AV
  uint64_t base() const { return reinterpret_cast<uint64_t>(window_.data()); }
  uint64_t key() const { return fi_mr_key(mr_); }
  uint8_t* at(size_t off) { return window_.data() + off; }
  uint64_t word(size_t off) const {
    uint64_t v;
    std::memcpy(&v, window_.data() + off, 8);
    return v;
  }

  // The next completion (*e, its sender in *src) or error (*err, err->err
  // set); a failure if none comes.
  ::testing::AssertionResult next(fi_cq_tagged_entry* e, fi_cq_err_entry* err,
                                  fi_addr_t* src = nullptr) {
    ssize_t n = -FI_EAGAIN;
    fi_addr_t from = FI_ADDR_NOTAVAIL;
    poll_until([&] { return (n = fi_cq_readfrom(cq_, e, 1, &from)) != -FI_EAGAIN; });
    if (src) *src = from;
    *err = {};
    if (n == 1) return ::testing::AssertionSuccess();
    if (n == -FI_EAVAIL && fi_cq_readerr(cq_, err, 0) == 1) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "no completion (" << n << ")";
  }
  // The next completion: its context, or the error's (err->err set).
  ::testing::AssertionResult done(void** ctx, fi_cq_err_entry* err = nullptr) {
    fi_cq_tagged_entry e{};
    fi_cq_err_entry ee{};
    if (auto r = next(&e, &ee); !r) return r;
    if (err) *err = ee;
    *ctx = ee.err ? ee.op_context : e.op_context;
    if (ee.err && !err)
      return ::testing::AssertionFailure() << "error " << ee.err << " " << fi_strerror(ee.err);
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult ok(void* want) {
    void* ctx = nullptr;
    if (auto r = done(&ctx); !r) return r;
    if (ctx != want) return ::testing::AssertionFailure() << "completion for another operation";
    return ::testing::AssertionSuccess();
  }

 private:
  std::vector<uint8_t> window_;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_mr* mr_ = nullptr;
  fi_addr_t addr_ = FI_ADDR_NOTAVAIL;
};

// A test with one domain and the peers it adds.
class RdmFixture : public ::testing::Test {
 protected:
  explicit RdmFixture(uint64_t caps) : caps_(caps) {}
  void SetUp() override {
    d_ = std::make_unique<Domain>(caps_);
    ASSERT_NE(d_->domain(), nullptr);
  }
  void TearDown() override {
    peers_.clear();
    d_.reset();
  }
  Peer& add(size_t cq_size = 0) {
    peers_.push_back(std::make_unique<Peer>(*d_, cq_size));
    return *peers_.back();
  }

  uint64_t caps_;
  std::unique_ptr<Domain> d_;
  std::vector<std::unique_ptr<Peer>> peers_;
};

}  // namespace fit
