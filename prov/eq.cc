// Event queues: CM events (FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN) and errors
// (rejects with the peer's private data, unreachable peers, broken streams).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

using Clock = std::chrono::steady_clock;

// The fixed part of an event's entry, as fi_eq(3) types it: the connection
// notifications are fi_eq_cm_entry (CM data may follow), the completions of
// asynchronous calls (and application-written events) fi_eq_entry.
size_t entry_size(uint32_t event) {
  switch (event) {
    case FI_CONNREQ:
    case FI_CONNECTED:
    case FI_SHUTDOWN:
      return sizeof(fi_eq_cm_entry);
    default:
      return sizeof(fi_eq_entry);
  }
}

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  auto* eq = from_fid<Eq>(f);
  std::lock_guard g(eq->core().mu);
  eq->core().progress();
  if (eq->items.empty()) return -FI_EAGAIN;
  EqItem& it = eq->items.front();
  if (it.error) return -FI_EAVAIL;
  if (len < entry_size(it.event)) return -FI_ETOOSMALL;
  size_t n = std::min(len, it.buf.size());
  std::memcpy(buf, it.buf.data(), n);
  if (event) *event = it.event;
  if (!(flags & FI_PEEK)) eq->items.pop_front();
  return static_cast<ssize_t>(n);
}

ssize_t eq_readerr(fid_eq* f, fi_eq_err_entry* out, uint64_t flags) {
  auto* eq = from_fid<Eq>(f);
  std::lock_guard g(eq->core().mu);
  if (eq->items.empty() || !eq->items.front().error) return -FI_EAGAIN;
  EqItem& it = eq->items.front();
  void* user_data = out->err_data;
  size_t user_size = out->err_data_size;
  *out = it.err;
  eq->last_err_data = it.err_data;
  if (user_data && user_size) {  // API >= 1.5: the caller's buffer
    size_t n = std::min(user_size, it.err_data.size());
    std::memcpy(user_data, it.err_data.data(), n);
    out->err_data = user_data;
    out->err_data_size = n;
  } else {
    out->err_data = eq->last_err_data.empty() ? nullptr : eq->last_err_data.data();
    out->err_data_size = eq->last_err_data.size();
  }
  if (!(flags & FI_PEEK)) eq->items.pop_front();
  return sizeof(*out);
}

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) {
  auto* eq = from_fid<Eq>(f);
  std::lock_guard g(eq->core().mu);
  (void)flags;  // application-written events are never errors here
  EqItem it{.event = event, .error = false, .fid = nullptr};
  const auto* b = static_cast<const uint8_t*>(buf);
  it.buf.assign(b, b + len);
  eq->push(std::move(it));
  return static_cast<ssize_t>(len);
}

ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) {
  auto* eq = from_fid<Eq>(f);
  auto end = Clock::now() + std::chrono::milliseconds(timeout);
  for (;;) {
    ssize_t n = eq_read(f, event, buf, len, flags);
    if (n != -FI_EAGAIN) return n;
    if (timeout >= 0 && Clock::now() >= end) return -FI_EAGAIN;
    eq->core().progress(timeout == 0 ? 0 : 1000);
  }
}

// A connect's unreachable error also names the settings that routed it,
// when the user's settings did (a configured port).
const char* eq_strerror(fid_eq* f, int prov_errno, const void*, char* buf, size_t len) {
  static thread_local char tmp[256];
  if (!buf) {
    buf = tmp;
    len = sizeof(tmp);
  }
  prov_errno_string(prov_errno, buf, len);
  if (prov_errno == -ENETUNREACH || prov_errno == -EHOSTUNREACH) {
    const auto& engine = from_fid<Eq>(f)->core().engine;
    const std::string why = engine ? engine->unreachable_why(prov_errno) : std::string();
    const size_t at = std::strlen(buf);
    if (!why.empty() && at < len) std::snprintf(buf + at, len - at, ": %s", why.c_str());
  }
  return buf;
}

int eq_control(fid* f, int command, void* arg) {
  return from_fid<Eq>(f)->wait.control(command, arg);
}

int eq_close(fid* f) {
  auto* eq = from_fid<Eq>(f);
  if (eq->users.open.load() > 0) return -FI_EBUSY;
  eq->wait.close();
  for (EqItem& it : eq->items) {  // CONNREQ infos nobody will read
    if (!it.error && it.event == FI_CONNREQ)
      fi_freeinfo(reinterpret_cast<fi_eq_cm_entry*>(it.buf.data())->info);
  }
  eq->fab->children.drop();
  delete eq;
  return 0;
}

fi_ops g_eq_fi_ops = {sizeof(fi_ops), eq_close, no_bind, eq_control, no_ops_open, nullptr, nullptr};
fi_ops_eq g_eq_ops = {sizeof(fi_ops_eq), eq_read, eq_readerr, eq_write, eq_sread, eq_strerror};

}  // namespace

void Eq::push(EqItem item) {
  items.push_back(std::move(item));
  wait.signal();
}

void Eq::purge(fid_t f) {
  std::erase_if(items, [f](const EqItem& it) { return it.fid == f; });
}

int eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** out, void* context) {
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC &&
      attr->wait_obj != FI_WAIT_FD)
    return -FI_ENOSYS;
  auto* eq = new Eq{};
  eq->fab = from_fid<Fabric>(fabric);
  eq->fab->children.add();
  eq->fid.fid.fclass = FI_CLASS_EQ;
  eq->fid.fid.context = context;
  eq->fid.fid.ops = &g_eq_fi_ops;
  eq->fid.ops = &g_eq_ops;
  {
    std::lock_guard g(eq->core().mu);
    eq->wait.open(eq->core());
  }
  *out = &eq->fid;
  return 0;
}

}  // namespace softrdma::prov
