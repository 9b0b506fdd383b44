// fi_av on a softrdma domain, as fi_av(3) defines it: table indices in
// insertion order with the lowest free one reused, names read back whole or
// truncated, bad names refused one by one (FI_SYNC_ERR), node/service and
// FI_ADDR_STR insertion, symmetric ranges, all-or-nothing removal, and
// FI_EVENT's outcomes on the bound EQ.
#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <vector>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

sockaddr_in name(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip, &a.sin_addr), 1) << ip;
  return a;
}

::testing::AssertionResult holds(fid_av* av, fi_addr_t at, const sockaddr_in& want) {
  sockaddr_in got{};
  size_t len = sizeof(got);
  const int rc = fi_av_lookup(av, at, &got, &len);
  if (rc != 0) return ::testing::AssertionFailure() << "lookup " << at << ": " << fi_strerror(-rc);
  if (len != sizeof(got)) return ::testing::AssertionFailure() << "addrlen " << len;
  if (std::memcmp(&got, &want, sizeof(got)) != 0)
    return ::testing::AssertionFailure() << "entry " << at << " holds another name";
  return ::testing::AssertionSuccess();
}

class Av : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(f_.domain(), nullptr); }
  void TearDown() override {
    if (av_) {
      EXPECT_EQ(fi_close(&av_->fid), 0);
    }
  }
  void open(fi_av_type type = FI_AV_TABLE, uint64_t flags = 0) {
    fi_av_attr attr{};
    attr.type = type;
    attr.flags = flags;
    ASSERT_EQ(fi_av_open(f_.domain(), &attr, &av_, nullptr), 0);
  }

  Fabric f_;
  fid_av* av_ = nullptr;
};

TEST_F(Av, TableIndicesFollowInsertionAndReuseTheLowestFree) {
  ASSERT_NO_FATAL_FAILURE(open());
  const sockaddr_in a[] = {name("127.0.0.1", 5000), name("10.0.0.2", 5001),
                           name("192.168.7.3", 65535)};
  fi_addr_t at[3];
  ASSERT_EQ(fi_av_insert(av_, a, 3, at, 0, nullptr), 3);
  const sockaddr_in b[] = {name("10.0.0.4", 7), name("10.0.0.5", 8)};
  ASSERT_EQ(fi_av_insert(av_, b, 2, nullptr, 0, nullptr), 2);  // a table may omit fi_addr
  for (fi_addr_t i = 0; i < 3; ++i) {
    EXPECT_EQ(at[i], i);
    EXPECT_TRUE(holds(av_, i, a[i]));
  }
  EXPECT_TRUE(holds(av_, 3, b[0]));
  EXPECT_TRUE(holds(av_, 4, b[1]));

  fi_addr_t gone[] = {3, 1};
  ASSERT_EQ(fi_av_remove(av_, gone, 2, 0), 0);
  sockaddr_in out{};
  size_t len = sizeof(out);
  EXPECT_EQ(fi_av_lookup(av_, 1, &out, &len), -FI_EINVAL);
  EXPECT_EQ(fi_av_lookup(av_, 3, &out, &len), -FI_EINVAL);
  EXPECT_EQ(fi_av_lookup(av_, 99, &out, &len), -FI_EINVAL);
  const sockaddr_in c[] = {name("10.0.0.6", 9), name("10.0.0.7", 10), name("10.0.0.8", 11)};
  fi_addr_t at2[3];
  ASSERT_EQ(fi_av_insert(av_, c, 3, at2, 0, nullptr), 3);
  EXPECT_EQ(at2[0], 1u);
  EXPECT_EQ(at2[1], 3u);
  EXPECT_EQ(at2[2], 5u);
  EXPECT_TRUE(holds(av_, 1, c[0]));
  EXPECT_TRUE(holds(av_, 3, c[1]));
  EXPECT_TRUE(holds(av_, 5, c[2]));
  EXPECT_TRUE(holds(av_, 0, a[0]));  // untouched
}

TEST_F(Av, UnspecifiedTypeIsTableAndMapWorksAlike) {
  fi_av_attr attr{};
  attr.type = FI_AV_UNSPEC;
  ASSERT_EQ(fi_av_open(f_.domain(), &attr, &av_, nullptr), 0);
  EXPECT_EQ(attr.type, FI_AV_TABLE);
  ASSERT_EQ(fi_close(&av_->fid), 0);
  av_ = nullptr;
  ASSERT_NO_FATAL_FAILURE(open(FI_AV_MAP));
  const sockaddr_in a[] = {name("10.1.0.1", 1), name("10.1.0.2", 2)};
  fi_addr_t at[2];
  ASSERT_EQ(fi_av_insert(av_, a, 2, at, 0, nullptr), 2);
  EXPECT_NE(at[0], at[1]);
  EXPECT_TRUE(holds(av_, at[0], a[0]));
  EXPECT_TRUE(holds(av_, at[1], a[1]));
}

TEST_F(Av, BadNamesAreRefusedOneByOne) {
  ASSERT_NO_FATAL_FAILURE(open());
  sockaddr_in a[4] = {name("10.2.0.1", 1), name("10.2.0.2", 0), name("0.0.0.0", 3),
                      name("10.2.0.4", 4)};
  a[0].sin_family = AF_INET6;  // not this domain's format
  fi_addr_t at[4];
  int errs[4] = {-1, -1, -1, -1};
  ASSERT_EQ(fi_av_insert(av_, a, 4, at, FI_SYNC_ERR, errs), 1);
  EXPECT_EQ(at[0], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(at[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(at[2], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(at[3], 0u);
  EXPECT_EQ(errs[0], FI_EINVAL);
  EXPECT_EQ(errs[1], FI_EINVAL);
  EXPECT_EQ(errs[2], FI_EINVAL);
  EXPECT_EQ(errs[3], 0);
  EXPECT_TRUE(holds(av_, 0, a[3]));
  EXPECT_EQ(fi_av_insert(av_, a, 1, at, FI_AV_USER_ID, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(fi_av_insert(av_, nullptr, 1, at, 0, nullptr), -FI_EINVAL);
}

TEST_F(Av, NamesReadBackTruncatedWithTheSizeNeeded) {
  ASSERT_NO_FATAL_FAILURE(open());
  const sockaddr_in a = name("10.3.0.1", 4242);
  fi_addr_t at;
  ASSERT_EQ(fi_av_insert(av_, &a, 1, &at, 0, nullptr), 1);
  uint8_t buf[sizeof(sockaddr_in)];
  std::memset(buf, 0xee, sizeof(buf));
  size_t len = 4;
  ASSERT_EQ(fi_av_lookup(av_, at, buf, &len), 0);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  EXPECT_EQ(std::memcmp(buf, &a, 4), 0);
  EXPECT_EQ(buf[4], 0xee);  // nothing past what was given

  char str[64];
  size_t slen = sizeof(str);
  ASSERT_EQ(fi_av_straddr(av_, &a, str, &slen), str);
  EXPECT_STREQ(str, "fi_sockaddr_in://10.3.0.1:4242");
  EXPECT_EQ(slen, std::strlen(str) + 1);
  char small[8];
  size_t small_len = sizeof(small);
  ASSERT_EQ(fi_av_straddr(av_, &a, small, &small_len), small);
  EXPECT_EQ(small_len, std::strlen(str) + 1);
  EXPECT_EQ(std::string(small), std::string(str, sizeof(small) - 1));
}

TEST_F(Av, NodeAndServiceAndItsOwnStringsInsert) {
  ASSERT_NO_FATAL_FAILURE(open());
  fi_addr_t at[3];
  ASSERT_EQ(fi_av_insertsvc(av_, "127.0.0.1", "9229", &at[0], 0, nullptr), 1);
  EXPECT_TRUE(holds(av_, at[0], name("127.0.0.1", 9229)));
  ASSERT_EQ(fi_av_insertsvc(av_, "localhost", "9230", &at[1], 0, nullptr), 1);
  EXPECT_TRUE(holds(av_, at[1], name("127.0.0.1", 9230)));
  // fi_av_straddr's rendering is an FI_ADDR_STR node with no service.
  const sockaddr_in a = name("10.4.0.9", 31337);
  char str[64];
  size_t len = sizeof(str);
  ASSERT_NE(fi_av_straddr(av_, &a, str, &len), nullptr);
  ASSERT_EQ(fi_av_insertsvc(av_, str, nullptr, &at[2], 0, nullptr), 1);
  EXPECT_TRUE(holds(av_, at[2], a));

  fi_addr_t bad = 0;
  int err = -1;
  EXPECT_EQ(fi_av_insertsvc(av_, nullptr, "1", &bad, FI_SYNC_ERR, &err), 0);
  EXPECT_EQ(bad, FI_ADDR_NOTAVAIL);
  EXPECT_EQ(err, FI_EINVAL);
  EXPECT_EQ(fi_av_insertsvc(av_, "10.4.0.1", "not-a-port", &bad, 0, nullptr), 0);
  EXPECT_EQ(fi_av_insertsvc(av_, "fi_sockaddr_in://10.4.0.1", nullptr, &bad, 0, nullptr), 0);
}

TEST_F(Av, SymmetricRangesInsertNodeByNodeThenServiceByService) {
  ASSERT_NO_FATAL_FAILURE(open());
  fi_addr_t at[6];
  ASSERT_EQ(fi_av_insertsym(av_, "10.1.1.254", 3, "5000", 2, at, 0, nullptr), 6);
  const sockaddr_in want[] = {name("10.1.1.254", 5000), name("10.1.1.254", 5001),
                              name("10.1.1.255", 5000), name("10.1.1.255", 5001),
                              name("10.1.2.0", 5000),   name("10.1.2.0", 5001)};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(at[i], static_cast<fi_addr_t>(i));
    EXPECT_TRUE(holds(av_, at[i], want[i])) << i;
  }
  EXPECT_EQ(fi_av_insertsym(av_, "10.1.1.1", 1, "65535", 2, at, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsym(av_, "10.1.1.1", 1, "x", 1, at, 0, nullptr), -FI_EINVAL);
  // A count no AV could hold is refused before anything is resolved.
  EXPECT_EQ(fi_av_insertsym(av_, "10.1.1.1", SIZE_MAX, "5000", 1, at, 0, nullptr), -FI_EINVAL);
  EXPECT_EQ(fi_av_insertsym(av_, "10.1.1.1", 1 << 16, "1", 1 << 16, at, 0, nullptr),
            -FI_EINVAL);
  // Past the last IPv4 address the range does not wrap around to 0.0.0.0.
  fi_addr_t end[3];
  EXPECT_EQ(fi_av_insertsym(av_, "255.255.255.255", 3, "7", 1, end, 0, nullptr), 1);
  EXPECT_TRUE(holds(av_, end[0], name("255.255.255.255", 7)));
  EXPECT_EQ(end[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(end[2], FI_ADDR_NOTAVAIL);  // not 0.0.0.1
}

TEST_F(Av, RemovalIsAllOrNothing) {
  ASSERT_NO_FATAL_FAILURE(open());
  const sockaddr_in a[] = {name("10.5.0.1", 1), name("10.5.0.2", 2)};
  ASSERT_EQ(fi_av_insert(av_, a, 2, nullptr, 0, nullptr), 2);
  fi_addr_t mixed[] = {0, 7};
  EXPECT_EQ(fi_av_remove(av_, mixed, 2, 0), -FI_EINVAL);
  fi_addr_t twice[] = {1, 1};
  EXPECT_EQ(fi_av_remove(av_, twice, 2, 0), -FI_EINVAL);
  fi_addr_t one[] = {0};
  EXPECT_EQ(fi_av_remove(av_, one, 1, FI_MORE), -FI_EBADFLAGS);
  EXPECT_TRUE(holds(av_, 0, a[0]));
  EXPECT_TRUE(holds(av_, 1, a[1]));
  EXPECT_EQ(fi_av_remove(av_, one, 1, 0), 0);
  EXPECT_EQ(fi_av_remove(av_, one, 1, 0), -FI_EINVAL);  // already gone
  EXPECT_TRUE(holds(av_, 1, a[1]));
}

TEST_F(Av, EventsReportEachFailureThenTheCount) {
  ASSERT_NO_FATAL_FAILURE(open(FI_AV_TABLE, FI_EVENT));
  const sockaddr_in a[] = {name("10.6.0.1", 1), name("10.6.0.2", 0), name("10.6.0.3", 3)};
  fi_addr_t at[3];
  int ctx = 0;
  EXPECT_EQ(fi_av_insert(av_, a, 3, at, 0, &ctx), -FI_ENOEQ);  // no EQ bound yet
  fi_eq_attr ea{};
  ea.wait_obj = FI_WAIT_UNSPEC;
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(f_.fabric(), &ea, &eq, nullptr), 0);
  ASSERT_EQ(fi_av_bind(av_, &eq->fid, 0), 0);
  EXPECT_EQ(fi_av_insert(av_, a, 3, at, FI_SYNC_ERR, &ctx), -FI_EBADFLAGS);
  ASSERT_EQ(fi_av_insert(av_, a, 3, at, 0, &ctx), 0);
  EXPECT_EQ(at[0], 0u);
  EXPECT_EQ(at[1], FI_ADDR_NOTAVAIL);
  EXPECT_EQ(at[2], 1u);

  uint32_t event = 0;
  fi_eq_entry entry{};
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), -FI_EAVAIL);
  fi_eq_err_entry err{};
  ASSERT_EQ(fi_eq_readerr(eq, &err, 0), static_cast<ssize_t>(sizeof(err)));
  EXPECT_EQ(err.fid, &av_->fid);
  EXPECT_EQ(err.context, &ctx);
  EXPECT_EQ(err.err, FI_EINVAL);
  EXPECT_EQ(err.data, 1u);  // the failed name's index
  ASSERT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), static_cast<ssize_t>(sizeof(entry)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_AV_COMPLETE));
  EXPECT_EQ(entry.fid, &av_->fid);
  EXPECT_EQ(entry.context, &ctx);
  EXPECT_EQ(entry.data, 2u);
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
  EXPECT_TRUE(holds(av_, 0, a[0]));
  EXPECT_TRUE(holds(av_, 1, a[2]));

  EXPECT_EQ(fi_close(&eq->fid), -FI_EBUSY);  // the AV still reports to it
  ASSERT_EQ(fi_close(&av_->fid), 0);
  av_ = nullptr;
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_F(Av, WithoutEventsAnEqHearsNothing) {
  ASSERT_NO_FATAL_FAILURE(open());
  fi_eq_attr ea{};
  fid_eq* eq = nullptr;
  ASSERT_EQ(fi_eq_open(f_.fabric(), &ea, &eq, nullptr), 0);
  ASSERT_EQ(fi_av_bind(av_, &eq->fid, 0), 0);
  EXPECT_EQ(fi_av_bind(av_, &eq->fid, 0), -FI_EINVAL);  // one EQ per AV
  const sockaddr_in a[] = {name("10.8.0.1", 1), name("10.8.0.2", 0)};
  fi_addr_t at[2];
  EXPECT_EQ(fi_av_insert(av_, a, 2, at, 0, nullptr), 1);
  uint32_t event = 0;
  fi_eq_entry entry{};
  EXPECT_EQ(fi_eq_read(eq, &event, &entry, sizeof(entry), 0), -FI_EAGAIN);
  ASSERT_EQ(fi_close(&av_->fid), 0);
  av_ = nullptr;
  EXPECT_EQ(fi_close(&eq->fid), 0);
}

TEST_F(Av, OpenRefusesWhatIsNotOffered) {
  fi_av_attr attr{};
  attr.type = FI_AV_TABLE;
  attr.name = "shared";
  EXPECT_EQ(fi_av_open(f_.domain(), &attr, &av_, nullptr), -FI_ENOSYS);
  attr.name = nullptr;
  attr.rx_ctx_bits = 2;
  EXPECT_EQ(fi_av_open(f_.domain(), &attr, &av_, nullptr), -FI_ENOSYS);
  attr.rx_ctx_bits = 0;
  attr.type = static_cast<fi_av_type>(77);
  EXPECT_EQ(fi_av_open(f_.domain(), &attr, &av_, nullptr), -FI_EINVAL);
  attr.type = FI_AV_TABLE;
  attr.flags = FI_REMOTE_READ;
  EXPECT_EQ(fi_av_open(f_.domain(), &attr, &av_, nullptr), -FI_EBADFLAGS);
  EXPECT_EQ(av_, nullptr);
  attr.flags = 0;
  ASSERT_EQ(fi_av_open(f_.domain(), &attr, &av_, nullptr), 0);
  fid_av* second = nullptr;
  ASSERT_EQ(fi_av_open(f_.domain(), &attr, &second, nullptr), 0);  // independent tables
  const sockaddr_in a = name("10.7.0.1", 1);
  ASSERT_EQ(fi_av_insert(second, &a, 1, nullptr, 0, nullptr), 1);
  sockaddr_in out{};
  size_t len = sizeof(out);
  EXPECT_EQ(fi_av_lookup(av_, 0, &out, &len), -FI_EINVAL);
  EXPECT_EQ(fi_close(&second->fid), 0);
}

}  // namespace
}  // namespace fit
