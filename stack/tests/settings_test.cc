// The FI_SOFTRDMA_* settings registry: each type parses strictly, a bad value
// is refused with a message that names the variable, the value and what it
// takes, and the engine and the DPDK path read what the environment says.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "stack/common/settings.h"
#include "stack/engine.h"
#include "stack/net/dpdk/eal.h"
#include "stack/net/dpdk_transport.h"

namespace softrdma {
namespace {

using settings::Id;

// Each test starts with no FI_SOFTRDMA_* variable (ctest sets some) and
// leaves the environment as it found it.
class Settings : public ::testing::Test {
 protected:
  void SetUp() override {
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var = *e;
      if (var.rfind("FI_SOFTRDMA_", 0) != 0) continue;
      const size_t eq = var.find('=');
      saved_.emplace_back(var.substr(0, eq), var.substr(eq + 1));
    }
    for (const auto& [name, value] : saved_) unsetenv(name.c_str());
  }
  void TearDown() override {
    for (const settings::Setting& s : settings::all()) unsetenv(settings::env_name(s).c_str());
    for (const auto& [name, value] : set_) unsetenv(name.c_str());
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  void set(const std::string& name, const std::string& value) {
    setenv(("FI_SOFTRDMA_" + name).c_str(), value.c_str(), 1);
    set_.emplace_back("FI_SOFTRDMA_" + name, value);
  }
  // check_env() for exactly one variable set to value.
  std::string refusal(const std::string& name, const std::string& value) {
    set(name, value);
    const std::string m = settings::check_env();
    unsetenv(("FI_SOFTRDMA_" + name).c_str());
    return m;
  }
  void expect_refused(const std::string& name, const std::string& value,
                      const std::string& expected) {
    EXPECT_EQ(refusal(name, value),
              "softrdma: FI_SOFTRDMA_" + name + "=" + value + ": expected " + expected);
  }
  void expect_accepted(const std::string& name, const std::string& value) {
    EXPECT_EQ(refusal(name, value), "") << name << "=" << value;
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_, set_;
};

TEST_F(Settings, TableIsWellFormed) {
  std::set<std::string> names;
  for (const settings::Setting& s : settings::all()) {
    EXPECT_TRUE(names.insert(settings::env_name(s)).second) << s.name;
    EXPECT_EQ(&settings::setting(s.id), &s);
    EXPECT_NE(std::string(s.help), "");
    // A default is a value of its own setting, and what it reads as unset.
    if (*s.dflt != '\0') {
      EXPECT_EQ(settings::validate(s, s.dflt), "") << s.name;
    }
    if (s.type == settings::Type::kChoice) {
      EXPECT_EQ(settings::get_string(s.id), s.dflt);
    }
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(Id::kCount));
  EXPECT_EQ(settings::env_name(settings::setting(Id::kConnectTimeoutMs)),
            "FI_SOFTRDMA_CONNECT_TIMEOUT_MS");
  EXPECT_EQ(settings::describe(settings::setting(Id::kThreading)),
            std::string(settings::setting(Id::kThreading).help) +
                ". Takes one of c1|c2|c3; default c2");
  EXPECT_EQ(settings::check_env(), "");
}

TEST_F(Settings, Bool) {
  const std::string takes = "one of 0|1|no|yes|off|on|false|true";
  expect_refused("CRC", "maybe", takes);
  expect_refused("MARKERS", "2", takes);
  expect_refused("DEBUG", "1 ", takes);
  EXPECT_TRUE(settings::get_bool(Id::kCrc));  // the defaults
  EXPECT_FALSE(settings::get_bool(Id::kMarkers));
  for (const char* off : {"0", "no", "off", "false", "FALSE", "No"}) {
    expect_accepted("CRC", off);
    set("CRC", off);
    EXPECT_FALSE(settings::get_bool(Id::kCrc)) << off;
  }
  for (const char* on : {"1", "yes", "on", "true", "True", "ON"}) {
    set("MARKERS", on);
    EXPECT_TRUE(settings::get_bool(Id::kMarkers)) << on;
  }
  set("CRC", "maybe");  // a bad value reads as the default; check_env refuses it
  EXPECT_TRUE(settings::get_bool(Id::kCrc));
}

TEST_F(Settings, Integer) {
  for (const char* bad : {"abc", "-5", "1500x", " 1500", "+1500", "0x5dc", "67", "65386",
                          "99999999999999999999"})
    expect_refused("MTU", bad, "an integer in 68..65385");
  expect_refused("MPA_REV", "7", "an integer in 1..2");
  expect_refused("MPA_REV", "0", "an integer in 1..2");
  expect_refused("WATCHDOG_US", "-1", "an integer in 0..2147483647");
  expect_refused("MBUFS", "63", "an integer in 64..16777216");
  expect_refused("MBUFS", "4k", "an integer in 64..16777216");  // no suffix on a count
  EXPECT_FALSE(settings::is_set(Id::kMtu));
  EXPECT_EQ(settings::get_int(Id::kMtu), 0);  // no default: the mode picks
  EXPECT_EQ(settings::get_int(Id::kWatchdogUs), 1000);
  set("MTU", "68");
  EXPECT_EQ(settings::get_int(Id::kMtu), 68);
  set("MTU", "65385");
  EXPECT_TRUE(settings::is_set(Id::kMtu));
  EXPECT_EQ(settings::get_int(Id::kMtu), 65385);
  set("WATCHDOG_US", "0");
  EXPECT_EQ(settings::get_int(Id::kWatchdogUs), 0);
  set("MTU", "-5");
  EXPECT_FALSE(settings::is_set(Id::kMtu));
  EXPECT_EQ(settings::get_int(Id::kMtu), 0);
}

TEST_F(Settings, Size) {
  const std::string size = "a size in 1..65536 (a k, m or g suffix: KiB, MiB, GiB)";
  for (const char* bad : {"0", "1m", "4kb", "-1", "k"}) expect_refused("TX_SIZE", bad, size);
  expect_refused("RX_SIZE", "65537", size);
  EXPECT_EQ(settings::get_int(Id::kTxSize), 256);
  EXPECT_EQ(settings::get_int(Id::kInjectSize), 512);
  set("TX_SIZE", "4k");
  EXPECT_EQ(settings::get_int(Id::kTxSize), 4096);
  set("RX_SIZE", "64K");
  EXPECT_EQ(settings::get_int(Id::kRxSize), 65536);
  set("INJECT_SIZE", "0");
  EXPECT_EQ(settings::get_int(Id::kInjectSize), 0);
}

TEST_F(Settings, Choice) {
  expect_refused("THREADING", "c9", "one of c1|c2|c3");
  expect_refused("THREADING", "C1", "one of c1|c2|c3");
  expect_refused("RTR", "foo", "one of write|read|send|none");
  expect_refused("TRANSPORT", "tcp", "one of dpdk|kernel");
  EXPECT_EQ(settings::get_choice(Id::kThreading), 1u);  // c2
  EXPECT_EQ(settings::get_string(Id::kTransport), "dpdk");
  set("THREADING", "c3");
  EXPECT_EQ(settings::get_choice(Id::kThreading), 2u);
  EXPECT_EQ(settings::get_string(Id::kThreading), "c3");
  set("RTR", "none");
  EXPECT_EQ(settings::get_choice(Id::kRtr), 3u);
}

TEST_F(Settings, Ipv4) {
  expect_refused("GATEWAY", "10.0.0.256", "an IPv4 address a.b.c.d");
  expect_refused("GATEWAY", "10.0.0", "an IPv4 address a.b.c.d");
  expect_refused("GATEWAY", "10.0.0.1/24", "an IPv4 address a.b.c.d");
  const std::string addr = "an IPv4 address a.b.c.d[/prefix 0..32]";
  expect_refused("ADDR", "10.0.0.1/33", addr);
  expect_refused("ADDR", "10.0.0.1/", addr);
  expect_refused("ADDR", "10.0.0.1/2x", addr);
  expect_refused("ADDR", "host/24", addr);
  set("ADDR", "10.77.0.1/16");
  settings::Ipv4 a = settings::get_ipv4(Id::kAddr);
  EXPECT_EQ(ntohl(a.addr.s_addr), 0x0a4d0001u);
  EXPECT_EQ(a.prefix, 16);
  set("ADDR", "10.77.0.2");
  a = settings::get_ipv4(Id::kAddr);
  EXPECT_EQ(ntohl(a.addr.s_addr), 0x0a4d0002u);
  EXPECT_EQ(a.prefix, -1);
  set("GATEWAY", "10.77.0.254");
  EXPECT_EQ(ntohl(settings::get_ipv4(Id::kGateway).addr.s_addr), 0x0a4d00feu);
}

TEST_F(Settings, StringsAndTheirParsers) {
  expect_accepted("NETNS", "any name at all");
  expect_accepted("PCAP", "/tmp/x-%p-%n.pcap");
  EXPECT_EQ(refusal("FAULTS", "drop=2"),
            "softrdma: FI_SOFTRDMA_FAULTS=drop=2: fault rate drop=2 outside [0, 1]; expected "
            "drop=P,dup=P,reorder=P,corrupt=P,reset=P,seed=N with P in [0, 1]");
  EXPECT_NE(refusal("FAULTS", "loss=0.1").find("FI_SOFTRDMA_FAULTS=loss=0.1: unknown fault 'loss'"),
            std::string::npos);
  expect_accepted("FAULTS", "drop=0.02,dup=0.02,reorder=0.03,corrupt=0.01,seed=7");
  EXPECT_EQ(settings::get_string(Id::kStats), "");
  set("STATS", "stderr");
  EXPECT_EQ(settings::get_string(Id::kStats), "stderr");
  set("FAULTS", "drop=5");
  EXPECT_EQ(settings::get_string(Id::kFaults), "");  // refused: read as unset
}

TEST_F(Settings, EmptyIsUnsetAndUnknownNamesAreRefused) {
  set("THREADING", "");
  set("RUNDIR", "");
  EXPECT_EQ(settings::check_env(), "");
  EXPECT_EQ(settings::get_string(Id::kThreading), "c2");
  EXPECT_EQ(refusal("MTUU", "9000"),
            "softrdma: FI_SOFTRDMA_MTUU=9000: no such setting (`fi_info -e -p softrdma` lists "
            "them)");
}

TEST_F(Settings, EveryBadValueIsReportedOnItsOwnLine) {
  set("THREADING", "c9");
  set("MTU", "-5");
  EXPECT_EQ(settings::check_env(),
            "softrdma: FI_SOFTRDMA_MTU=-5: expected an integer in 68..65385\n"
            "softrdma: FI_SOFTRDMA_THREADING=c9: expected one of c1|c2|c3");
}

TEST_F(Settings, EngineConfigReadsTheEnvironment) {
  EngineConfig d = EngineConfig::from_env();
  EXPECT_EQ(d.error, "");
  EXPECT_EQ(d.transport, "dpdk");
  EXPECT_TRUE(d.crc);
  EXPECT_EQ(d.mpa_rev, 2);
  EXPECT_EQ(d.threading, Threading::kC2);
  EXPECT_EQ(d.rtr, iwarp::Rtr::kWrite);
  EXPECT_EQ(d.watchdog_us, 1000);
  set("TRANSPORT", "kernel");
  set("CRC", "off");
  set("MARKERS", "yes");
  set("MPA_REV", "1");
  set("THREADING", "c3");
  set("WATCHDOG_US", "250");
  set("STATS", "stderr");
  set("RTR", "read");
  EngineConfig c = EngineConfig::from_env();
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.transport, "kernel");
  EXPECT_FALSE(c.crc);
  EXPECT_TRUE(c.markers);
  EXPECT_EQ(c.mpa_rev, 1);
  EXPECT_EQ(c.threading, Threading::kC3);
  EXPECT_EQ(c.watchdog_us, 250);
  EXPECT_EQ(c.stats_to, "stderr");
  EXPECT_EQ(c.rtr, iwarp::Rtr::kRead);
  set("THREADING", "c1");
  set("RTR", "send");
  c = EngineConfig::from_env();
  EXPECT_EQ(c.threading, Threading::kC1);
  EXPECT_EQ(c.rtr, iwarp::Rtr::kSend);
}

// The engine does not start on a bad value, and says which, whatever the
// setting is for (here one of the DPDK path's, under kernel TCP).
TEST_F(Settings, EngineRefusesToStart) {
  set("TRANSPORT", "kernel");
  {
    Engine good(EngineConfig::from_env());
    EXPECT_TRUE(good.ok());
  }
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"THREADING", "c9"}, {"MTU", "-5"},
                                                        {"MTU", "abc"}, {"CRC", "maybe"},
                                                        {"MPA_REV", "7"}, {"RTR", "foo"},
                                                        {"WATCHDOG_US", "-1"}, {"MARKERS", "2"}}) {
    set(name, value);
    const EngineConfig cfg = EngineConfig::from_env();
    EXPECT_NE(cfg.error.find("FI_SOFTRDMA_" + name + "=" + value + ": expected"), std::string::npos)
        << cfg.error;
    ::testing::internal::CaptureStderr();
    {
      Engine e(cfg);
      EXPECT_FALSE(e.ok()) << name << "=" << value;
    }
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), cfg.error + "\n");
    unsetenv(("FI_SOFTRDMA_" + name).c_str());
  }
}

TEST_F(Settings, DpdkPathReadsTheEnvironment) {
  net::DpdkTransportConfig d = net::DpdkTransportConfig::from_env();
  EXPECT_EQ(d.devargs, "");
  EXPECT_EQ(d.prefix, 24);
  EXPECT_EQ(d.mtu, 0u);
  set("DEVARGS", "net_af_packet0,iface=veth0");
  set("ADDR", "10.77.0.1/16");
  set("GATEWAY", "10.77.0.254");
  set("NETNS", "host-a");
  set("MTU", "1400");
  net::DpdkTransportConfig c = net::DpdkTransportConfig::from_env();
  EXPECT_EQ(c.devargs, "net_af_packet0,iface=veth0");
  EXPECT_EQ(ntohl(c.addr.s_addr), 0x0a4d0001u);
  EXPECT_EQ(c.prefix, 16);
  EXPECT_EQ(ntohl(c.gateway.s_addr), 0x0a4d00feu);
  EXPECT_EQ(c.netns, "host-a");
  EXPECT_EQ(c.mtu, 1400u);
  set("ADDR", "10.77.0.1");
  EXPECT_EQ(net::DpdkTransportConfig::from_env().prefix, 24);

  net::EalOptions e = net::EalOptions::from_env();
  EXPECT_FALSE(e.hugepages);
  EXPECT_FALSE(e.pci);  // a vdev
  set("HUGEPAGES", "1");
  set("EAL_ARGS", "--log-level=*:debug");
  set("DEVARGS", "0000:3b:00.0");
  e = net::EalOptions::from_env();
  EXPECT_TRUE(e.hugepages);
  EXPECT_TRUE(e.pci);
  EXPECT_EQ(e.extra_args, "--log-level=*:debug -a 0000:3b:00.0");
}

}  // namespace
}  // namespace softrdma
