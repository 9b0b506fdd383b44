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

// What an engine completion comes to for its operation: the entry in *e
// and 0, or the FI_E* error (e->err, e->prov_errno set). No side effects:
// settling counts with it, reading translates with it.
int outcome(const Op* op, const Wc& wc, fi_cq_err_entry* e) {
  *e = {};
  e->op_context = op->context;
  e->flags = op->flags;
  int err = cq_error(wc.status);
  if (err == 0) {
    if (wc.opcode == WcOpcode::kRecvRdmaImm) {  // the target of fi_writedata
      e->flags = FI_REMOTE_WRITE | FI_RMA | FI_REMOTE_CQ_DATA;
      e->data = wc.imm_data;
      return 0;
    }
    if (wc.opcode != WcOpcode::kRecv) {
      e->len = op->len;
      return 0;
    }
    err = recv_done(op, wc, e);
    if (err == 0) return 0;
  }
  e->err = err;
  e->prov_errno = prov_errno(wc.status, wc.vendor_err);
  return err;
}

// fi_cq_attr.size 0: room for this many unread completions.
constexpr size_t kDefaultCqSize = 4096;

ssize_t cq_read(fid_cq* f, void* buf, size_t count) { return from_fid<Cq>(f)->read(buf, count, nullptr); }

ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src) {
  return from_fid<Cq>(f)->read(buf, count, src);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* out, uint64_t flags) {
  return from_fid<Cq>(f)->readerr(out, flags);
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
    cq->dom->core().progress(timeout == 0 ? 0 : 1000);
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
  Core& core = cq->dom->core();
  {
    std::lock_guard g(core.mu);
    std::erase(core.cqs, cq);
    // Completed operations nobody will read go back to the pool.
    cq->settle();
    Wc wc;
    while (cq->ecq->pop_visited(&wc)) {
      if (wc.wr_id != 0) free_op(reinterpret_cast<Op*>(wc.wr_id));
    }
    core.engine->destroy_cq(cq->ecq);
  }
  cq->wait.close();
  cq->dom->children.drop();
  delete cq;
  return 0;
}

fi_ops g_cq_fi_ops = {sizeof(fi_ops), cq_close, no_bind, cq_control, no_ops_open, nullptr, nullptr};
fi_ops_cq g_cq_ops = {sizeof(fi_ops_cq), cq_read,       cq_readfrom, cq_readerr,
                      cq_sread,          cq_sreadfrom,  cq_signal,   cq_strerror};

}  // namespace

// On arrival: the operation's counter counts it, and a success it must not
// report (FI_SELECTIVE_COMPLETION, inject, a delivery-complete operation's
// first work request, the sink) is marked wr_id 0 and never translated.
void Cq::settle() {
  ecq->visit([this](Wc& wc) {
    Op* op = op_done(&wc);  // wc now speaks for the whole operation
    if (!op) {
      wc.wr_id = 0;  // more of this operation to come
      return;
    }
    if (op->work != RdmWork::kNone) {  // an RDM endpoint's own
      internal.emplace_back(op, wc);
      wc.wr_id = 0;
      return;
    }
    fi_cq_err_entry e;
    const int err = outcome(op, wc, &e);
    if (err == 0) atomic_fetched(op);
    if (forward) {  // an RDM endpoint's operation: to its CQ, as an entry made there
      cntr_add(op->cntr, err != 0);
      if (Cq* to = op->ep->tx_cq; to && (err != 0 || op->report)) to->push(CqItem{e, err != 0});
      free_op(op);
      wc.wr_id = 0;
      return;
    }
    // fi_writedata's target consumed a receive: always reported
    // (FI_RX_CQ_DATA), and counted by no receive counter.
    const bool remote_write = err == 0 && wc.opcode == WcOpcode::kRecvRdmaImm;
    if (!remote_write) cntr_add(op->cntr, err != 0);
    if (err != 0) {
      FI_INFO(&g_prov, FI_LOG_CQ, "error completion: %s (%s, vendor 0x%x) op flags 0x%llx len %zu\n",
              fi_strerror(err), to_string(wc.status), wc.vendor_err,
              static_cast<unsigned long long>(op->flags), op->len);
    }
    const bool report = err != 0 || op->report || remote_write;
    if (report && !sink) return;
    free_op(op);
    wc.wr_id = 0;
  });
  if (!internal.empty()) {
    handling.swap(internal);  // handling may settle again
    for (auto& [op, wc] : handling) rdm_internal(op, wc);
    handling.clear();
  }
  take();  // what reports nothing leaves the ring's front
}

void Cq::push(const CqItem& item) {
  made.push_back(item);
  wait.signal();
}

// The oldest settled completion that reports something, translated into
// staged; false when there is none.
bool Cq::take() {
  if (has_staged) return true;
  Wc wc;
  while (ecq->pop_visited(&wc)) {
    if (wc.wr_id == 0) continue;
    Op* op = reinterpret_cast<Op*>(wc.wr_id);
    staged.error = outcome(op, wc, &staged.e) != 0;
    staged.src = FI_ADDR_NOTAVAIL;
    free_op(op);
    has_staged = true;
    return true;
  }
  if (made.empty()) return false;
  staged = made.front();
  made.pop_front();
  has_staged = true;
  return true;
}

ssize_t Cq::read(void* buf, size_t count, fi_addr_t* src) {
  Core& core = dom->core();
  // c1/c3: a reader finding nothing gives the engine's thread the CPU, and
  // must not hold the lock while it does.
  if (core.engine_threaded() && ecq->size() == 0) core.progress();
  std::lock_guard g(core.mu);
  if (!has_staged && ecq->size() == 0 && made.empty()) {
    core.progress();  // c2: the pass; c1/c3: routes only
  } else {
    settle();
  }
  const size_t sz = entry_size(format);
  auto* out = static_cast<uint8_t*>(buf);
  size_t done = 0;
  while (done < count && take() && !staged.error) {
    std::memcpy(out + done * sz, &staged.e, sz);
    if (src) src[done] = staged.src;
    has_staged = false;
    ++done;
  }
  if (done > 0) return static_cast<ssize_t>(done);
  return has_staged || ecq->overrun() ? -FI_EAVAIL : -FI_EAGAIN;
}

ssize_t Cq::readerr(fi_cq_err_entry* out, uint64_t flags) {
  std::lock_guard g(dom->core().mu);
  settle();
  if (!has_staged && ecq->overrun()) {  // fatal: reported on every call
    *out = fi_cq_err_entry{};
    out->err = FI_EOVERRUN;
    return 1;
  }
  if (!has_staged || !staged.error) return -FI_EAGAIN;
  *out = staged.e;  // no provider err_data: prov_errno says it all
  out->err_data = nullptr;
  out->err_data_size = 0;
  if (!(flags & FI_PEEK)) has_staged = false;
  return 1;
}

void Cq::arm() {
  wait.drain();
  dom->core().engine->arm_cq(ecq, wait.efd);
}

bool Cq::ready() const {
  return has_staged || ecq->size() > 0 || !made.empty() || ecq->overrun();
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
  dom->children.add();
  cq->format = format;
  cq->size = attr && attr->size ? attr->size : kDefaultCqSize;
  cq->fid.fid.fclass = FI_CLASS_CQ;
  cq->fid.fid.context = context;
  cq->fid.fid.ops = &g_cq_fi_ops;
  cq->fid.ops = &g_cq_ops;
  Core& core = dom->core();
  {
    std::lock_guard g(core.mu);
    cq->ecq = core.engine->create_cq(static_cast<uint32_t>(cq->size));
    core.cqs.push_back(cq);
    // The wait fd: readable on a new completion (the engine writes it once
    // armed) or on transport activity (a reader then calls fi_cq_read,
    // which progresses).
    cq->wait.open(core);
  }
  *out = &cq->fid;
  return 0;
}

}  // namespace softrdma::prov
