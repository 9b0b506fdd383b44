// fi_getinfo: what softrdma offers (FI_EP_MSG, FI_MSG, FI_RMA, FI_ATOMIC over
// iWARP) and honest matching of an application's hints against it. Anything
// the provider cannot do returns -FI_ENODATA; unknown flag bits are ignored.
#include <arpa/inet.h>
#include <netdb.h>

#include <cstdlib>
#include <cstring>

#include "prov/prov.h"

namespace softrdma::prov {

namespace {

constexpr uint64_t kPrimaryCaps = FI_MSG | FI_RMA | FI_ATOMIC;
constexpr uint64_t kSecondaryCaps = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                                    FI_REMOTE_WRITE | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t kCaps = kPrimaryCaps | kSecondaryCaps | FI_RMA_EVENT;
constexpr uint64_t kDefaultCaps = FI_MSG | FI_RMA | kSecondaryCaps;
// Keys are STags the provider picks, addresses are virtual: what an iWARP
// RNIC needs too. No FI_MR_LOCAL: unregistered local buffers are fine.
constexpr uint64_t kMrMode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr uint64_t kMsgOrder = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR |
                               FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW |
                               FI_ORDER_SAS;
constexpr size_t kMaxQueue = 65536;
constexpr size_t kMaxMsg = UINT32_MAX;  // completions carry 32-bit lengths

size_t param_size(const char* name, size_t dflt) {
  size_t v = dflt;
  fi_param_get_size_t(&g_prov, name, &v);
  return v;
}

bool caps_ok(const fi_info* h) {
  return (h->caps & ~kCaps & ~FI_REMOTE_CQ_DATA) == 0;  // remote CQ data: see mode
}

// The mr_mode rules of fi_domain(3): what we require must be a subset of
// what the application can do, unless it uses no remote access at all.
bool mr_mode_ok(uint32_t version, uint64_t caps, int hint, int* out) {
  const bool remote = caps & (FI_RMA | FI_ATOMIC);
  if (hint == FI_MR_BASIC) hint = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  if (hint == FI_MR_UNSPEC && FI_VERSION_LT(version, FI_VERSION(1, 5))) hint = kMrMode;
  if (hint == FI_MR_SCALABLE) hint = 0;
  if ((kMrMode & ~static_cast<uint64_t>(hint)) == 0) {
    *out = static_cast<int>(kMrMode);
    return true;
  }
  if (!remote) {  // keys and addresses never cross the wire
    *out = 0;
    return true;
  }
  return false;
}

int set_addrs(const char* node, const char* service, uint64_t flags, const fi_info* hints,
              fi_info* info) {
  sockaddr_in src = local_addr();
  sockaddr_in dst{};
  bool have_dst = false;
  if (hints && hints->src_addr) {
    if (hints->src_addrlen < sizeof(sockaddr_in)) return -FI_ENODATA;
    src = *static_cast<const sockaddr_in*>(hints->src_addr);
  }
  if (hints && hints->dest_addr) {
    if (hints->dest_addrlen < sizeof(sockaddr_in)) return -FI_ENODATA;
    dst = *static_cast<const sockaddr_in*>(hints->dest_addr);
    have_dst = true;
  }
  if (node || service) {
    addrinfo ai{}, *res = nullptr;
    ai.ai_family = AF_INET;
    ai.ai_socktype = SOCK_STREAM;
    if (flags & FI_SOURCE) ai.ai_flags = AI_PASSIVE;
    if (getaddrinfo(node, service, &ai, &res) != 0 || !res) return -FI_ENODATA;
    sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
    freeaddrinfo(res);
    if (flags & FI_SOURCE) {
      if (node) src.sin_addr = a.sin_addr;
      src.sin_port = a.sin_port;
    } else {
      dst = a;
      have_dst = true;
    }
  }
  if (src.sin_family != AF_INET || (have_dst && dst.sin_family != AF_INET)) return -FI_ENODATA;
  info->addr_format = FI_SOCKADDR_IN;
  info->src_addr = std::malloc(sizeof(sockaddr_in));
  std::memcpy(info->src_addr, &src, sizeof(src));
  info->src_addrlen = sizeof(src);
  if (have_dst) {
    info->dest_addr = std::malloc(sizeof(sockaddr_in));
    std::memcpy(info->dest_addr, &dst, sizeof(dst));
    info->dest_addrlen = sizeof(dst);
  }
  return 0;
}

// Says why hints do not match (FI_LOG_LEVEL=info shows it) and fails.
bool reject(const char* why) {
  FI_INFO(&g_prov, FI_LOG_CORE, "hints not supported: %s\n", why);
  return false;
}

// Fills info from our capabilities, narrowed by hints; false: no match.
bool fill(uint32_t version, const fi_info* h, fi_info* info) {
  const fi_ep_attr* he = h ? h->ep_attr : nullptr;
  const fi_domain_attr* hd = h ? h->domain_attr : nullptr;
  const fi_tx_attr* ht = h ? h->tx_attr : nullptr;
  const fi_rx_attr* hr = h ? h->rx_attr : nullptr;
  const fi_fabric_attr* hf = h ? h->fabric_attr : nullptr;

  if (he && he->type != FI_EP_UNSPEC && he->type != FI_EP_MSG) return reject("endpoint type (FI_EP_MSG only)");
  if (he && he->protocol != FI_PROTO_UNSPEC && he->protocol != FI_PROTO_IWARP) return reject("protocol (iWARP only)");
  if (h && !caps_ok(h)) return reject("capabilities");
  if (h && h->addr_format != FI_FORMAT_UNSPEC && h->addr_format != FI_SOCKADDR &&
      h->addr_format != FI_SOCKADDR_IN)
    return reject("address format (FI_SOCKADDR_IN only)");
  if (hf && hf->name && std::strcmp(hf->name, "softrdma") != 0) return reject("fabric name");
  if (hd && hd->name && std::strcmp(hd->name, "softrdma0") != 0) return reject("domain name");

  uint64_t caps = (h && h->caps) ? (h->caps | (kSecondaryCaps & ~FI_RMA_EVENT)) : kDefaultCaps;
  if (h && h->caps && !(h->caps & (FI_RMA | FI_ATOMIC)))
    caps &= ~(FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
  // Remote CQ data (RFC 7306 Immediate Data) consumes a posted receive at
  // the target: the application must accept FI_RX_CQ_DATA mode for it.
  const bool rx_cq_data = h && (h->mode & FI_RX_CQ_DATA);
  if ((caps & FI_REMOTE_CQ_DATA) && !rx_cq_data) return reject("FI_REMOTE_CQ_DATA needs FI_RX_CQ_DATA mode");
  info->mode = rx_cq_data ? FI_RX_CQ_DATA : 0;

  int mr_mode = 0;
  const int hint_mr = hd ? hd->mr_mode : FI_MR_UNSPEC;
  if (!mr_mode_ok(version, caps, hint_mr, &mr_mode)) {
    // Unasked-for RMA is dropped rather than failing a plain query (rxm
    // opens its fabric this way); asked-for RMA needs the MR modes.
    if (h && h->caps) return reject("mr_mode: need VIRT_ADDR|ALLOCATED|PROV_KEY for RMA");
    caps &= ~(FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
    mr_mode_ok(version, caps, hint_mr, &mr_mode);
  }
  info->caps = caps;
  if (hd && hd->mr_key_size && hd->mr_key_size < sizeof(uint32_t)) return reject("mr_key_size < 4");
  if (hd && hd->cq_data_size > sizeof(uint64_t)) return reject("cq_data_size > 8");
  if (hd && hd->threading != FI_THREAD_UNSPEC && hd->threading > FI_THREAD_COMPLETION &&
      hd->threading != FI_THREAD_SAFE)
    return reject("threading level");
  for (fi_progress p : {hd ? hd->control_progress : FI_PROGRESS_UNSPEC,
                        hd ? hd->data_progress : FI_PROGRESS_UNSPEC}) {
    if (p == FI_PROGRESS_AUTO) return reject("FI_PROGRESS_AUTO");
  }

  fi_domain_attr* d = info->domain_attr;
  d->name = strdup("softrdma0");
  d->threading = (hd && hd->threading) ? hd->threading : FI_THREAD_SAFE;
  d->control_progress = FI_PROGRESS_MANUAL;
  d->data_progress = FI_PROGRESS_MANUAL;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = FI_AV_UNSPEC;
  d->mr_mode = mr_mode;
  d->mr_key_size = sizeof(uint32_t);
  d->cq_data_size = rx_cq_data ? sizeof(uint64_t) : 0;
  d->cq_cnt = 1024;
  d->ep_cnt = 65536;
  d->tx_ctx_cnt = 1;
  d->rx_ctx_cnt = 1;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->mr_iov_limit = 1;
  d->mr_cnt = 1u << 20;
  d->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;

  fi_fabric_attr* f = info->fabric_attr;
  f->name = strdup("softrdma");
  f->prov_version = g_prov.version;

  fi_ep_attr* e = info->ep_attr;
  e->type = FI_EP_MSG;
  e->protocol = FI_PROTO_IWARP;
  e->protocol_version = 1;
  e->max_msg_size = kMaxMsg;
  e->msg_prefix_size = 0;
  e->max_order_raw_size = kMaxMsg;
  e->max_order_war_size = kMaxMsg;
  e->max_order_waw_size = kMaxMsg;
  e->tx_ctx_cnt = 1;
  e->rx_ctx_cnt = 1;

  auto size = [](size_t hint, size_t dflt) { return hint ? std::min(hint, kMaxQueue) : dflt; };
  fi_tx_attr* t = info->tx_attr;
  t->caps = caps & ~(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE);
  t->mode = info->mode;
  t->op_flags = ht ? (ht->op_flags & (FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                      FI_DELIVERY_COMPLETE))
                   : 0;
  t->msg_order = kMsgOrder;
  t->comp_order = FI_ORDER_NONE;
  t->inject_size = param_size("inject_size", 512);
  t->size = size(ht ? ht->size : 0, param_size("tx_size", 256));
  t->iov_limit = kMaxSge;
  t->rma_iov_limit = 1;
  if (ht && ht->inject_size > t->inject_size) return reject("inject_size");
  if (ht && ht->iov_limit > kMaxSge) return reject("tx iov_limit");

  fi_rx_attr* r = info->rx_attr;
  r->caps = caps & ~(FI_SEND | FI_READ | FI_WRITE);
  r->mode = info->mode;
  r->op_flags = hr ? (hr->op_flags & FI_COMPLETION) : 0;
  r->msg_order = kMsgOrder;
  r->comp_order = FI_ORDER_NONE;
  r->total_buffered_recv = 0;
  r->size = size(hr ? hr->size : 0, param_size("rx_size", 256));
  r->iov_limit = kMaxSge;
  if (hr && hr->iov_limit > kMaxSge) return reject("rx iov_limit");
  if ((ht && ht->msg_order & ~kMsgOrder) || (hr && hr->msg_order & ~kMsgOrder)) return reject("msg_order");
  return true;
}

}  // namespace

sockaddr_in local_addr() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char* s = nullptr;
  if (fi_param_get_str(&g_prov, "addr", &s) == FI_SUCCESS && s && *s) inet_pton(AF_INET, s, &a.sin_addr);
  return a;
}

size_t max_cm_data() { return Engine::kMaxPrivateData; }

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** out) {
  fi_info* info = fi_allocinfo();
  if (!info) return -FI_ENOMEM;
  if (!fill(version, hints, info)) {
    fi_freeinfo(info);
    return -FI_ENODATA;
  }
  if (int rc = set_addrs(node, service, flags, hints, info); rc != 0) {
    fi_freeinfo(info);
    return rc;
  }
  *out = info;
  return 0;
}

}  // namespace softrdma::prov
