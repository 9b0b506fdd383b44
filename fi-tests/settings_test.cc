// FI_SOFTRDMA_* settings through libfabric: `fi_info -e` lists every one
// with what it takes, and a bad value makes fi_getinfo and fi_fabric fail
// with a message on stderr that names the variable. Each bad value is tried
// in a child process (a death test), whose stderr the test reads.
#include <cstdlib>
#include <cstring>
#include <string>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

// Exit codes of the children, so that a wrong return code is told apart
// from a message that is missing.
constexpr int kFailedAsExpected = 0;
constexpr int kSucceeded = 10;
constexpr int kOtherError = 11;

int getinfo_with(const char* var, const char* value) {
  setenv(var, value, 1);
  Info hints = msg_hints();
  Info list;
  const int rc = getinfo(hints.get(), &list);
  return rc == -FI_ENODATA ? kFailedAsExpected : rc == 0 ? kSucceeded : kOtherError;
}

// fi_getinfo under good settings, then fi_fabric with one gone bad: what an
// application sees when a setting it passes on to a later fabric is wrong.
int fabric_with(const char* var, const char* value) {
  Info hints = msg_hints();
  Info list;
  if (getinfo(hints.get(), &list) != 0) return kOtherError;
  setenv(var, value, 1);
  fid_fabric* fabric = nullptr;
  const int rc = fi_fabric(list->fabric_attr, &fabric, nullptr);
  if (rc == 0) {
    fi_close(&fabric->fid);
    return kSucceeded;
  }
  return rc == -FI_EINVAL ? kFailedAsExpected : kOtherError;
}

class Settings : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// In a child: run(var, value) exits with `code`, having printed what
// `message` (a regular expression) matches.
void expect_exit(int (*run)(const char*, const char*), const char* var, const char* value,
                 int code, const std::string& message) {
  EXPECT_EXIT(std::exit(run(var, value)), ::testing::ExitedWithCode(code), message)
      << var << "=" << value;
}

TEST_F(Settings, FiGetinfoRefusesABadValueByName) {
  expect_exit(getinfo_with, "FI_SOFTRDMA_THREADING", "c9", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_THREADING=c9: expected one of c1\\|c2\\|c3");
  expect_exit(getinfo_with, "FI_SOFTRDMA_MTU", "-5", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_MTU=-5: expected an integer in 68\\.\\.65385");
  expect_exit(getinfo_with, "FI_SOFTRDMA_CRC", "maybe", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_CRC=maybe: expected one of 0\\|1\\|no\\|yes");
  expect_exit(getinfo_with, "FI_SOFTRDMA_TRANSPORT", "tcp", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_TRANSPORT=tcp: expected one of dpdk\\|kernel");
  expect_exit(getinfo_with, "FI_SOFTRDMA_MTUU", "9000", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_MTUU=9000: no such setting");
}

TEST_F(Settings, FiGetinfoTakesGoodValues) {
  expect_exit(getinfo_with, "FI_SOFTRDMA_CRC", "yes", kSucceeded, "");
  expect_exit(getinfo_with, "FI_SOFTRDMA_TX_SIZE", "1k", kSucceeded, "");
}

TEST_F(Settings, FiFabricRefusesABadValueByName) {
  expect_exit(fabric_with, "FI_SOFTRDMA_TRANSPORT", "rdma", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_TRANSPORT=rdma: expected one of dpdk\\|kernel");
  expect_exit(fabric_with, "FI_SOFTRDMA_RTR", "foo", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_RTR=foo: expected one of write\\|read\\|send\\|none");
  expect_exit(fabric_with, "FI_SOFTRDMA_WATCHDOG_US", "-1", kFailedAsExpected,
              "softrdma: FI_SOFTRDMA_WATCHDOG_US=-1: expected an integer in 0");
}

// fi_getparams: what `fi_info -e` prints.
TEST_F(Settings, ListedWithWhatTheyTakeAndTheirDefaults) {
  Info hints = msg_hints();
  Info list;
  ASSERT_EQ(getinfo(hints.get(), &list), 0);  // loads the provider
  fi_param* params = nullptr;
  int count = 0;
  ASSERT_EQ(fi_getparams(&params, &count), 0);
  int ours = 0;
  std::string threading, crc, mtu, unexpected, nic;
  for (int i = 0; i < count; ++i) {
    const std::string name = params[i].name;
    if (name.rfind("FI_SOFTRDMA_", 0) != 0) continue;
    ++ours;
    if (name == "FI_SOFTRDMA_THREADING") {
      EXPECT_EQ(params[i].type, FI_PARAM_STRING);
      threading = params[i].help_string;
    }
    if (name == "FI_SOFTRDMA_CRC") {
      EXPECT_EQ(params[i].type, FI_PARAM_BOOL);
      crc = params[i].help_string;
    }
    if (name == "FI_SOFTRDMA_MTU") {
      EXPECT_EQ(params[i].type, FI_PARAM_INT);
      mtu = params[i].help_string;
    }
    if (name == "FI_SOFTRDMA_UNEXPECTED_BYTES") unexpected = params[i].help_string;
    if (name == "FI_SOFTRDMA_NIC") nic = params[i].help_string;
  }
  fi_freeparams(params);
  EXPECT_EQ(ours, 27);
  EXPECT_NE(nic.find("Takes one of af_xdp|af_packet; default af_packet"), std::string::npos) << nic;
  EXPECT_NE(threading.find("Takes one of c1|c2|c3; default c2"), std::string::npos) << threading;
  EXPECT_NE(crc.find("Default 1"), std::string::npos) << crc;
  EXPECT_NE(mtu.find("Takes an integer in 68..65385"), std::string::npos) << mtu;
  EXPECT_NE(unexpected.find("256k"), std::string::npos) << unexpected;
}

}  // namespace
}  // namespace fit
