#include "stack/common/settings.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string_view>

#include "stack/common/fault_rates.h"

namespace softrdma::settings {

namespace {

bool check_faults(const std::string& value, std::string* why) {
  FaultRates r;
  return parse_fault_rates(value, &r, why);
}

constexpr const char kPrefix[] = "FI_SOFTRDMA_";
constexpr const char kBools[] = "0|1|no|yes|off|on|false|true";
// What a port takes (stack/net/dpdk/port.cc): a 64 KiB frame less the
// Ethernet header, a VLAN tag and CRC, and the mbuf headroom.
constexpr int64_t kMaxMtu = 65535 - 14 - 8 - 128;
constexpr int64_t kMaxQueue = 65536;  // prov/attr.cc: the deepest queue offered

constexpr Setting kSettings[] = {
    {.id = Id::kTransport, .name = "transport", .type = Type::kChoice, .dflt = "dpdk",
     .help = "Byte-stream transport under iWARP: lwIP on DPDK, or kernel TCP sockets",
     .choices = "dpdk|kernel"},
    {.id = Id::kAddr, .name = "addr", .type = Type::kIpv4Prefix, .dflt = "",
     .help = "IPv4 address[/prefix, default 24] of this process on a configured DPDK port "
             "(FI_SOFTRDMA_DEVARGS); without one, the on-host memif mesh gives each process "
             "its own"},
    {.id = Id::kDevargs, .name = "devargs", .type = Type::kString, .dflt = "",
     .help = "DPDK port instead of the on-host memif mesh: net_af_packet0,iface=veth0 | "
             "net_af_xdp0,iface=... | a PCI address"},
    {.id = Id::kGateway, .name = "gateway", .type = Type::kIpv4, .dflt = "",
     .help = "IPv4 gateway of the configured port"},
    {.id = Id::kNetns, .name = "netns", .type = Type::kString, .dflt = "",
     .help = "Network namespace the configured port's interface lives in"},
    {.id = Id::kMtu, .name = "mtu", .type = Type::kInt, .dflt = "",
     .help = "Link MTU (unset: 9000 on the memif mesh, 1500 on a configured port)", .min = 68,
     .max = kMaxMtu},
    {.id = Id::kMbufs, .name = "mbufs", .type = Type::kInt, .dflt = "16384",
     .help = "DPDK mbufs in the process's pool", .min = 64, .max = 1 << 24},
    {.id = Id::kHugepages, .name = "hugepages", .type = Type::kBool, .dflt = "0",
     .help = "Let DPDK use hugepages (0: --no-huge)"},
    {.id = Id::kEalArgs, .name = "eal_args", .type = Type::kString, .dflt = "",
     .help = "Extra DPDK EAL arguments"},
    {.id = Id::kThreading, .name = "threading", .type = Type::kChoice, .dflt = "c2",
     .help = "c2: progress in the application's calls; c1: an I/O thread; c3: a receive "
             "thread, the application transmits",
     .choices = "c1|c2|c3"},
    {.id = Id::kWatchdogUs, .name = "watchdog_us", .type = Type::kInt, .dflt = "1000",
     .help = "c2: progress on a helper thread when the application has not for this long "
             "(0: off)",
     .min = 0, .max = INT_MAX},
    {.id = Id::kPcap, .name = "pcap", .type = Type::kString, .dflt = "",
     .help = "Write every frame of the DPDK path to this pcap file (%p: the pid, %n: the "
             "link's name)"},
    {.id = Id::kFaults, .name = "faults", .type = Type::kString, .dflt = "",
     .help = "Inject faults on the DPDK path, each at its rate per frame (reset: per TCP "
             "segment)",
     .check = check_faults,
     .accepts = "drop=P,dup=P,reorder=P,corrupt=P,reset=P,seed=N with P in [0, 1]"},
    {.id = Id::kRundir, .name = "rundir", .type = Type::kString, .dflt = "",
     .help = "Directory of the on-host mesh's rendezvous sockets (unset: /run/softrdma or "
             "/tmp/softrdma-<uid>)"},
    {.id = Id::kDebug, .name = "debug", .type = Type::kBool, .dflt = "0",
     .help = "Print connection and link set-up details to stderr"},
    {.id = Id::kConnectTimeoutMs, .name = "connect_timeout_ms", .type = Type::kInt,
     .dflt = "30000",
     .help = "How long fi_connect retries while a DPDK mesh link to a live peer comes up",
     .min = 0, .max = INT_MAX},
    {.id = Id::kCrc, .name = "crc", .type = Type::kBool, .dflt = "1",
     .help = "Ask for MPA CRC32c (on if either side asks)"},
    {.id = Id::kMarkers, .name = "markers", .type = Type::kBool, .dflt = "0",
     .help = "Ask the peer to insert MPA markers"},
    {.id = Id::kMpaRev, .name = "mpa_rev", .type = Type::kInt, .dflt = "2",
     .help = "MPA revision to offer (2: RFC 6581)", .min = 1, .max = 2},
    {.id = Id::kRtr, .name = "rtr", .type = Type::kChoice, .dflt = "write",
     .help = "RFC 6581 ready-to-receive message offered (none: no peer-to-peer mode)",
     .choices = "write|read|send|none"},
    {.id = Id::kTxSize, .name = "tx_size", .type = Type::kSize, .dflt = "256",
     .help = "Default transmit queue depth", .min = 1, .max = kMaxQueue},
    {.id = Id::kRxSize, .name = "rx_size", .type = Type::kSize, .dflt = "256",
     .help = "Default receive queue depth", .min = 1, .max = kMaxQueue},
    {.id = Id::kInjectSize, .name = "inject_size", .type = Type::kSize, .dflt = "512",
     .help = "Largest fi_inject payload", .min = 0, .max = 65536},
    {.id = Id::kStats, .name = "stats", .type = Type::kString, .dflt = "",
     .help = "Write the engine's counters (docs/counters.md) when a fabric closes: stderr or "
             "a file to append to; also fi_open_ops(FI_SOFTRDMA_COUNTERS_OPS)"},
    {.id = Id::kUnexpectedBytes, .name = "unexpected_bytes", .type = Type::kSize,
     .dflt = "256k",
     .help = "Per connection: payload bytes of Sends held until a receive is posted; a peer "
             "sending beyond it gets an iWARP Terminate (0: none held)",
     .min = 0, .max = int64_t{1} << 30},
    {.id = Id::kUnexpectedMsgs, .name = "unexpected_msgs", .type = Type::kInt, .dflt = "256",
     .help = "Per connection: Sends held until a receive is posted (see unexpected_bytes)",
     .min = 0, .max = kMaxQueue},
    {.id = Id::kNic, .name = "nic", .type = Type::kChoice, .dflt = "af_packet",
     .help = "How softrdma-switch, or a root process where none runs, opens a host "
             "interface: af_packet (64 KiB TCP segments through the kernel's segmentation and "
             "checksum offloads) or af_xdp (XDP steering, frames up to the MTU)",
     .choices = "af_xdp|af_packet"},
};

constexpr bool in_id_order() {
  for (size_t i = 0; i < std::size(kSettings); ++i)
    if (static_cast<size_t>(kSettings[i].id) != i) return false;
  return std::size(kSettings) == static_cast<size_t>(Id::kCount);
}
static_assert(in_id_order(), "kSettings lists every Id once, in the order of Id");

bool equals_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// The index of text among the '|'-separated words, or -1.
int find_word(std::string_view words, std::string_view text, bool nocase) {
  for (int i = 0;; ++i) {
    const size_t bar = words.find('|');
    const std::string_view w = words.substr(0, bar);
    if (nocase ? equals_nocase(w, text) : w == text) return i;
    if (bar == std::string_view::npos) return -1;
    words.remove_prefix(bar + 1);
  }
}

bool parse_int(const Setting& s, std::string_view text, int64_t* out) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p == text.data()) return false;
  if (s.type == Type::kSize && p + 1 == end) {
    const int shift = *p == 'k' || *p == 'K' ? 10 : *p == 'm' || *p == 'M' ? 20
                      : *p == 'g' || *p == 'G' ? 30 : -1;
    if (shift < 0 || v < 0 || v > (INT64_MAX >> shift)) return false;
    v <<= shift;
    ++p;
  }
  if (p != end || v < s.min || v > s.max) return false;
  *out = v;
  return true;
}

bool parse_ipv4(const Setting& s, const std::string& text, Ipv4* out) {
  const size_t slash = s.type == Type::kIpv4Prefix ? text.find('/') : std::string::npos;
  Ipv4 ip;
  if (inet_pton(AF_INET, text.substr(0, slash).c_str(), &ip.addr) != 1) return false;
  if (slash != std::string::npos) {
    static constexpr Setting kPrefixLen{.id = Id::kCount, .name = "", .type = Type::kInt,
                                        .dflt = "", .help = "", .min = 0, .max = 32};
    int64_t len = 0;
    if (!parse_int(kPrefixLen, std::string_view(text).substr(slash + 1), &len)) return false;
    ip.prefix = static_cast<int>(len);
  }
  *out = ip;
  return true;
}

// Parses text as s's value into the field its type uses; false with *why
// (beyond accepted(s)) when it is not one.
struct Value {
  bool b = false;
  int64_t i = 0;
  size_t choice = 0;
  Ipv4 ip;
};
bool parse(const Setting& s, const std::string& text, Value* v, std::string* why) {
  switch (s.type) {
    case Type::kBool: {
      const int w = find_word(kBools, text, true);
      v->b = w % 2 == 1;
      return w >= 0;
    }
    case Type::kInt:
    case Type::kSize:
      return parse_int(s, text, &v->i);
    case Type::kString:
      return s.check == nullptr || s.check(text, why);
    case Type::kChoice: {
      const int w = find_word(s.choices, text, false);
      v->choice = static_cast<size_t>(w);
      return w >= 0;
    }
    case Type::kIpv4:
    case Type::kIpv4Prefix:
      return parse_ipv4(s, text, &v->ip);
  }
  return false;
}

const char* env_value(const Setting& s) {
  const char* v = std::getenv(env_name(s).c_str());
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// The environment's value if it is set and good, else the default's.
Value read(Id id) {
  const Setting& s = setting(id);
  Value v;
  std::string why;
  if (const char* e = env_value(s); e != nullptr && parse(s, e, &v, &why)) return v;
  v = Value{};
  if (*s.dflt != '\0') parse(s, s.dflt, &v, &why);
  return v;
}

}  // namespace

std::span<const Setting> all() { return kSettings; }

const Setting& setting(Id id) { return kSettings[static_cast<size_t>(id)]; }

std::string env_name(const Setting& s) {
  std::string n = kPrefix;
  for (const char* c = s.name; *c != '\0'; ++c)
    n += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
  return n;
}

std::string accepted(const Setting& s) {
  const std::string range = std::to_string(s.min) + ".." + std::to_string(s.max);
  switch (s.type) {
    case Type::kBool: return std::string("one of ") + kBools;
    case Type::kInt: return "an integer in " + range;
    case Type::kSize: return "a size in " + range + " (a k, m or g suffix: KiB, MiB, GiB)";
    case Type::kString: return s.accepts != nullptr ? s.accepts : "";
    case Type::kChoice: return std::string("one of ") + s.choices;
    case Type::kIpv4: return "an IPv4 address a.b.c.d";
    case Type::kIpv4Prefix: return "an IPv4 address a.b.c.d[/prefix 0..32]";
  }
  return "";
}

std::string describe(const Setting& s) {
  std::string d = s.help;
  // libfabric labels a boolean with what it takes.
  const std::string a = s.type == Type::kBool ? "" : accepted(s);
  if (!a.empty()) d += ". Takes " + a;
  if (*s.dflt != '\0') d += std::string(a.empty() ? ". Default " : "; default ") + s.dflt;
  return d;
}

std::string validate(const Setting& s, const std::string& text) {
  Value v;
  std::string why;
  if (parse(s, text, &v, &why)) return "";
  std::string m = "softrdma: " + env_name(s) + "=" + text + ": ";
  if (!why.empty()) m += why + "; ";
  return m + "expected " + accepted(s);
}

std::string check_env() {
  std::string errors;
  auto add = [&errors](const std::string& m) {
    if (m.empty()) return;
    if (!errors.empty()) errors += '\n';
    errors += m;
  };
  for (const Setting& s : kSettings)
    if (const char* v = env_value(s)) add(validate(s, v));
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view var(*e);
    if (var.substr(0, std::strlen(kPrefix)) != kPrefix) continue;
    const std::string_view name = var.substr(0, var.find('='));
    bool known = false;
    for (const Setting& s : kSettings) known = known || env_name(s) == name;
    if (!known)
      add("softrdma: " + std::string(var) +
          ": no such setting (`fi_info -e -p softrdma` lists them)");
  }
  return errors;
}

bool is_set(Id id) {
  const Setting& s = setting(id);
  Value v;
  std::string why;
  const char* e = env_value(s);
  return e != nullptr && parse(s, e, &v, &why);
}

bool get_bool(Id id) { return read(id).b; }
int64_t get_int(Id id) { return read(id).i; }
size_t get_choice(Id id) { return read(id).choice; }
Ipv4 get_ipv4(Id id) { return read(id).ip; }

std::string get_string(Id id) {
  const Setting& s = setting(id);
  if (is_set(id)) return env_value(s);
  return s.dflt;
}

}  // namespace softrdma::settings
