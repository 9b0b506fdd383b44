// fi_av: an address vector, peers' names by fi_addr_t, for connectionless
// endpoints. A name is what fi_getname gives: a struct sockaddr_in (the
// domain's FI_SOCKADDR_IN). FI_AV_TABLE and FI_AV_MAP share one layout: an
// fi_addr_t is the index of its entry, the lowest free one at insertion, as
// fi_av(3) requires of a table (a map's values are opaque to the
// application). A name is its own address, with nothing to resolve, so
// insertion completes in the call; with FI_EVENT its outcome is reported on
// the bound EQ as fi_av(3) says: an error entry per failed name, then
// FI_AV_COMPLETE with the number inserted.
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

bool usable(const sockaddr_in& a) {
  return a.sin_family == AF_INET && a.sin_port != 0 && a.sin_addr.s_addr != INADDR_ANY;
}

// The lowest free index gets a; returns it.
fi_addr_t put(Av* av, const sockaddr_in& a) {
  ++av->changes;
  if (av->free_slots.empty()) {
    av->names.push_back(a);
    return av->names.size() - 1;
  }
  const auto lowest = av->free_slots.begin();
  const fi_addr_t at = *lowest;
  av->free_slots.erase(lowest);
  av->names[at] = a;
  return at;
}

// Inserts name_at(0..count) (null: a name that did not resolve), reporting
// each outcome as fi_av_insert(3) says; returns the number inserted (or 0
// when the outcome goes to the EQ).
template <class NameAt>
int insert_names(Av* av, NameAt name_at, size_t count, fi_addr_t* fi_addr, uint64_t flags,
                 void* context) {
  int* sync_err = (flags & FI_SYNC_ERR) ? static_cast<int*>(context) : nullptr;
  int inserted = 0;
  for (size_t i = 0; i < count; ++i) {
    const sockaddr_in* name = name_at(i);
    const bool ok = name != nullptr && usable(*name);
    const fi_addr_t at = ok ? put(av, *name) : FI_ADDR_NOTAVAIL;
    if (fi_addr) fi_addr[i] = at;
    if (sync_err) sync_err[i] = ok ? 0 : FI_EINVAL;
    if (ok) {
      ++inserted;
    } else if (av->events) {
      EqItem it = err_item(&av->fid.fid, FI_EINVAL, 0, {});
      it.err.context = context;
      it.err.data = i;  // the failed name's index in the call
      av->eq->push(std::move(it));
    }
  }
  if (!av->events) return inserted;
  EqItem done{.event = FI_AV_COMPLETE, .error = false, .fid = &av->fid.fid};
  done.buf.resize(sizeof(fi_eq_entry));
  auto* e = reinterpret_cast<fi_eq_entry*>(done.buf.data());
  e->fid = &av->fid.fid;
  e->context = context;
  e->data = static_cast<uint64_t>(inserted);
  av->eq->push(std::move(done));
  return 0;
}

// Flags an insert may carry here; FI_AV_USER_ID is not offered.
int check_insert(const Av* av, uint64_t flags) {
  if (flags & ~(FI_MORE | FI_SYNC_ERR)) return -FI_EBADFLAGS;
  if (av->events) {
    if (flags & FI_SYNC_ERR) return -FI_EBADFLAGS;  // synchronous insertion only
    if (!av->eq) return -FI_ENOEQ;
  }
  return 0;
}

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
              void* context) {
  auto* av = from_fid<Av>(f);
  if (count > 0 && addr == nullptr) return -FI_EINVAL;
  std::lock_guard g(av->dom->core().mu);
  if (int rc = check_insert(av, flags)) return rc;
  const auto* names = static_cast<const sockaddr_in*>(addr);
  return insert_names(av, [names](size_t i) { return names + i; }, count, fi_addr, flags,
                      context);
}

// node:service as fi_getinfo reads them, or node alone as an FI_ADDR_STR
// ("fi_sockaddr_in://a.b.c.d:port").
bool resolve(const char* node, const char* service, sockaddr_in* out) {
  if (node == nullptr) return false;
  std::string host = node, port = service ? service : "";
  constexpr const char kStr[] = "fi_sockaddr_in://";
  if (service == nullptr) {
    if (host.rfind(kStr, 0) != 0) return false;
    host.erase(0, sizeof(kStr) - 1);
    const size_t colon = host.rfind(':');
    if (colon == std::string::npos) return false;
    port = host.substr(colon + 1);
    host.resize(colon);
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) return false;
  std::memcpy(out, res->ai_addr, sizeof(*out));
  freeaddrinfo(res);
  return true;
}

int av_insertsvc(fid_av* f, const char* node, const char* service, fi_addr_t* fi_addr,
                 uint64_t flags, void* context) {
  auto* av = from_fid<Av>(f);
  sockaddr_in a{};
  const bool ok = resolve(node, service, &a);  // may ask DNS: not under the lock
  std::lock_guard g(av->dom->core().mu);
  if (int rc = check_insert(av, flags)) return rc;
  const sockaddr_in* name = ok ? &a : nullptr;
  return insert_names(av, [name](size_t) { return name; }, 1, fi_addr, flags, context);
}

// The i-th name after base: a numeric IPv4 address counts up as a number, a
// host name by its numeric suffix ("host09" -> "host10"); "" if it has none
// or the count runs past the end of its range.
std::string nth_node(const std::string& base, size_t i) {
  if (i == 0) return base;
  in_addr a{};
  if (inet_pton(AF_INET, base.c_str(), &a) == 1) {
    const uint64_t n = uint64_t{ntohl(a.s_addr)} + i;
    if (n > UINT32_MAX) return "";
    a.s_addr = htonl(static_cast<uint32_t>(n));
    char buf[INET_ADDRSTRLEN];
    return inet_ntop(AF_INET, &a, buf, sizeof(buf));
  }
  size_t digits = base.size();
  while (digits > 0 && base[digits - 1] >= '0' && base[digits - 1] <= '9') --digits;
  constexpr size_t kMaxDigits = 18;  // the suffix plus i stays well inside 64 bits
  if (digits == base.size() || base.size() - digits > kMaxDigits || i > UINT32_MAX) return "";
  const std::string num = base.substr(digits);
  const std::string next = std::to_string(std::stoull(num) + i);
  const std::string pad(num.size() > next.size() ? num.size() - next.size() : 0, '0');
  return base.substr(0, digits) + pad + next;
}

int av_insertsym(fid_av* f, const char* node, size_t nodecnt, const char* service,
                 size_t svccnt, fi_addr_t* fi_addr, uint64_t flags, void* context) {
  auto* av = from_fid<Av>(f);
  if (node == nullptr || service == nullptr) return -FI_EINVAL;
  char* end = nullptr;
  errno = 0;
  const unsigned long port0 = std::strtoul(service, &end, 10);
  if (errno != 0 || end == service || *end != '\0' || svccnt > 65536 || port0 + svccnt > 65536)
    return -FI_EINVAL;
  // Every name is resolved (maybe by DNS) before the lock is taken; a count
  // no AV could hold is refused rather than allocated.
  constexpr size_t kMaxSym = size_t{1} << 20;
  if (nodecnt > kMaxSym || nodecnt * svccnt > kMaxSym) return -FI_EINVAL;
  const size_t count = nodecnt * svccnt;
  std::vector<sockaddr_in> resolved(count);
  std::vector<bool> ok(count, false);
  for (size_t n = 0; n < nodecnt; ++n) {
    const std::string host = nth_node(node, n);
    for (size_t s = 0; s < svccnt && !host.empty(); ++s) {
      const size_t i = n * svccnt + s;
      ok[i] = resolve(host.c_str(), std::to_string(port0 + s).c_str(), &resolved[i]);
    }
  }
  std::lock_guard g(av->dom->core().mu);
  if (int rc = check_insert(av, flags)) return rc;
  return insert_names(
      av, [&](size_t i) { return ok[i] ? &resolved[i] : nullptr; }, count, fi_addr, flags,
      context);
}

bool in_use(const Av* av, fi_addr_t a) {
  return a < av->names.size() && av->names[a].sin_family == AF_INET;
}

// All or nothing: one bad fi_addr_t leaves the AV as it was.
int av_remove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t flags) {
  auto* av = from_fid<Av>(f);
  if (flags != 0) return -FI_EBADFLAGS;
  if (count > 0 && fi_addr == nullptr) return -FI_EINVAL;
  std::lock_guard g(av->dom->core().mu);
  for (size_t i = 0; i < count; ++i) {
    if (!in_use(av, fi_addr[i])) return -FI_EINVAL;
    for (size_t k = 0; k < i; ++k)
      if (fi_addr[k] == fi_addr[i]) return -FI_EINVAL;  // named twice
  }
  if (count > 0) ++av->changes;
  for (size_t i = 0; i < count; ++i) {
    av->names[fi_addr[i]] = sockaddr_in{};
    av->free_slots.insert(fi_addr[i]);
  }
  return 0;
}

int av_lookup(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) {
  auto* av = from_fid<Av>(f);
  if (addrlen == nullptr) return -FI_EINVAL;
  std::lock_guard g(av->dom->core().mu);
  if (!in_use(av, fi_addr)) return -FI_EINVAL;
  // Truncated to the buffer; *addrlen says what the whole name needs.
  const size_t n = std::min(*addrlen, sizeof(sockaddr_in));
  if (n > 0 && addr == nullptr) return -FI_EINVAL;
  if (n > 0) std::memcpy(addr, &av->names[fi_addr], n);
  *addrlen = sizeof(sockaddr_in);
  return 0;
}

// libfabric's own rendering of the format, which fi_av_insertsvc reads back.
const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) {
  if (addr == nullptr || len == nullptr || (buf == nullptr && *len > 0)) return nullptr;
  sockaddr_in a{};
  std::memcpy(&a, addr, sizeof(a));
  char ip[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  const int need = std::snprintf(buf, *len, "fi_sockaddr_in://%s:%u", ip, ntohs(a.sin_port));
  *len = static_cast<size_t>(need) + 1;
  return buf;
}

int av_set(fid_av*, fi_av_set_attr*, fid_av_set**, void*) { return -FI_ENOSYS; }

int av_bind(fid* f, fid* bf, uint64_t flags) {
  auto* av = from_fid<Av>(f);
  if (flags != 0) return -FI_EBADFLAGS;
  if (bf == nullptr || bf->fclass != FI_CLASS_EQ) return -FI_EINVAL;
  std::lock_guard g(av->dom->core().mu);
  if (av->eq) return -FI_EINVAL;  // one EQ per AV
  av->eq = from_fid<Eq>(bf);
  av->eq->users.add();
  return 0;
}

int av_close(fid* f) {
  auto* av = from_fid<Av>(f);
  Domain* dom = av->dom;
  if (av->users.open.load() != 0) return -FI_EBUSY;  // an endpoint still names its peers by it
  {
    std::lock_guard g(dom->core().mu);
    if (av->eq) av->eq->users.drop();
  }
  dom->children.drop();
  delete av;
  return 0;
}

fi_ops g_av_fi_ops = {sizeof(fi_ops), av_close, av_bind, no_control, no_ops_open, nullptr,
                      nullptr};
fi_ops_av g_av_ops = {sizeof(fi_ops_av), av_insert, av_insertsvc, av_insertsym, av_remove,
                      av_lookup,         av_straddr, av_set};

}  // namespace

const sockaddr_in* av_name(const Av* av, fi_addr_t addr) {
  if (addr >= av->names.size() || av->names[addr].sin_family == 0) return nullptr;
  return &av->names[addr];
}

fi_addr_t av_lookup(const Av* av, const sockaddr_in& name) {
  for (size_t i = 0; i < av->names.size(); ++i) {
    const sockaddr_in& n = av->names[i];
    if (n.sin_family != 0 && n.sin_addr.s_addr == name.sin_addr.s_addr &&
        n.sin_port == name.sin_port)
      return i;
  }
  return FI_ADDR_NOTAVAIL;
}

int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** out, void* context) {
  if (attr == nullptr || out == nullptr) return -FI_EINVAL;
  if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
    return -FI_EINVAL;
  if (attr->flags & ~(FI_EVENT | FI_SYMMETRIC | FI_READ)) return -FI_EBADFLAGS;
  // Shared (named, read-only) AVs and scalable endpoints' receive contexts
  // are not offered.
  if (attr->name != nullptr || (attr->flags & FI_READ) || attr->rx_ctx_bits != 0)
    return -FI_ENOSYS;
  if (attr->type == FI_AV_UNSPEC) attr->type = FI_AV_TABLE;
  auto* dom = from_fid<Domain>(domain);
  auto* av = new Av{};
  av->dom = dom;
  av->events = attr->flags & FI_EVENT;
  av->names.reserve(std::min<size_t>(attr->count, 4096));  // a hint, not a bound
  av->fid.fid.fclass = FI_CLASS_AV;
  av->fid.fid.context = context;
  av->fid.fid.ops = &g_av_fi_ops;
  av->fid.ops = &g_av_ops;
  dom->children.add();
  *out = &av->fid;
  return 0;
}

}  // namespace softrdma::prov
