// Completion queues: engine work completions become fi_cq entries in the
// format the application chose; errors carry a libfabric code and, as
// prov_errno, the iWARP Terminate's cause.
#include <chrono>
#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

size_t entry_size(fi_cq_format f) {
  switch (f) {
    case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
    case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED: return sizeof(fi_cq_tagged_entry);
    default: return 0;
  }
}

// Engine completion -> CQ item (or nothing, for an unreported success).
bool translate(Wc wc, CqItem* out) {
  Op* op = op_done(&wc);
  if (!op) return false;  // more of this operation to come
  fi_cq_err_entry& e = out->e;
  e = {};
  e.op_context = op->context;
  e.flags = op->flags;
  int err = cq_error(wc.status);
  if (err == 0) {
    if (wc.opcode == WcOpcode::kRecvRdmaImm) {  // the target of fi_writedata
      e.flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
      e.data = wc.imm_data;
      cntr_add(op->ep->rwrite_cntr, false);
      free_op(op);
      out->error = false;
      return true;  // consumed a receive: always reported (FI_RX_CQ_DATA)
    }
    if (wc.opcode == WcOpcode::kRecv) {
      err = recv_done(op, wc, &e);
    } else {
      e.len = op->len;
    }
  }
  cntr_add(op->cntr, err != 0);
  const bool report = err != 0 || op->report;
  if (err != 0) {
    e.err = err;
    e.prov_errno = prov_errno(wc.status, wc.vendor_err);
    FI_INFO(&g_prov, FI_LOG_CQ, "error completion: %s (%s, vendor 0x%x) op flags 0x%llx len %zu\n",
            fi_strerror(err), to_string(wc.status), wc.vendor_err,
            static_cast<unsigned long long>(op->flags), op->len);
  }
  free_op(op);
  out->error = err != 0;
  return report;
}

// fi_cq_attr.size 0: room for this many unread completions.
constexpr size_t kDefaultCqSize = 4096;

ssize_t cq_read(fid_cq* f, void* buf, size_t count) { return from_fid<Cq>(f)->read(buf, count, nullptr); }

ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src) {
  return from_fid<Cq>(f)->read(buf, count, src);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* out, uint64_t flags) {
  auto* cq = from_fid<Cq>(f);
  std::lock_guard g(cq->dom->fab->mu);
  if (cq->ready.empty() && cq->overrun) {  // fatal: reported on every call
    *out = fi_cq_err_entry{};
    out->err = FI_EOVERRUN;
    return 1;
  }
  if (cq->ready.empty() || !cq->ready.front().error) return -FI_EAGAIN;
  *out = cq->ready.front().e;  // no provider err_data: prov_errno says it all
  out->err_data = nullptr;
  out->err_data_size = 0;
  if (!(flags & FI_PEEK)) cq->ready.pop_front();
  return 1;
}

// Blocks until a completion, the timeout, or fi_cq_signal (-FI_EAGAIN).
ssize_t cq_sreadfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void*, int timeout) {
  auto* cq = from_fid<Cq>(f);
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  for (;;) {
    ssize_t n = cq->read(buf, count, src);
    if (n != -FI_EAGAIN) return n;
    if (cq->signaled.exchange(false)) return -FI_EAGAIN;
    if (timeout >= 0 && std::chrono::steady_clock::now() >= end) return -FI_EAGAIN;
    cq->dom->fab->progress(timeout == 0 ? 0 : 1000);
  }
}

ssize_t cq_sread(fid_cq* f, void* buf, size_t count, const void* cond, int timeout) {
  return cq_sreadfrom(f, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq* f) {
  auto* cq = from_fid<Cq>(f);
  cq->signaled = true;
  cq->wait.wake();
  return 0;
}

const char* cq_strerror(fid_cq*, int prov_errno, const void*, char* buf, size_t len) {
  static thread_local char tmp[128];
  if (!buf) {
    buf = tmp;
    len = sizeof(tmp);
  }
  return prov_errno_string(prov_errno, buf, len);
}

int cq_control(fid* f, int command, void* arg) {
  return from_fid<Cq>(f)->wait.control(command, arg);
}

int cq_close(fid* f) {
  auto* cq = from_fid<Cq>(f);
  Fabric* fab = cq->dom->fab;
  {
    std::lock_guard g(fab->mu);
    std::erase(fab->cqs, cq);
    fab->engine->destroy_cq(cq->ecq);
  }
  cq->wait.close();
  delete cq;
  return 0;
}

fi_ops g_cq_fi_ops = {sizeof(fi_ops), cq_close, no_bind, cq_control, no_ops_open, nullptr, nullptr};
fi_ops_cq g_cq_ops = {sizeof(fi_ops_cq), cq_read,       cq_readfrom, cq_readerr,
                      cq_sread,          cq_sreadfrom,  cq_signal,   cq_strerror};

}  // namespace

void Cq::reap() {
  const int cap = static_cast<int>(reaped.size());
  int n;
  while ((n = dom->fab->engine->poll_cq(ecq, reaped.data(), cap)) > 0) {
    for (int i = 0; i < n; ++i) {
      CqItem it;
      if (translate(reaped[i], &it)) ready.push_back(it);
    }
  }
  if (ready.size() > size || ecq->overrun()) overrun = true;
}

ssize_t Cq::read(void* buf, size_t count, fi_addr_t* src) {
  std::lock_guard g(dom->fab->mu);
  if (ready.empty()) dom->fab->progress();
  if (ready.empty()) return overrun ? -FI_EAVAIL : -FI_EAGAIN;
  if (ready.front().error) return -FI_EAVAIL;
  const size_t sz = entry_size(format);
  size_t done = 0;
  auto* out = static_cast<uint8_t*>(buf);
  while (done < count && !ready.empty() && !ready.front().error) {
    std::memcpy(out + done * sz, &ready.front().e, sz);
    if (src) src[done] = FI_ADDR_NOTAVAIL;
    ready.pop_front();
    ++done;
  }
  return static_cast<ssize_t>(done);
}

int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** out, void* context) {
  auto* dom = from_fid<Domain>(domain);
  fi_cq_format format = attr ? attr->format : FI_CQ_FORMAT_UNSPEC;
  if (format == FI_CQ_FORMAT_UNSPEC) format = FI_CQ_FORMAT_CONTEXT;
  if (entry_size(format) == 0) return -FI_ENOSYS;
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC &&
      attr->wait_obj != FI_WAIT_FD)
    return -FI_ENOSYS;
  auto* cq = new Cq{};
  cq->dom = dom;
  cq->format = format;
  cq->size = attr && attr->size ? attr->size : kDefaultCqSize;
  cq->fid.fid.fclass = FI_CLASS_CQ;
  cq->fid.fid.context = context;
  cq->fid.fid.ops = &g_cq_fi_ops;
  cq->fid.ops = &g_cq_ops;
  {
    std::lock_guard g(dom->fab->mu);
    cq->ecq = dom->fab->engine->create_cq(static_cast<uint32_t>(cq->size));
  }
  // The wait fd: readable on a new completion or on transport activity (a
  // reader then calls fi_cq_read, which progresses).
  cq->wait.open(dom->fab);
  const WaitFd* w = &cq->wait;
  cq->ecq->on_push = [w] { w->signal(); };
  {
    std::lock_guard g(dom->fab->mu);
    dom->fab->cqs.push_back(cq);
  }
  *out = &cq->fid;
  return 0;
}

}  // namespace softrdma::prov
