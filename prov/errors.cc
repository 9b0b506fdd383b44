// Error translation at the provider boundary: engine -errno and completion
// statuses to libfabric codes, and a Terminate's cause to readable text.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "prov/prov.h"
#include "stack/iwarp/wire.h"

namespace softrdma::prov {

int fi_error(int neg_errno) {
  switch (-neg_errno) {
    case 0: return 0;
    case EAGAIN: return -FI_EAGAIN;
    case EINVAL: return -FI_EINVAL;
    case EACCES: return -FI_EACCES;
    case ENOMEM: return -FI_ENOMEM;
    case EMFILE:
    case ENFILE: return -FI_EMFILE;  // out of descriptors (FI_ENFILE is not defined)
    case EMSGSIZE: return -FI_EMSGSIZE;
    case ENOENT: return -FI_ENOENT;
    case EISCONN: return -FI_EISCONN;
    case ENOTCONN: return -FI_ENOTCONN;
    case ECONNREFUSED: return -FI_ECONNREFUSED;
    case ECONNRESET: return -FI_ECONNRESET;
    case ETIMEDOUT: return -FI_ETIMEDOUT;
    case EADDRINUSE: return -FI_EADDRINUSE;
    case EPROTO: return -FI_EIO;
    case EREMOTEIO: return -FI_EREMOTEIO;
    case EPIPE: return -FI_ECONNABORTED;
    case EHOSTUNREACH: return -FI_EHOSTUNREACH;
    case ENETUNREACH: return -FI_ENETUNREACH;
    default: return -FI_EOTHER;
  }
}

int cq_error(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess: return 0;
    case WcStatus::kLocLenErr: return FI_ETRUNC;
    case WcStatus::kLocQpOpErr: return FI_EOPNOTSUPP;
    case WcStatus::kLocProtErr: return FI_EACCES;
    case WcStatus::kWrFlushErr: return FI_ECANCELED;
    case WcStatus::kRemAccessErr: return FI_EACCES;
    case WcStatus::kRemOpErr: return FI_EREMOTEIO;
    case WcStatus::kRemInvReqErr: return FI_EREMOTEIO;
    case WcStatus::kBadRespErr: return FI_EIO;
    case WcStatus::kFatalErr: return FI_ECONNRESET;
  }
  return FI_EOTHER;
}

// The engine's vendor_err is a Terminate's cause (layer << 12 | etype << 8 |
// ecode) or, for a stream that failed under the QP (status kFatalErr with no
// layer bits), the transport's errno. prov_errno keeps causes positive and
// makes errnos negative so that the two never read alike.
int prov_errno(WcStatus s, uint32_t vendor_err) {
  if (s == WcStatus::kFatalErr && vendor_err != 0 && (vendor_err >> 12) == 0)
    return -static_cast<int>(vendor_err);
  return static_cast<int>(vendor_err);
}

const char* prov_errno_string(int prov_errno, char* buf, size_t len) {
  static const char* kLayer[] = {"RDMAP", "DDP", "MPA"};
  if (prov_errno < 0) {
    std::snprintf(buf, len, "transport: %s", std::strerror(-prov_errno));
    return buf;
  }
  const auto v = static_cast<uint32_t>(prov_errno);
  unsigned layer = (v >> 12) & 0xf, etype = (v >> 8) & 0xf, ecode = v & 0xff;
  if (v == 0) {
    std::snprintf(buf, len, "no Terminate");
  } else {
    std::snprintf(buf, len, "iWARP Terminate: layer %s, error type %u, error code 0x%02x",
                  layer < 3 ? kLayer[layer] : "?", etype, ecode);
  }
  return buf;
}

int no_bind(fid*, fid*, uint64_t) { return -FI_ENOSYS; }
int no_control(fid*, int, void*) { return -FI_ENOSYS; }
int no_ops_open(fid*, const char*, uint64_t, void**, void*) { return -FI_ENOSYS; }
int no_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
int no_rctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
ssize_t no_left(fid_ep*) { return -FI_ENOSYS; }
int no_join(fid_ep*, const void*, uint64_t, fid_mc**, void*) { return -FI_ENOSYS; }
int no_setopt(fid_t, int, int, const void*, size_t) { return -FI_ENOPROTOOPT; }

int copy_name(const sockaddr_in& a, void* addr, size_t* len) {
  size_t have = *len;
  *len = sizeof(sockaddr_in);  // the size needed, also when too small
  if (have < sizeof(sockaddr_in)) return -FI_ETOOSMALL;
  std::memcpy(addr, &a, sizeof(a));
  return 0;
}

int cm_getopt(fid_t, int level, int name, void* val, size_t* len) {
  if (level != FI_OPT_ENDPOINT || name != FI_OPT_CM_DATA_SIZE) return -FI_ENOPROTOOPT;
  if (*len < sizeof(size_t)) return -FI_ETOOSMALL;
  *static_cast<size_t*>(val) = max_cm_data();
  *len = sizeof(size_t);
  return 0;
}

}  // namespace softrdma::prov
