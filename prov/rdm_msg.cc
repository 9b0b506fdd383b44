// fi_ops_msg and fi_ops_tagged of native FI_EP_RDM endpoints: each call
// names its peer by AV entry; rdm_datapath.cc carries the messages.
#include "prov/prov.h"

namespace softrdma::prov {

namespace {

Ep* ep_of(fid_ep* f) { return from_fid<Ep>(f); }

ssize_t recv(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t src, void* ctx) {
  iovec v{buf, len};
  return rdm_recv(ep_of(f), &v, &desc, 1, src, ctx, 0, false, 0, 0);
}
ssize_t recvv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src, void* ctx) {
  return rdm_recv(ep_of(f), iov, desc, count, src, ctx, 0, false, 0, 0);
}
ssize_t recvmsg(fid_ep* f, const fi_msg* m, uint64_t flags) {
  return rdm_recv(ep_of(f), m->msg_iov, m->desc, m->iov_count, m->addr, m->context, flags, false,
                  0, 0);
}
ssize_t send(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest, void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, &desc, 1, dest, ctx, 0, false, 0, nullptr, true);
}
ssize_t sendv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest, void* ctx) {
  return rdm_send(ep_of(f), iov, desc, count, dest, ctx, 0, false, 0, nullptr, true);
}
ssize_t sendmsg(fid_ep* f, const fi_msg* m, uint64_t flags) {
  return rdm_send(ep_of(f), m->msg_iov, m->desc, m->iov_count, m->addr, m->context, flags, false,
                  0, (flags & FI_REMOTE_CQ_DATA) ? &m->data : nullptr, true);
}
ssize_t inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, nullptr, 1, dest, nullptr, FI_INJECT, false, 0, nullptr, false);
}
ssize_t senddata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                 fi_addr_t dest, void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, &desc, 1, dest, ctx, 0, false, 0, &data, true);
}
ssize_t injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, nullptr, 1, dest, nullptr, FI_INJECT, false, 0, &data, false);
}

ssize_t trecv(fid_ep* f, void* buf, size_t len, void* desc, fi_addr_t src, uint64_t tag,
              uint64_t ignore, void* ctx) {
  iovec v{buf, len};
  return rdm_recv(ep_of(f), &v, &desc, 1, src, ctx, 0, true, tag, ignore);
}
ssize_t trecvv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t src,
               uint64_t tag, uint64_t ignore, void* ctx) {
  return rdm_recv(ep_of(f), iov, desc, count, src, ctx, 0, true, tag, ignore);
}
ssize_t trecvmsg(fid_ep* f, const fi_msg_tagged* m, uint64_t flags) {
  return rdm_recv(ep_of(f), m->msg_iov, m->desc, m->iov_count, m->addr, m->context, flags, true,
                  m->tag, m->ignore);
}
ssize_t tsend(fid_ep* f, const void* buf, size_t len, void* desc, fi_addr_t dest, uint64_t tag,
              void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, &desc, 1, dest, ctx, 0, true, tag, nullptr, true);
}
ssize_t tsendv(fid_ep* f, const iovec* iov, void** desc, size_t count, fi_addr_t dest,
               uint64_t tag, void* ctx) {
  return rdm_send(ep_of(f), iov, desc, count, dest, ctx, 0, true, tag, nullptr, true);
}
ssize_t tsendmsg(fid_ep* f, const fi_msg_tagged* m, uint64_t flags) {
  return rdm_send(ep_of(f), m->msg_iov, m->desc, m->iov_count, m->addr, m->context, flags, true,
                  m->tag, (flags & FI_REMOTE_CQ_DATA) ? &m->data : nullptr, true);
}
ssize_t tinject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, nullptr, 1, dest, nullptr, FI_INJECT, true, tag, nullptr, false);
}
ssize_t tsenddata(fid_ep* f, const void* buf, size_t len, void* desc, uint64_t data,
                  fi_addr_t dest, uint64_t tag, void* ctx) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, &desc, 1, dest, ctx, 0, true, tag, &data, true);
}
ssize_t tinjectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                    uint64_t tag) {
  iovec v{const_cast<void*>(buf), len};
  return rdm_send(ep_of(f), &v, nullptr, 1, dest, nullptr, FI_INJECT, true, tag, &data, false);
}

}  // namespace

fi_ops_msg g_rdm_msg_ops = {sizeof(fi_ops_msg), recv, recvv, recvmsg, send, sendv, sendmsg,
                            inject, senddata, injectdata};
fi_ops_tagged g_rdm_tagged_ops = {sizeof(fi_ops_tagged), trecv, trecvv, trecvmsg, tsend,
                                  tsendv, tsendmsg, tinject, tsenddata, tinjectdata};

}  // namespace softrdma::prov
