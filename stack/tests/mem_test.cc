// MrTable: STag life cycle (RFC 5040 §2.1: a stale STag must never reach
// memory registered later), protection domains, access rights and the
// bounds arithmetic every tagged placement relies on.
#include "stack/iwarp/mem.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "stack/verbs.h"

namespace softrdma::iwarp {
namespace {

constexpr uint32_t kAll =
    kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite | kAccessRemoteAtomic;

uint64_t va(const void* p) { return reinterpret_cast<uint64_t>(p); }

class MemTest : public ::testing::Test {
 protected:
  // check() that also verifies the returned pointer on success.
  AccessResult check(uint32_t stag, const Pd* pd, uint64_t to, uint64_t len, uint32_t need) {
    uint8_t* out = nullptr;
    AccessResult r = mrs_.check(stag, pd, to, len, need, &out);
    if (r == AccessResult::kOk) {
      EXPECT_EQ(out, reinterpret_cast<uint8_t*>(to));
    }
    return r;
  }

  MrTable mrs_;
  Pd pd_{1};
  Pd other_pd_{2};
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(4096);
};

TEST_F(MemTest, RegFindDereg) {
  Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
  ASSERT_NE(mr, nullptr);
  const uint32_t stag = mr->stag;
  EXPECT_NE(stag >> 8, 0u) << "STag index 0 is never handed out";
  EXPECT_EQ(mrs_.live(), 1u);
  const Mr* found = mrs_.find(stag);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->pd, &pd_);
  EXPECT_EQ(found->va, va(buf_.data()));
  EXPECT_EQ(found->len, buf_.size());
  EXPECT_EQ(found->access, kAll);
  EXPECT_TRUE(found->valid);
  EXPECT_EQ(check(stag, &pd_, va(buf_.data()), buf_.size(), kAll), AccessResult::kOk);

  EXPECT_EQ(mrs_.dereg(stag), 0);
  EXPECT_EQ(mrs_.live(), 0u);
  EXPECT_EQ(mrs_.find(stag), nullptr);
  EXPECT_EQ(check(stag, &pd_, va(buf_.data()), 1, 0), AccessResult::kInvalidStag);
  EXPECT_EQ(mrs_.dereg(stag), -ENOENT) << "double dereg";
}

TEST_F(MemTest, UnknownStagsRefused) {
  EXPECT_EQ(check(0, &pd_, va(buf_.data()), 1, 0), AccessResult::kInvalidStag);
  EXPECT_EQ(mrs_.find(0), nullptr);
  Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
  ASSERT_NE(mr, nullptr);
  const uint32_t stag = mr->stag;
  EXPECT_EQ(check(stag + (1u << 8), &pd_, va(buf_.data()), 1, 0), AccessResult::kInvalidStag)
      << "index past the table";
  EXPECT_EQ(check(stag ^ 0x5a, &pd_, va(buf_.data()), 1, 0), AccessResult::kInvalidStag)
      << "right index, wrong key";
  EXPECT_EQ(check(0xffffffffu, &pd_, va(buf_.data()), 1, 0), AccessResult::kInvalidStag);
  EXPECT_EQ(mrs_.dereg(stag ^ 0x5a), -ENOENT);
  EXPECT_EQ(mrs_.live(), 1u);
}

// An index is reused only with a new key: the stale STag is dead, and
// deregistering it again must not close the new region.
TEST_F(MemTest, KeyChangesOnIndexReuse) {
  Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
  ASSERT_NE(mr, nullptr);
  uint32_t prev = mr->stag;
  std::set<uint32_t> seen{prev};
  for (int i = 0; i < 255; ++i) {
    ASSERT_EQ(mrs_.dereg(prev), 0);
    Mr* again = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
    ASSERT_NE(again, nullptr);
    const uint32_t stag = again->stag;
    EXPECT_EQ(stag >> 8, prev >> 8) << "freed index is reused";
    EXPECT_NE(stag, prev);
    EXPECT_TRUE(seen.insert(stag).second) << "key repeated within 256 uses";
    EXPECT_EQ(check(prev, &pd_, va(buf_.data()), 1, 0), AccessResult::kInvalidStag);
    EXPECT_EQ(mrs_.find(prev), nullptr);
    EXPECT_EQ(mrs_.dereg(prev), -ENOENT);
    EXPECT_EQ(check(stag, &pd_, va(buf_.data()), 1, 0), AccessResult::kOk)
        << "dereg of the stale STag closed the new region";
    EXPECT_EQ(mrs_.live(), 1u);
    prev = stag;
  }
}

// The table hands out Mr pointers (Engine::reg_mr returns them to callers);
// they must stay valid while the table grows.
TEST_F(MemTest, MrPointersStableAcrossGrowth) {
  std::vector<Mr*> mrs;
  std::vector<uint32_t> stags;
  for (int i = 0; i < 1000; ++i) {
    Mr* mr = mrs_.reg(&pd_, buf_.data() + i % 64, 64, kAccessRemoteRead);
    ASSERT_NE(mr, nullptr);
    mrs.push_back(mr);
    stags.push_back(mr->stag);
  }
  for (size_t i = 0; i < mrs.size(); ++i) {
    EXPECT_EQ(mrs_.find(stags[i]), mrs[i]) << "Mr* of registration " << i << " moved";
    if (mrs_.find(stags[i]) != mrs[i]) break;
  }
}

TEST_F(MemTest, DistinctStagsForLiveRegions) {
  std::set<uint32_t> stags;
  for (int i = 0; i < 300; ++i) {
    Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
    ASSERT_NE(mr, nullptr);
    EXPECT_TRUE(stags.insert(mr->stag).second);
  }
  EXPECT_EQ(mrs_.live(), 300u);
}

TEST_F(MemTest, PdMismatch) {
  Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
  ASSERT_NE(mr, nullptr);
  const uint32_t stag = mr->stag;
  EXPECT_EQ(check(stag, &other_pd_, va(buf_.data()), 8, 0), AccessResult::kPdMismatch);
  EXPECT_EQ(check(stag, nullptr, va(buf_.data()), 8, 0), AccessResult::kPdMismatch);
  EXPECT_EQ(mrs_.invalidate(stag, &other_pd_), AccessResult::kPdMismatch);
  EXPECT_EQ(check(stag, &pd_, va(buf_.data()), 8, kAll), AccessResult::kOk)
      << "a refused invalidate must leave the region alone";
}

// Each right is needed on its own; having the others does not stand in.
TEST_F(MemTest, EachAccessRight) {
  const uint32_t rights[] = {kAccessLocalWrite, kAccessRemoteRead, kAccessRemoteWrite,
                             kAccessRemoteAtomic};
  for (uint32_t have : rights) {
    Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll & ~have);
    ASSERT_NE(mr, nullptr);
    const uint32_t without = mr->stag;
    mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), have);
    ASSERT_NE(mr, nullptr);
    const uint32_t only = mr->stag;
    for (uint32_t need : rights) {
      const AccessResult expect_only = need == have ? AccessResult::kOk : AccessResult::kAccessRights;
      const AccessResult expect_without = need == have ? AccessResult::kAccessRights : AccessResult::kOk;
      EXPECT_EQ(check(only, &pd_, va(buf_.data()), 8, need), expect_only)
          << "have " << have << " need " << need;
      EXPECT_EQ(check(without, &pd_, va(buf_.data()), 8, need), expect_without)
          << "have all but " << have << " need " << need;
    }
    // Local read is implied: no right needed.
    EXPECT_EQ(check(only, &pd_, va(buf_.data()), 8, 0), AccessResult::kOk);
    // A combination needs every bit of it.
    EXPECT_EQ(check(only, &pd_, va(buf_.data()), 8, kAll), AccessResult::kAccessRights);
  }
  Mr* none = mrs_.reg(&pd_, buf_.data(), buf_.size(), 0);
  ASSERT_NE(none, nullptr);
  const uint32_t stag = none->stag;
  EXPECT_EQ(check(stag, &pd_, va(buf_.data()), 8, 0), AccessResult::kOk);
  EXPECT_EQ(check(stag, &pd_, va(buf_.data()), 8, kAccessRemoteRead), AccessResult::kAccessRights);
}

TEST_F(MemTest, Bounds) {
  // A region in the middle of buf_, so that one octet either side is still
  // real memory: the check alone must refuse it.
  const uint64_t base = va(buf_.data()) + 1024, len = 2048, end = base + len;
  Mr* mr = mrs_.reg(&pd_, buf_.data() + 1024, len, kAll);
  ASSERT_NE(mr, nullptr);
  const uint32_t s = mr->stag;
  EXPECT_EQ(check(s, &pd_, base, len, kAll), AccessResult::kOk) << "whole region";
  EXPECT_EQ(check(s, &pd_, base, 1, kAll), AccessResult::kOk) << "first octet";
  EXPECT_EQ(check(s, &pd_, end - 1, 1, kAll), AccessResult::kOk) << "last octet";
  EXPECT_EQ(check(s, &pd_, base + 100, 200, kAll), AccessResult::kOk) << "inside";
  EXPECT_EQ(check(s, &pd_, base - 1, 1, kAll), AccessResult::kBaseBounds) << "one before";
  EXPECT_EQ(check(s, &pd_, base - 1, len, kAll), AccessResult::kBaseBounds) << "starts before";
  EXPECT_EQ(check(s, &pd_, end, 1, kAll), AccessResult::kBaseBounds) << "one past the end";
  EXPECT_EQ(check(s, &pd_, base, len + 1, kAll), AccessResult::kBaseBounds) << "one too long";
  EXPECT_EQ(check(s, &pd_, end - 1, 2, kAll), AccessResult::kBaseBounds) << "straddles end";
  EXPECT_EQ(check(s, &pd_, 0, 1, kAll), AccessResult::kBaseBounds);
  EXPECT_EQ(check(s, &pd_, end + (1u << 20), 8, kAll), AccessResult::kBaseBounds);
}

TEST_F(MemTest, ZeroLength) {
  const uint64_t base = va(buf_.data()) + 512, len = 256, end = base + len;
  Mr* mr = mrs_.reg(&pd_, buf_.data() + 512, len, kAll);
  ASSERT_NE(mr, nullptr);
  const uint32_t s = mr->stag;
  EXPECT_EQ(check(s, &pd_, base, 0, kAll), AccessResult::kOk);
  EXPECT_EQ(check(s, &pd_, end, 0, kAll), AccessResult::kOk) << "empty access at the end";
  EXPECT_EQ(check(s, &pd_, base - 1, 0, kAll), AccessResult::kBaseBounds);
  EXPECT_EQ(check(s, &pd_, end + 1, 0, kAll), AccessResult::kBaseBounds);

  // A zero-length region: only empty accesses at its address.
  Mr* empty = mrs_.reg(&pd_, buf_.data() + 100, 0, kAll);
  ASSERT_NE(empty, nullptr);
  const uint32_t e = empty->stag;
  EXPECT_EQ(mrs_.find(e)->len, 0u);
  EXPECT_EQ(check(e, &pd_, va(buf_.data()) + 100, 0, kAll), AccessResult::kOk);
  EXPECT_EQ(check(e, &pd_, va(buf_.data()) + 100, 1, kAll), AccessResult::kBaseBounds);
  EXPECT_EQ(check(e, &pd_, va(buf_.data()) + 99, 1, kAll), AccessResult::kBaseBounds);

  // Null memory with a length is not memory.
  EXPECT_EQ(mrs_.reg(&pd_, nullptr, 64, kAll), nullptr);
}

TEST_F(MemTest, ToWrap) {
  Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
  ASSERT_NE(mr, nullptr);
  const uint32_t s = mr->stag;
  const uint64_t base = va(buf_.data());
  EXPECT_EQ(check(s, &pd_, UINT64_MAX - 3, 8, kAll), AccessResult::kToWrap);
  EXPECT_EQ(check(s, &pd_, UINT64_MAX, 2, kAll), AccessResult::kToWrap);
  EXPECT_EQ(check(s, &pd_, base, UINT64_MAX, kAll), AccessResult::kToWrap);
  EXPECT_EQ(check(s, &pd_, base + 8, UINT64_MAX - base, kAll), AccessResult::kToWrap);
  // The largest non-wrapping sum is an ordinary bounds error.
  EXPECT_EQ(check(s, &pd_, base, UINT64_MAX - base, kAll), AccessResult::kBaseBounds);
  EXPECT_EQ(check(s, &pd_, UINT64_MAX, 0, kAll), AccessResult::kBaseBounds);
}

TEST_F(MemTest, Invalidate) {
  Mr* mr = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
  ASSERT_NE(mr, nullptr);
  const uint32_t s = mr->stag;
  EXPECT_EQ(mrs_.invalidate(s, &pd_), AccessResult::kOk);
  EXPECT_EQ(check(s, &pd_, va(buf_.data()), 8, 0), AccessResult::kInvalidStag);
  EXPECT_EQ(mrs_.invalidate(s, &pd_), AccessResult::kInvalidStag) << "already invalid";
  ASSERT_NE(mrs_.find(s), nullptr) << "invalidated, still registered";
  EXPECT_FALSE(mrs_.find(s)->valid);
  EXPECT_EQ(mrs_.live(), 1u);
  EXPECT_EQ(mrs_.dereg(s), 0);
  EXPECT_EQ(mrs_.live(), 0u);
  EXPECT_EQ(mrs_.invalidate(s, &pd_), AccessResult::kInvalidStag) << "deregistered";
  EXPECT_EQ(mrs_.invalidate(0, &pd_), AccessResult::kInvalidStag);
  EXPECT_EQ(mrs_.invalidate(0x12345678u, &pd_), AccessResult::kInvalidStag);

  // The index's next region is valid again, and the old STag cannot touch it.
  Mr* next = mrs_.reg(&pd_, buf_.data(), buf_.size(), kAll);
  ASSERT_NE(next, nullptr);
  const uint32_t n = next->stag;
  EXPECT_EQ(n >> 8, s >> 8);
  EXPECT_EQ(mrs_.invalidate(s, &pd_), AccessResult::kInvalidStag);
  EXPECT_EQ(check(n, &pd_, va(buf_.data()), 8, kAll), AccessResult::kOk);
}

TEST(MemNames, AccessResultNames) {
  for (AccessResult r : {AccessResult::kOk, AccessResult::kInvalidStag, AccessResult::kPdMismatch,
                         AccessResult::kAccessRights, AccessResult::kBaseBounds,
                         AccessResult::kToWrap}) {
    ASSERT_NE(to_string(r), nullptr);
    EXPECT_GT(std::string(to_string(r)).size(), 0u);
  }
}

}  // namespace
}  // namespace softrdma::iwarp
