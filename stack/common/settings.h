// The FI_SOFTRDMA_* settings. Each variable is defined once here (name,
// type, default, help); the engine, its transports and the provider read
// them through the typed accessors below, and the provider lists them with
// fi_param_define (`fi_info -e`). Values are parsed strictly: check_env()
// names every bad one, and whoever starts an engine refuses to with it,
// rather than run on a default the user did not ask for.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <string>

namespace softrdma::settings {

enum class Type : uint8_t {
  kBool,        // 0|1|no|yes|off|on|false|true
  kInt,         // a decimal integer in [min, max]
  kSize,        // a kInt that may end in k, m or g (KiB, MiB, GiB)
  kString,      // any text, or what check accepts
  kChoice,      // one of choices
  kIpv4,        // a.b.c.d
  kIpv4Prefix,  // a.b.c.d[/0..32]
};

// A string setting's own parser: false with *why when value is not one.
using Check = bool (*)(const std::string& value, std::string* why);

enum class Id : uint8_t {
  kTransport,
  kAddr,
  kDevargs,
  kGateway,
  kNetns,
  kMtu,
  kMbufs,
  kHugepages,
  kEalArgs,
  kThreading,
  kWatchdogUs,
  kPcap,
  kFaults,
  kRundir,
  kDebug,
  kConnectTimeoutMs,
  kCrc,
  kMarkers,
  kMpaRev,
  kRtr,
  kTxSize,
  kRxSize,
  kInjectSize,
  kStats,
  kUnexpectedBytes,
  kUnexpectedMsgs,
  kNic,
  kCount,
};

struct Setting {
  Id id;
  const char* name;  // libfabric's parameter name: "mtu" is FI_SOFTRDMA_MTU
  Type type;
  const char* dflt;  // the value when unset, written as a user would; "": none
  const char* help;
  int64_t min = 0, max = 0;       // kInt, kSize
  const char* choices = nullptr;  // kChoice: "c1|c2|c3"
  Check check = nullptr;          // kString: the value's own parser
  const char* accepts = nullptr;  // kString with a check: what it takes
};

std::span<const Setting> all();
const Setting& setting(Id id);

// "FI_SOFTRDMA_MTU".
std::string env_name(const Setting& s);
// What a value must be: "one of c1|c2|c3", "an integer in 68..65385"; ""
// for a string anything goes in.
std::string accepted(const Setting& s);
// The help, what the setting accepts and its default, for `fi_info -e`.
std::string describe(const Setting& s);

// "" when text is a value of s, else the message that refuses it:
// "softrdma: FI_SOFTRDMA_THREADING=c9: expected one of c1|c2|c3".
std::string validate(const Setting& s, const std::string& text);

// Every bad value of a FI_SOFTRDMA_* variable in the environment, and
// every such variable that is no setting (a misspelt name would otherwise
// go unnoticed), one message a line; "" when there are none. An empty
// value is the same as an unset one.
std::string check_env();

// Typed reads of the environment. An unset or empty variable reads as the
// default (0, false or "" where the default is ""); so does a bad one, which
// check_env() reports before anything reads it.
bool is_set(Id id);
bool get_bool(Id id);
int64_t get_int(Id id);          // kInt, kSize
std::string get_string(Id id);   // kString, kChoice
size_t get_choice(Id id);        // kChoice: the value's index in choices
struct Ipv4 {
  in_addr addr{};
  int prefix = -1;  // kIpv4Prefix: -1 when the value has none
};
Ipv4 get_ipv4(Id id);            // kIpv4, kIpv4Prefix

}  // namespace softrdma::settings
