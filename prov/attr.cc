// fi_getinfo: what softrdma offers (FI_EP_MSG, FI_MSG, FI_RMA, FI_ATOMIC over
// iWARP) and honest matching of an application's hints against it, with the
// rules libfabric's own providers follow (prov/util/src/util_attr.c:
// ofi_check_info and ofi_alter_info): a hinted size or limit is a minimum the
// provider must meet, and what matches is echoed back. Anything the provider
// cannot do returns -FI_ENODATA; unknown flag bits are ignored.
#include <arpa/inet.h>
#include <netdb.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "prov/prov.h"
#include "stack/common/settings.h"

namespace softrdma::prov {

namespace {

// fi_getinfo(3)'s three kinds of capability bits. Primary ones must be
// asked for; their modifiers narrow them (none named: all of them); the
// secondary ones are offered whether asked for or not. No FI_RMA_EVENT: the
// engine does not report remote accesses, so no counter could count them.
constexpr uint64_t kPrimaryCaps = FI_MSG | FI_RMA | FI_ATOMIC;
constexpr uint64_t kMsgModifiers = FI_SEND | FI_RECV;
constexpr uint64_t kRmaModifiers = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t kSecondaryCaps = FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t kRmaCaps = FI_RMA | FI_ATOMIC | kRmaModifiers;
// Only the native FI_EP_RDM endpoint (rdm_ep.cc, rdm_datapath.cc) has
// tagged messages, directed receives, multi-receive buffers and senders'
// addresses.
constexpr uint64_t kRdmOnlyCaps = FI_TAGGED | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE;
constexpr uint64_t kRdmCaps = kRmaCaps | FI_MSG | FI_TAGGED | kMsgModifiers | FI_MULTI_RECV |
                              FI_SOURCE | kSecondaryCaps;
// FI_REMOTE_CQ_DATA is no capability bit, but some applications put it there.
constexpr uint64_t kCaps = kPrimaryCaps | kMsgModifiers | kRmaModifiers | kSecondaryCaps |
                           FI_REMOTE_CQ_DATA | kRdmOnlyCaps;
constexpr uint64_t kDefaultCaps = kPrimaryCaps | kMsgModifiers | kRmaModifiers | kSecondaryCaps;
// The bits fi_endpoint(3) lets a transmit or receive context's caps hold.
constexpr uint64_t kTxCaps = kPrimaryCaps | FI_TAGGED | FI_SEND | FI_READ | FI_WRITE;
constexpr uint64_t kRxCaps = kPrimaryCaps | FI_TAGGED | FI_RECV | FI_REMOTE_READ |
                             FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE;
// Object counts the domain reports; more asked for is no match.
constexpr size_t kCqCnt = 1024, kCntrCnt = 1024, kEpCnt = 65536, kMrCnt = 1u << 20;
// Keys are STags the provider picks, addresses are virtual: what an iWARP
// RNIC needs too. No FI_MR_LOCAL: unregistered local buffers are fine.
constexpr int kMrMode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr uint64_t kMsgOrder = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR |
                               FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW |
                               FI_ORDER_SAS;
constexpr uint64_t kTxOpFlags = FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                FI_DELIVERY_COMPLETE;
constexpr uint64_t kRxOpFlags = FI_COMPLETION;
constexpr size_t kMaxQueue = 65536;
constexpr size_t kMaxMsg = UINT32_MAX;  // completions carry 32-bit lengths
constexpr size_t kKeySize = sizeof(uint32_t);
constexpr size_t kCqDataSize = sizeof(uint64_t);  // RFC 7306 Immediate Data

// Says why hints do not match (FI_LOG_LEVEL=info shows it) and fails.
bool reject(const char* why) {
  FI_INFO(&g_prov, FI_LOG_CORE, "hints not supported: %s\n", why);
  return false;
}

// An enum field of the caller's hints as the int a C caller may have put
// there: reading an out-of-range value as the C++ enum is undefined.
template <typename E>
int raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

bool valid_threading(const fi_threading& t) {
  return raw(t) >= FI_THREAD_UNSPEC && raw(t) <= FI_THREAD_ENDPOINT;
}
bool valid_progress(const fi_progress& p) {
  return raw(p) >= FI_PROGRESS_UNSPEC && raw(p) <= FI_PROGRESS_MANUAL;
}

// The provider's side of the fi_domain(3) mr_mode rules. *out is the mode to
// report; false: the application cannot do what RMA here needs.
bool match_mr_mode(uint32_t version, const fi_domain_attr* hd, uint64_t caps, int* out) {
  const bool remote = caps & (FI_RMA | FI_ATOMIC);
  const bool legacy = FI_VERSION_LT(version, FI_VERSION(1, 5));
  if (!hd) {  // no preference: state our needs
    *out = legacy ? FI_MR_BASIC : kMrMode;
    return true;
  }
  const int hint = hd->mr_mode;
  if (!remote) {  // keys and addresses never cross the wire
    *out = legacy || (hint & (FI_MR_BASIC | FI_MR_SCALABLE)) ? hint : 0;
    return true;
  }
  if (hint & FI_MR_SCALABLE) return false;  // application-chosen keys at offsets
  if (hint & FI_MR_BASIC) {  // the old name of VIRT_ADDR|ALLOCATED|PROV_KEY
    *out = FI_MR_BASIC;
    return legacy || hint == FI_MR_BASIC;
  }
  if (legacy) {  // FI_MR_UNSPEC: the provider chooses, BASIC here
    *out = FI_MR_BASIC;
    return hint == FI_MR_UNSPEC;
  }
  *out = kMrMode;
  return (hint & kMrMode) == kMrMode;
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

// Endpoint attributes the hints may ask for (ofi_check_ep_attr).
bool check_ep(const fi_ep_attr* he, uint64_t caps) {
  if (!he) return true;
  if (he->type != FI_EP_UNSPEC && he->type != FI_EP_MSG && he->type != FI_EP_RDM)
    return reject("endpoint type (FI_EP_MSG, or FI_EP_RDM for RMA and atomics)");
  if (he->protocol != FI_PROTO_UNSPEC && he->protocol != FI_PROTO_IWARP)
    return reject("protocol (iWARP only)");
  if (he->protocol_version > 1) return reject("protocol version");
  if (he->max_msg_size > kMaxMsg) return reject("max_msg_size");
  if (he->tx_ctx_cnt > 1 || he->rx_ctx_cnt > 1) return reject("multiple or shared contexts");
  if (he->auth_key_size) return reject("authentication keys");
  if ((caps & (FI_RMA | FI_ATOMIC)) &&
      (he->max_order_raw_size > kMaxMsg || he->max_order_war_size > kMaxMsg ||
       he->max_order_waw_size > kMaxMsg))
    return reject("max_order sizes");
  return true;
}

bool check_domain(const fi_domain_attr* hd, size_t cq_data_size) {
  if (!hd) return true;
  if (hd->name && std::strcmp(hd->name, "softrdma0") != 0) return reject("domain name");
  if (!valid_threading(hd->threading)) return reject("threading level");
  if (!valid_progress(hd->control_progress) || !valid_progress(hd->data_progress))
    return reject("progress model");
  if (raw(hd->resource_mgmt) < FI_RM_UNSPEC || raw(hd->resource_mgmt) > FI_RM_ENABLED)
    return reject("resource management");
  if (hd->cq_data_size > cq_data_size) return reject("cq_data_size (8 with FI_RX_CQ_DATA mode)");
  if (hd->mr_key_size && hd->mr_key_size < kKeySize) return reject("mr_key_size < 4");
  if (hd->mr_iov_limit > 1) return reject("mr_iov_limit");
  if (hd->caps & ~kSecondaryCaps) return reject("domain caps");
  if (hd->cq_cnt > kCqCnt || hd->cntr_cnt > kCntrCnt || hd->ep_cnt > kEpCnt ||
      hd->mr_cnt > kMrCnt)
    return reject("cq_cnt, cntr_cnt, ep_cnt or mr_cnt");
  if (hd->max_ep_tx_ctx > 1 || hd->max_ep_rx_ctx > 1 || hd->max_ep_stx_ctx ||
      hd->max_ep_srx_ctx)
    return reject("multiple or shared contexts per endpoint");
  if (hd->max_err_data > max_cm_data()) return reject("max_err_data");
  return true;
}

bool check_tx(const fi_tx_attr* ht, size_t inject_size) {
  if (!ht) return true;
  if (ht->caps & ~kCaps) return reject("tx caps");
  if (ht->op_flags & ~kTxOpFlags) return reject("tx op_flags");
  if (ht->msg_order & ~kMsgOrder) return reject("tx msg_order");
  if (ht->comp_order & ~FI_ORDER_NONE) return reject("tx comp_order");
  if (ht->inject_size > inject_size) return reject("inject_size");
  if (ht->size > kMaxQueue) return reject("tx size");
  if (ht->iov_limit > kMaxIov) return reject("tx iov_limit");
  if (ht->rma_iov_limit > 1) return reject("rma_iov_limit");
  return true;
}

bool check_rx(const fi_rx_attr* hr) {
  if (!hr) return true;
  if (hr->caps & ~kCaps) return reject("rx caps");
  if (hr->op_flags & ~kRxOpFlags) return reject("rx op_flags");
  if (hr->msg_order & ~kMsgOrder) return reject("rx msg_order");
  if (hr->comp_order & ~FI_ORDER_NONE) return reject("rx comp_order");
  // Sends that find no receive are held up to FI_SOFTRDMA_UNEXPECTED_BYTES.
  if (hr->total_buffered_recv >
      static_cast<size_t>(settings::get_int(settings::Id::kUnexpectedBytes)))
    return reject("total_buffered_recv");
  if (hr->size > kMaxQueue) return reject("rx size");
  if (hr->iov_limit > kMaxIov) return reject("rx iov_limit");
  return true;
}

// Asked-for capabilities with their modifiers: a primary capability that
// names none of its kind gets them all (libfabric's ofi_get_caps).
uint64_t with_modifiers(uint64_t caps) {
  if ((caps & (FI_MSG | FI_TAGGED)) && !(caps & kMsgModifiers)) caps |= kMsgModifiers;
  if ((caps & (FI_RMA | FI_ATOMIC)) && !(caps & kRmaModifiers)) caps |= kRmaModifiers;
  if (!(caps & (FI_RMA | FI_ATOMIC))) caps &= ~kRmaCaps;  // they modify nothing then
  return caps;
}

// A context's caps: the endpoint's that apply to it (applicable), narrowed
// to the hinted ones if the hints name some (fi_endpoint(3)).
uint64_t context_caps(uint64_t caps, uint64_t applicable, uint64_t hint) {
  caps &= applicable;
  return hint ? caps & with_modifiers(hint) : caps;
}

// A hinted value if there is one, else ours.
size_t hinted(size_t hint, size_t ours) { return hint ? hint : ours; }

// Fills info from our capabilities, narrowed by hints; false: no match.
bool fill(uint32_t version, const fi_info* h, fi_info* info) {
  const fi_ep_attr* he = h ? h->ep_attr : nullptr;
  const fi_domain_attr* hd = h ? h->domain_attr : nullptr;
  const fi_tx_attr* ht = h ? h->tx_attr : nullptr;
  const fi_rx_attr* hr = h ? h->rx_attr : nullptr;
  const fi_fabric_attr* hf = h ? h->fabric_attr : nullptr;
  const uint64_t hcaps = h ? h->caps : 0;
  const bool rdm = he && he->type == FI_EP_RDM;

  if (hcaps & ~kCaps) return reject("capabilities");
  if (rdm && (hcaps & ~(kRdmCaps | FI_DIRECTED_RECV | FI_REMOTE_CQ_DATA)))
    return reject("FI_EP_RDM capabilities");
  if (!rdm && (hcaps & kRdmOnlyCaps))
    return reject("FI_TAGGED, FI_DIRECTED_RECV, FI_MULTI_RECV and FI_SOURCE need FI_EP_RDM");
  if (h && h->addr_format != FI_FORMAT_UNSPEC && h->addr_format != FI_SOCKADDR &&
      h->addr_format != FI_SOCKADDR_IN)
    return reject("address format (FI_SOCKADDR_IN only)");
  if (hf && hf->name && std::strcmp(hf->name, "softrdma") != 0) return reject("fabric name");

  // Remote CQ data (RFC 7306 Immediate Data) consumes a posted receive at
  // the target: the application must accept FI_RX_CQ_DATA mode for it.
  // An RDM endpoint's messages carry it in their header.
  const bool rx_cq_data = !rdm && h && (h->mode & FI_RX_CQ_DATA);
  const bool rdm_msgs = rdm && (!hcaps || (hcaps & (FI_MSG | FI_TAGGED)));
  if ((hcaps & FI_REMOTE_CQ_DATA) && !rx_cq_data && !rdm_msgs)
    return reject("FI_REMOTE_CQ_DATA needs FI_RX_CQ_DATA mode (FI_EP_MSG) or messages (FI_EP_RDM)");
  const size_t cq_data_size = rx_cq_data || rdm_msgs ? kCqDataSize : 0;
  const size_t inject_size = static_cast<size_t>(settings::get_int(settings::Id::kInjectSize));

  // Asked-for primary caps and modifiers plus all secondary ones.
  uint64_t caps = hcaps ? with_modifiers(hcaps) | kSecondaryCaps : rdm ? kRdmCaps : kDefaultCaps;
  int mr_mode = 0;
  if (!match_mr_mode(version, hd, caps, &mr_mode)) {
    if (rdm) return reject("mr_mode: need VIRT_ADDR|ALLOCATED|PROV_KEY (or FI_MR_BASIC) for RMA");
    // Unasked-for RMA is dropped rather than failing a plain query (rxm
    // opens its fabric this way); asked-for RMA needs the MR modes.
    if (hcaps) return reject("mr_mode: need VIRT_ADDR|ALLOCATED|PROV_KEY (or FI_MR_BASIC) for RMA");
    caps &= ~kRmaCaps;
    match_mr_mode(version, hd, caps, &mr_mode);
  }
  if (!check_ep(he, caps) || !check_domain(hd, cq_data_size) || !check_tx(ht, inject_size) ||
      !check_rx(hr))
    return false;

  info->caps = caps;
  info->mode = rx_cq_data ? FI_RX_CQ_DATA : 0;

  fi_domain_attr* d = info->domain_attr;
  d->name = strdup("softrdma0");
  d->threading = (hd && hd->threading) ? hd->threading : FI_THREAD_SAFE;
  // Manual unless asked: FI_PROGRESS_AUTO costs a thread (progress.cc).
  auto progress = [](fi_progress hint) {
    return hint == FI_PROGRESS_AUTO ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
  };
  d->control_progress = progress(hd ? hd->control_progress : FI_PROGRESS_UNSPEC);
  d->data_progress = progress(hd ? hd->data_progress : FI_PROGRESS_UNSPEC);
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = rdm && hd ? hd->av_type : FI_AV_UNSPEC;
  d->mr_mode = mr_mode;
  d->mr_key_size = kKeySize;
  d->cq_data_size = cq_data_size;
  d->cq_cnt = kCqCnt;
  d->cntr_cnt = kCntrCnt;
  d->ep_cnt = kEpCnt;
  d->tx_ctx_cnt = 1;
  d->rx_ctx_cnt = 1;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->mr_iov_limit = 1;
  d->mr_cnt = kMrCnt;
  d->caps = kSecondaryCaps;
  d->max_err_data = max_cm_data();

  fi_fabric_attr* f = info->fabric_attr;
  f->name = strdup("softrdma");
  f->prov_version = g_prov.version;

  fi_ep_attr* e = info->ep_attr;
  e->type = rdm ? FI_EP_RDM : FI_EP_MSG;
  e->protocol = FI_PROTO_IWARP;
  e->protocol_version = 1;
  e->max_msg_size = kMaxMsg;
  // fi_endpoint(3)'s generic format: all 64 bits are matched.
  e->mem_tag_format = (caps & FI_TAGGED) ? 0xaaaaaaaaaaaaaaaaULL : 0;
  e->msg_prefix_size = 0;
  e->max_order_raw_size = kMaxMsg;
  e->max_order_war_size = kMaxMsg;
  e->max_order_waw_size = kMaxMsg;
  e->tx_ctx_cnt = 1;
  e->rx_ctx_cnt = 1;

  // Sizes and limits: the hinted value (a minimum we meet) or our default.
  fi_tx_attr* t = info->tx_attr;
  t->caps = context_caps(caps, kTxCaps, ht ? ht->caps : 0);
  t->mode = info->mode;
  t->op_flags = ht ? ht->op_flags : 0;
  t->msg_order = kMsgOrder;
  t->comp_order = FI_ORDER_NONE;
  t->inject_size = hinted(ht ? ht->inject_size : 0, inject_size);
  t->size = hinted(ht ? ht->size : 0, std::min(static_cast<size_t>(settings::get_int(settings::Id::kTxSize)), kMaxQueue));
  t->iov_limit = hinted(ht ? ht->iov_limit : 0, kMaxIov);
  t->rma_iov_limit = 1;

  fi_rx_attr* r = info->rx_attr;
  r->caps = context_caps(caps, kRxCaps, hr ? hr->caps : 0);
  r->mode = info->mode;
  r->op_flags = hr ? hr->op_flags : 0;
  r->msg_order = kMsgOrder;
  r->comp_order = FI_ORDER_NONE;
  r->total_buffered_recv = static_cast<size_t>(settings::get_int(settings::Id::kUnexpectedBytes));
  r->size = hinted(hr ? hr->size : 0, std::min(static_cast<size_t>(settings::get_int(settings::Id::kRxSize)), kMaxQueue));
  r->iov_limit = hinted(hr ? hr->iov_limit : 0, kMaxIov);
  return true;
}

}  // namespace

sockaddr_in local_addr() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (settings::is_set(settings::Id::kAddr)) a.sin_addr = settings::get_ipv4(settings::Id::kAddr).addr;
  return a;
}

size_t max_cm_data() { return Engine::kMaxPrivateData; }

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** out) {
  if (!check_settings()) return -FI_EINVAL;  // fi_info shows why, not an empty list
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
  // fi_getinfo(3): a passive endpoint named in the hints is handed back.
  if (hints && hints->handle && hints->handle->fclass == FI_CLASS_PEP) info->handle = hints->handle;
  *out = info;
  return 0;
}

}  // namespace softrdma::prov
