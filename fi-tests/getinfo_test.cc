// fi_getinfo against softrdma: what it offers with no hints, and how it
// matches good and bad hints (fi_getinfo(3), fi_domain(3), fi_endpoint(3)).
#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <vector>

#include "fi-tests/fi_test.h"

namespace fit {
namespace {

constexpr uint64_t kBasicMap = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

int count(const Info& list) {
  int n = 0;
  for (fi_info* i = list.get(); i; i = i->next) ++n;
  return n;
}

// An unsatisfiable query fails with -FI_ENODATA and returns no list.
void expect_nodata(const fi_info* hints, uint32_t version = kVersion) {
  fi_info* list = reinterpret_cast<fi_info*>(0x1);
  int rc = fi_getinfo(version, nullptr, nullptr, 0, hints, &list);
  EXPECT_EQ(rc, -FI_ENODATA) << fi_strerror(-rc);
  if (rc == 0) fi_freeinfo(list);
}

Info expect_match(const fi_info* hints, uint32_t version = kVersion) {
  Info list;
  int rc = getinfo(hints, &list, nullptr, nullptr, 0, version);
  EXPECT_EQ(rc, 0) << fi_strerror(-rc);
  return list;
}

TEST(Getinfo, NoHintsListsMsgAndRxm) {
  Info list;
  ASSERT_EQ(getinfo(nullptr, &list), 0);  // FI_PROVIDER=softrdma filters the rest
  bool msg = false, rdm = false;
  for (fi_info* i = list.get(); i; i = i->next) {
    std::string prov = i->fabric_attr->prov_name;
    EXPECT_EQ(prov.rfind(kProv, 0), 0u) << prov;
    if (prov == kProv) {
      msg = true;
      EXPECT_EQ(i->ep_attr->type, FI_EP_MSG);
      EXPECT_EQ(i->ep_attr->protocol, static_cast<uint32_t>(FI_PROTO_IWARP));
      EXPECT_EQ(i->caps & (FI_MSG | FI_RMA), FI_MSG | FI_RMA);
      EXPECT_EQ(i->addr_format, static_cast<uint32_t>(FI_SOCKADDR_IN));
      ASSERT_EQ(i->src_addrlen, sizeof(sockaddr_in));
      auto* src = static_cast<sockaddr_in*>(i->src_addr);
      EXPECT_EQ(src->sin_family, AF_INET);
      EXPECT_NE(src->sin_addr.s_addr, htonl(INADDR_ANY));
      EXPECT_STREQ(i->fabric_attr->name, "softrdma");
      ASSERT_NE(i->domain_attr->name, nullptr);
      EXPECT_GE(i->ep_attr->max_msg_size, 1u << 30);
      EXPECT_GT(i->tx_attr->inject_size, 64u);  // rxm's header fits in an inject
      EXPECT_GE(i->tx_attr->iov_limit, 2u);
      EXPECT_EQ(i->domain_attr->mr_mode & FI_MR_LOCAL, 0);
      EXPECT_EQ(i->mode, 0u);  // no hints: nothing the app did not offer
    } else if (prov == kRxmProv) {
      rdm = true;
      EXPECT_EQ(i->ep_attr->type, FI_EP_RDM);
    }
  }
  EXPECT_TRUE(msg);
  EXPECT_TRUE(rdm);
}

// The plain "softrdma" entries of a list (rxm's "softrdma;ofi_rxm" ones
// pass the framework's provider-name filter too).
std::vector<fi_info*> core_entries(const Info& list) {
  std::vector<fi_info*> v;
  for (fi_info* i = list.get(); i; i = i->next)
    if (std::string(i->fabric_attr->prov_name) == kProv) v.push_back(i);
  return v;
}

TEST(Getinfo, EndpointTypes) {
  Info h = msg_hints();
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  for (fi_info* i = list.get(); i; i = i->next) {
    EXPECT_EQ(i->ep_attr->type, FI_EP_MSG);
    EXPECT_STREQ(i->fabric_attr->prov_name, kProv);
  }
  for (fi_ep_type t : {FI_EP_DGRAM, FI_EP_SOCK_STREAM, FI_EP_SOCK_DGRAM}) {
    h->ep_attr->type = t;
    expect_nodata(h.get());
  }
  // FI_EP_RDM: softrdma's own endpoint, and rxm's layered entries.
  h->ep_attr->type = FI_EP_RDM;
  h->mode = FI_CONTEXT;
  list = expect_match(h.get());
  ASSERT_TRUE(list);
  ASSERT_EQ(core_entries(list).size(), 1u);
  EXPECT_EQ(core_entries(list)[0]->ep_attr->type, FI_EP_RDM);
  bool rxm = false;
  for (fi_info* i = list.get(); i; i = i->next)
    rxm |= std::strcmp(i->fabric_attr->prov_name, kRxmProv) == 0;
  EXPECT_TRUE(rxm);
  h->ep_attr->type = FI_EP_UNSPEC;
  list = expect_match(h.get());
  ASSERT_FALSE(core_entries(list).empty());
  for (fi_info* i : core_entries(list)) EXPECT_EQ(i->ep_attr->type, FI_EP_MSG);
  // Asked for by its full name, rxm over softrdma gives FI_EP_RDM.
  Info r = rdm_hints();
  list = expect_match(r.get());
  ASSERT_TRUE(list);
  EXPECT_STREQ(list->fabric_attr->prov_name, kRxmProv);
  EXPECT_EQ(list->ep_attr->type, FI_EP_RDM);
  EXPECT_TRUE(list->caps & FI_TAGGED);
}

TEST(Getinfo, Protocol) {
  Info h = msg_hints();
  h->ep_attr->protocol = FI_PROTO_IWARP;
  EXPECT_TRUE(expect_match(h.get()));
  h->ep_attr->protocol = FI_PROTO_SOCK_TCP;
  expect_nodata(h.get());
  h->ep_attr->protocol = FI_PROTO_IWARP;
  h->ep_attr->protocol_version = 200;
  expect_nodata(h.get());
}

TEST(Getinfo, Capabilities) {
  for (uint64_t caps : {FI_MSG, FI_RMA, FI_ATOMIC, FI_MSG | FI_RMA | FI_ATOMIC,
                        FI_MSG | FI_SEND | FI_RECV, FI_RMA | FI_READ | FI_REMOTE_WRITE}) {
    Info h = msg_hints(caps);
    Info list = expect_match(h.get());
    ASSERT_TRUE(list) << std::hex << caps;
    for (fi_info* i = list.get(); i; i = i->next) {
      EXPECT_EQ(i->caps & caps, caps) << std::hex << caps;
      // Primary capabilities nobody asked for are not handed out.
      EXPECT_EQ(i->caps & (FI_MSG | FI_RMA | FI_ATOMIC | FI_TAGGED) & ~caps, 0u)
          << std::hex << i->caps;
    }
  }
  for (uint64_t caps :
       {FI_TAGGED, FI_MSG | FI_TAGGED, FI_MULTICAST, FI_MSG | FI_DIRECTED_RECV, FI_MSG | FI_SOURCE,
        FI_COLLECTIVE, FI_MSG | FI_NAMED_RX_CTX, FI_MSG | FI_HMEM, FI_MSG | FI_TRIGGER}) {
    Info h = msg_hints(caps);
    expect_nodata(h.get());
  }
}

TEST(Getinfo, ModeBits) {
  // No mode bits offered: none may be required.
  Info h = msg_hints(FI_MSG | FI_RMA);
  h->mode = 0;
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->mode, 0u);
  EXPECT_EQ(list->tx_attr->mode, 0u);
  EXPECT_EQ(list->rx_attr->mode, 0u);
  EXPECT_EQ(list->ep_attr->msg_prefix_size, 0u);
  // Everything offered: what comes back is a subset, and no prefix is used.
  h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX | FI_ASYNC_IOV | FI_RX_CQ_DATA | FI_LOCAL_MR;
  list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->mode & ~h->mode, 0u);
  EXPECT_EQ(list->mode & FI_MSG_PREFIX, 0u);
  EXPECT_EQ(list->ep_attr->msg_prefix_size, 0u);
  // rxm's fabric lookup: every mode bit set.
  h->mode = ~0ULL;
  EXPECT_TRUE(expect_match(h.get()));
}

TEST(Getinfo, RemoteCqDataNeedsRxCqDataMode) {
  Info h = msg_hints(FI_MSG | FI_RMA);
  h->domain_attr->cq_data_size = 8;
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->domain_attr->cq_data_size, 8u);
  EXPECT_TRUE(list->mode & FI_RX_CQ_DATA);
  h->domain_attr->cq_data_size = 9;
  expect_nodata(h.get());
  // RFC 7306 Immediate Data consumes a receive: without FI_RX_CQ_DATA mode
  // there is no remote CQ data.
  h->mode = FI_CONTEXT;
  h->domain_attr->cq_data_size = 4;
  expect_nodata(h.get());
  h->domain_attr->cq_data_size = 0;
  list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->domain_attr->cq_data_size, 0u);
  EXPECT_EQ(list->mode & FI_RX_CQ_DATA, 0u);
}

TEST(Getinfo, MrModeBits) {
  // The modes an RMA target needs must all be offered.
  Info h = msg_hints(FI_MSG | FI_RMA);
  h->domain_attr->mr_mode = kBasicMap | FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_RAW;
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->domain_attr->mr_mode & ~h->domain_attr->mr_mode, 0);
  EXPECT_EQ(list->domain_attr->mr_mode & kBasicMap, static_cast<int>(kBasicMap));
  for (int missing : {FI_MR_VIRT_ADDR, FI_MR_ALLOCATED, FI_MR_PROV_KEY}) {
    h->domain_attr->mr_mode = static_cast<int>(kBasicMap & ~missing);
    expect_nodata(h.get());
  }
  // Without RMA or atomics keys never leave the process: any mode will do.
  h = msg_hints(FI_MSG);
  h->domain_attr->mr_mode = 0;
  list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->domain_attr->mr_mode, 0);
  EXPECT_EQ(list->caps & (FI_RMA | FI_ATOMIC), 0u);
}

TEST(Getinfo, MrModeUnspec) {
  // API >= 1.5: FI_MR_UNSPEC offers no mode bit, so RMA cannot be had ...
  Info h = msg_hints(FI_MSG | FI_RMA);
  h->domain_attr->mr_mode = FI_MR_UNSPEC;
  expect_nodata(h.get());
  // ... but an application that names no caps still gets messaging.
  h->caps = 0;
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->caps & FI_MSG);
  EXPECT_EQ(list->caps & (FI_RMA | FI_ATOMIC), 0u);
  // API < 1.5: FI_MR_UNSPEC lets the provider choose, reported as FI_MR_BASIC.
  h->caps = FI_MSG | FI_RMA;
  list = expect_match(h.get(), FI_VERSION(1, 4));
  ASSERT_TRUE(list);
  EXPECT_EQ(list->domain_attr->mr_mode, FI_MR_BASIC);
  EXPECT_TRUE(list->caps & FI_RMA);
}

TEST(Getinfo, MrModeBasicAndScalable) {
  // FI_MR_BASIC is the old name of VIRT_ADDR|ALLOCATED|PROV_KEY, and is
  // answered in the same terms (fi_domain(3) "Compatibility").
  for (uint32_t version : {uint32_t{FI_VERSION(1, 4)}, kVersion}) {
    Info h = msg_hints(FI_MSG | FI_RMA);
    h->domain_attr->mr_mode = FI_MR_BASIC;
    Info list = expect_match(h.get(), version);
    ASSERT_TRUE(list);
    EXPECT_EQ(list->domain_attr->mr_mode, FI_MR_BASIC);
    EXPECT_TRUE(list->caps & FI_RMA);
    // Keys chosen by the application at any address: not for an iWARP STag.
    h->domain_attr->mr_mode = FI_MR_SCALABLE;
    expect_nodata(h.get(), version);
  }
}

TEST(Getinfo, AddressFormats) {
  Info h = msg_hints();
  for (uint32_t f : {FI_FORMAT_UNSPEC, FI_SOCKADDR, FI_SOCKADDR_IN}) {
    h->addr_format = f;
    Info list = expect_match(h.get());
    ASSERT_TRUE(list);
    EXPECT_TRUE(list->addr_format == FI_SOCKADDR_IN || list->addr_format == FI_SOCKADDR);
    EXPECT_EQ(list->src_addrlen, sizeof(sockaddr_in));
  }
  for (uint32_t f : {FI_SOCKADDR_IN6, FI_SOCKADDR_IB, FI_ADDR_PSMX, FI_ADDR_STR, FI_ADDR_EFA}) {
    h->addr_format = f;
    expect_nodata(h.get());
  }
}

TEST(Getinfo, NodeServiceAndAddresses) {
  Info h = msg_hints();
  Info list;
  ASSERT_EQ(getinfo(h.get(), &list, "127.0.0.1", "4791"), 0);
  ASSERT_EQ(list->dest_addrlen, sizeof(sockaddr_in));
  auto* d = static_cast<sockaddr_in*>(list->dest_addr);
  EXPECT_EQ(d->sin_port, htons(4791));
  EXPECT_EQ(d->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  // FI_SOURCE: node/service name the local address.
  ASSERT_EQ(getinfo(h.get(), &list, "127.0.0.1", "4792", FI_SOURCE), 0);
  auto* s = static_cast<sockaddr_in*>(list->src_addr);
  EXPECT_EQ(s->sin_port, htons(4792));
  EXPECT_EQ(list->dest_addr, nullptr);
  // Addresses in the hints are echoed.
  sockaddr_in dst = loopback(5555);
  h->dest_addr = std::malloc(sizeof(dst));
  std::memcpy(h->dest_addr, &dst, sizeof(dst));
  h->dest_addrlen = sizeof(dst);
  ASSERT_EQ(getinfo(h.get(), &list), 0);
  ASSERT_EQ(list->dest_addrlen, sizeof(sockaddr_in));
  EXPECT_EQ(std::memcmp(list->dest_addr, &dst, sizeof(dst)), 0);
  // An IPv6 destination cannot be reached.
  sockaddr_in6 six{};
  six.sin6_family = AF_INET6;
  std::free(h->dest_addr);
  h->dest_addr = std::malloc(sizeof(six));
  std::memcpy(h->dest_addr, &six, sizeof(six));
  h->dest_addrlen = sizeof(six);
  h->addr_format = FI_FORMAT_UNSPEC;
  expect_nodata(h.get());
  // A service that is not a port.
  Info h2 = msg_hints();
  EXPECT_NE(getinfo(h2.get(), &list, "127.0.0.1", "no-such-service-xyz"), 0);
}

TEST(Getinfo, QueueSizes) {
  Info h = msg_hints();
  h->tx_attr->size = 128;
  h->rx_attr->size = 128;
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->tx_attr->size, 128u);  // rxm posts exactly this many
  EXPECT_EQ(list->rx_attr->size, 128u);
  // A minimum the provider cannot give is a mismatch, not a silent clamp.
  h->tx_attr->size = size_t{1} << 40;
  expect_nodata(h.get());
  h->tx_attr->size = 0;
  h->rx_attr->size = size_t{1} << 40;
  expect_nodata(h.get());
}

TEST(Getinfo, LimitsAndSizes) {
  Info base = expect_match(msg_hints().get());
  ASSERT_TRUE(base);
  struct Case {
    const char* what;
    std::function<void(fi_info*)> set;
  };
  const Case too_big[] = {
      {"inject_size",
       [&](fi_info* h) { h->tx_attr->inject_size = base->tx_attr->inject_size + 1; }},
      {"tx iov_limit", [&](fi_info* h) { h->tx_attr->iov_limit = base->tx_attr->iov_limit + 1; }},
      {"rx iov_limit", [&](fi_info* h) { h->rx_attr->iov_limit = base->rx_attr->iov_limit + 1; }},
      {"rma_iov_limit",
       [&](fi_info* h) { h->tx_attr->rma_iov_limit = base->tx_attr->rma_iov_limit + 1; }},
      {"max_msg_size",
       [&](fi_info* h) { h->ep_attr->max_msg_size = base->ep_attr->max_msg_size + 1; }},
      {"mr_iov_limit",
       [&](fi_info* h) { h->domain_attr->mr_iov_limit = base->domain_attr->mr_iov_limit + 1; }},
      {"tx_ctx_cnt", [&](fi_info* h) { h->ep_attr->tx_ctx_cnt = 2; }},
      {"rx_ctx_cnt", [&](fi_info* h) { h->ep_attr->rx_ctx_cnt = 2; }},
      {"shared rx context", [&](fi_info* h) { h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT; }},
      {"msg_order", [&](fi_info* h) { h->tx_attr->msg_order = ~0ULL; }},
      {"total_buffered_recv", [&](fi_info* h) { h->rx_attr->total_buffered_recv = 1 << 20; }},
      {"rx op_flags", [&](fi_info* h) { h->rx_attr->op_flags = FI_MULTI_RECV; }},
      {"auth_key_size", [&](fi_info* h) { h->ep_attr->auth_key_size = 16; }},
  };
  for (const Case& c : too_big) {
    Info h = msg_hints();
    c.set(h.get());
    SCOPED_TRACE(c.what);
    expect_nodata(h.get());
  }
  const Case fits[] = {
      {"inject_size", [&](fi_info* h) { h->tx_attr->inject_size = base->tx_attr->inject_size; }},
      {"iov_limit", [&](fi_info* h) { h->tx_attr->iov_limit = h->rx_attr->iov_limit = 2; }},
      {"max_msg_size", [&](fi_info* h) { h->ep_attr->max_msg_size = 1 << 26; }},
      {"total_buffered_recv (FI_SOFTRDMA_UNEXPECTED_BYTES, 256k)",
       [&](fi_info* h) { h->rx_attr->total_buffered_recv = 256 << 10; }},
      {"msg_order SAS",
       [&](fi_info* h) { h->tx_attr->msg_order = h->rx_attr->msg_order = FI_ORDER_SAS; }},
      {"tx op_flags",
       [&](fi_info* h) { h->tx_attr->op_flags = FI_COMPLETION | FI_TRANSMIT_COMPLETE; }},
      {"rx op_flags", [&](fi_info* h) { h->rx_attr->op_flags = FI_COMPLETION; }},
      {"mr_key_size", [&](fi_info* h) { h->domain_attr->mr_key_size = 8; }},
  };
  for (const Case& c : fits) {
    Info h = msg_hints();
    c.set(h.get());
    SCOPED_TRACE(c.what);
    EXPECT_TRUE(expect_match(h.get()));
  }
}

TEST(Getinfo, ThreadingLevels) {
  for (fi_threading t : {FI_THREAD_UNSPEC, FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_DOMAIN,
                         FI_THREAD_COMPLETION, FI_THREAD_ENDPOINT}) {
    Info h = msg_hints();
    h->domain_attr->threading = t;
    Info list = expect_match(h.get());
    ASSERT_TRUE(list) << t;
    if (t != FI_THREAD_UNSPEC) {
      EXPECT_EQ(list->domain_attr->threading, t);
    } else {
      EXPECT_NE(list->domain_attr->threading, FI_THREAD_UNSPEC);
    }
  }
  Info h = msg_hints();
  h->domain_attr->threading = static_cast<fi_threading>(77);
  expect_nodata(h.get());
}

TEST(Getinfo, ProgressModels) {
  for (fi_progress p : {FI_PROGRESS_UNSPEC, FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO}) {
    Info h = msg_hints();
    h->domain_attr->control_progress = p;
    h->domain_attr->data_progress = p;
    Info list = expect_match(h.get());
    ASSERT_TRUE(list) << p;
    if (p != FI_PROGRESS_UNSPEC) {
      EXPECT_EQ(list->domain_attr->control_progress, p);
      EXPECT_EQ(list->domain_attr->data_progress, p);
    } else {
      EXPECT_NE(list->domain_attr->data_progress, FI_PROGRESS_UNSPEC);
    }
  }
  Info h = msg_hints();
  h->domain_attr->data_progress = static_cast<fi_progress>(9);
  expect_nodata(h.get());
}

TEST(Getinfo, ResourceManagement) {
  Info h = msg_hints();
  h->domain_attr->resource_mgmt = FI_RM_DISABLED;
  EXPECT_TRUE(expect_match(h.get()));
  h->domain_attr->resource_mgmt = FI_RM_ENABLED;
  EXPECT_TRUE(expect_match(h.get()));
}

TEST(Getinfo, NamesAndProvider) {
  Info h = msg_hints();
  h->fabric_attr->name = strdup("softrdma");
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  h->domain_attr->name = strdup(list->domain_attr->name);
  EXPECT_TRUE(expect_match(h.get()));
  std::free(h->domain_attr->name);
  h->domain_attr->name = strdup("mlx5_0");
  expect_nodata(h.get());
  std::free(h->fabric_attr->name);
  h->fabric_attr->name = strdup("IB-0xfe80");
  expect_nodata(h.get());
  // The framework's provider name filter.
  Info h2 = msg_hints();
  std::free(h2->fabric_attr->prov_name);
  h2->fabric_attr->prov_name = strdup("verbs");
  expect_nodata(h2.get());
}

// The bits fi_getinfo(3), fi_endpoint(3) and fi_domain(3) allow where.
constexpr uint64_t kPrimary = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST |
                              FI_NAMED_RX_CTX | FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_HMEM |
                              FI_COLLECTIVE;
constexpr uint64_t kModifiers =
    FI_READ | FI_WRITE | FI_RECV | FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr uint64_t kSecondary = FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SHARED_AV |
                                FI_TRIGGER | FI_FENCE | FI_LOCAL_COMM | FI_REMOTE_COMM |
                                FI_SOURCE_ERR | FI_RMA_PMEM;
constexpr uint64_t kTxAllowed = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_READ | FI_WRITE |
                                FI_SEND | FI_HMEM | FI_TRIGGER | FI_FENCE | FI_MULTICAST |
                                FI_RMA_PMEM | FI_NAMED_RX_CTX | FI_COLLECTIVE;
constexpr uint64_t kRxAllowed = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_REMOTE_READ |
                                FI_REMOTE_WRITE | FI_RECV | FI_HMEM | FI_TRIGGER | FI_RMA_PMEM |
                                FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_MULTI_RECV | FI_SOURCE |
                                FI_RMA_EVENT | FI_SOURCE_ERR | FI_COLLECTIVE;
constexpr uint64_t kDomainAllowed = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV | FI_AV_USER_ID;

// Every rule of fi_getinfo(3) a returned softrdma info can be held to, for
// these hints (null: none).
void expect_lawful(const fi_info* h, const fi_info* i) {
  const uint64_t hcaps = h ? h->caps : 0;
  // Capability bits only (FI_REMOTE_CQ_DATA if the application put it there).
  EXPECT_EQ(i->caps & ~(kPrimary | kModifiers | kSecondary | (hcaps & FI_REMOTE_CQ_DATA)), 0u)
      << std::hex << i->caps;
  if (hcaps) {
    // Primary capabilities: those asked for and no others; modifiers: the
    // ones asked for, or all of a kind when none of it was named.
    EXPECT_EQ(i->caps & kPrimary, hcaps & kPrimary) << std::hex << i->caps;
    if (hcaps & (FI_SEND | FI_RECV)) {
      EXPECT_EQ(i->caps & (FI_SEND | FI_RECV), hcaps & (FI_SEND | FI_RECV)) << std::hex << i->caps;
    }
    const uint64_t rma_mods = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    if (hcaps & rma_mods) {
      EXPECT_EQ(i->caps & rma_mods, hcaps & rma_mods) << std::hex << i->caps;
    }
    // Secondary ones asked for are there.
    EXPECT_EQ(i->caps & hcaps & kSecondary, hcaps & kSecondary) << std::hex << i->caps;
  } else {
    // No caps hinted: everything supported, atomics included.
    EXPECT_EQ(i->caps & (FI_MSG | FI_RMA | FI_ATOMIC), FI_MSG | FI_RMA | FI_ATOMIC)
        << std::hex << i->caps;
  }
  // FI_READ & co. need FI_RMA or FI_ATOMIC.
  if (!(i->caps & (FI_RMA | FI_ATOMIC))) {
    EXPECT_EQ(i->caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE), 0u);
  }
  // Context caps: the ones each context may hold, of the endpoint's.
  EXPECT_EQ(i->tx_attr->caps & ~kTxAllowed, 0u) << std::hex << i->tx_attr->caps;
  EXPECT_EQ(i->rx_attr->caps & ~kRxAllowed, 0u) << std::hex << i->rx_attr->caps;
  EXPECT_EQ(i->tx_attr->caps & ~i->caps, 0u) << std::hex << i->tx_attr->caps;
  EXPECT_EQ(i->rx_attr->caps & ~i->caps, 0u) << std::hex << i->rx_attr->caps;
  EXPECT_EQ(i->domain_attr->caps & ~kDomainAllowed, 0u) << std::hex << i->domain_attr->caps;
  // Unless narrowed by hints of their own, the contexts get the endpoint's.
  if ((i->caps & FI_MSG) && (i->caps & FI_SEND) && !(h && h->tx_attr && h->tx_attr->caps)) {
    EXPECT_TRUE(i->tx_attr->caps & FI_SEND);
  }
  if ((i->caps & FI_MSG) && (i->caps & FI_RECV) && !(h && h->rx_attr && h->rx_attr->caps)) {
    EXPECT_TRUE(i->rx_attr->caps & FI_RECV);
  }
  // Mode bits: a subset of those offered, the contexts' of the info's.
  if (h) {
    EXPECT_EQ(i->mode & ~h->mode, 0u);
  }
  EXPECT_EQ(i->tx_attr->mode & ~i->mode, 0u);
  EXPECT_EQ(i->rx_attr->mode & ~i->mode, 0u);
  // A counter-backed domain says how many counters it takes.
  EXPECT_GT(i->domain_attr->cntr_cnt, 0u);
  if (!h) return;
  // Output values are at least the requested ones.
  if (const fi_tx_attr* ht = h->tx_attr) {
    EXPECT_GE(i->tx_attr->size, ht->size);
    EXPECT_GE(i->tx_attr->iov_limit, ht->iov_limit);
    EXPECT_GE(i->tx_attr->inject_size, ht->inject_size);
    EXPECT_GE(i->tx_attr->rma_iov_limit, ht->rma_iov_limit);
    EXPECT_EQ(ht->msg_order & ~i->tx_attr->msg_order, 0u);
    if (ht->caps) {
      EXPECT_EQ(i->tx_attr->caps & kPrimary & ~ht->caps, 0u) << std::hex << i->tx_attr->caps;
    }
  }
  if (const fi_rx_attr* hr = h->rx_attr) {
    EXPECT_GE(i->rx_attr->size, hr->size);
    EXPECT_GE(i->rx_attr->iov_limit, hr->iov_limit);
    EXPECT_EQ(hr->msg_order & ~i->rx_attr->msg_order, 0u);
    if (hr->caps) {
      EXPECT_EQ(i->rx_attr->caps & kPrimary & ~hr->caps, 0u) << std::hex << i->rx_attr->caps;
    }
  }
  if (const fi_domain_attr* hd = h->domain_attr) {
    EXPECT_GE(i->domain_attr->cq_cnt, hd->cq_cnt);
    EXPECT_GE(i->domain_attr->cntr_cnt, hd->cntr_cnt);
    EXPECT_GE(i->domain_attr->ep_cnt, hd->ep_cnt);
    EXPECT_GE(i->domain_attr->mr_cnt, hd->mr_cnt);
    EXPECT_GE(i->domain_attr->cq_data_size, hd->cq_data_size);
    EXPECT_GE(i->domain_attr->max_err_data, hd->max_err_data);
  }
  if (const fi_ep_attr* he = h->ep_attr) {
    EXPECT_GE(i->ep_attr->max_msg_size, he->max_msg_size);
  }
}

TEST(Getinfo, AttributesFollowTheRules) {
  {
    SCOPED_TRACE("no hints");
    Info list = expect_match(nullptr);
    ASSERT_TRUE(list);
    for (fi_info* i = list.get(); i; i = i->next) {
      if (std::string(i->fabric_attr->prov_name) == kProv) expect_lawful(nullptr, i);
    }
  }
  std::vector<Info> cases;
  for (uint64_t caps : {0ULL, FI_MSG, FI_MSG | FI_SEND, FI_MSG | FI_RECV, FI_RMA,
                        FI_RMA | FI_READ | FI_REMOTE_WRITE, FI_MSG | FI_RMA | FI_ATOMIC,
                        FI_MSG | FI_LOCAL_COMM, FI_MSG | FI_RMA | FI_REMOTE_COMM,
                        FI_MSG | FI_RMA | FI_REMOTE_CQ_DATA})
    cases.push_back(msg_hints(caps));
  // Context caps and sizes asked for.
  Info h = msg_hints(FI_MSG | FI_RMA);
  h->tx_attr->caps = FI_MSG;
  h->rx_attr->caps = FI_RMA;
  h->tx_attr->size = 1000;
  h->rx_attr->size = 2000;
  h->tx_attr->iov_limit = 2;
  h->tx_attr->inject_size = 100;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->domain_attr->cq_cnt = 10;
  h->domain_attr->cntr_cnt = 10;
  h->domain_attr->ep_cnt = 100;
  h->domain_attr->mr_cnt = 1000;
  h->ep_attr->max_msg_size = 1u << 20;
  cases.push_back(std::move(h));
  for (const Info& c : cases) {
    SCOPED_TRACE(std::to_string(c->caps));
    Info list = expect_match(c.get());
    ASSERT_TRUE(list);
    for (fi_info* i = list.get(); i; i = i->next) expect_lawful(c.get(), i);
  }
}

TEST(Getinfo, NoRmaEvent) {
  // Remote accesses are not reported, so counters cannot count them: a
  // request for FI_RMA_EVENT, a secondary capability, must fail.
  expect_nodata(msg_hints(FI_MSG | FI_RMA | FI_RMA_EVENT).get());
  Info h = msg_hints(FI_MSG | FI_RMA);
  h->rx_attr->caps = FI_RMA | FI_RMA_EVENT;
  expect_nodata(h.get());
  Info list = expect_match(msg_hints(FI_MSG | FI_RMA).get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->caps & FI_RMA_EVENT, 0u);
  EXPECT_EQ(list->rx_attr->caps & FI_RMA_EVENT, 0u);
}

TEST(Getinfo, CountsAndContextsBeyondOursDoNotMatch) {
  Info base = expect_match(msg_hints().get());
  ASSERT_TRUE(base);
  const fi_domain_attr& d = *base->domain_attr;
  for (int field = 0; field < 7; ++field) {
    SCOPED_TRACE(field);
    Info h = msg_hints();
    fi_domain_attr& hd = *h->domain_attr;
    switch (field) {
      case 0: hd.cq_cnt = d.cq_cnt + 1; break;
      case 1: hd.cntr_cnt = d.cntr_cnt + 1; break;
      case 2: hd.ep_cnt = d.ep_cnt + 1; break;
      case 3: hd.mr_cnt = d.mr_cnt + 1; break;
      case 4: hd.max_ep_tx_ctx = 2; break;
      case 5: hd.max_ep_stx_ctx = 1; break;
      case 6: hd.max_ep_srx_ctx = 1; break;
    }
    expect_nodata(h.get());
  }
}

TEST(Getinfo, PassiveEndpointHandleIsHandedBack) {
  Fabric f;
  f.listen();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  Info h = msg_hints();
  h->handle = &f.pep()->fid;
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_EQ(list->handle, &f.pep()->fid);
  h->handle = nullptr;  // not the hints' to free
}

TEST(Getinfo, UnknownFlagBitsAreIgnored) {
  Info h = msg_hints();
  Info list;
  ASSERT_EQ(getinfo(h.get(), &list, nullptr, nullptr, 1ULL << 50), 0);
  EXPECT_TRUE(list);
}

TEST(Getinfo, NullSubStructures) {
  // rxm's fabric lookup passes only fabric_attr; others pass less.
  for (int drop = 0; drop < 5; ++drop) {
    Info h = msg_hints(FI_MSG);
    fi_info* i = h.get();
    switch (drop) {
      case 0:
        std::free(i->ep_attr), i->ep_attr = nullptr;
        break;
      case 1:
        std::free(i->domain_attr), i->domain_attr = nullptr;
        break;
      case 2:
        std::free(i->tx_attr), i->tx_attr = nullptr;
        break;
      case 3:
        std::free(i->rx_attr), i->rx_attr = nullptr;
        break;
      case 4:
        std::free(i->ep_attr), i->ep_attr = nullptr;
        std::free(i->domain_attr), i->domain_attr = nullptr;
        std::free(i->tx_attr), i->tx_attr = nullptr;
        std::free(i->rx_attr), i->rx_attr = nullptr;
        i->mode = ~0ULL;
        i->caps = 0;
        break;
    }
    SCOPED_TRACE(drop);
    Info list = expect_match(h.get());
    ASSERT_TRUE(list);
    for (fi_info* r = list.get(); r; r = r->next) {
      ASSERT_NE(r->ep_attr, nullptr);
      ASSERT_NE(r->domain_attr, nullptr);
      ASSERT_NE(r->tx_attr, nullptr);
      ASSERT_NE(r->rx_attr, nullptr);
      EXPECT_NE(r->domain_attr->name, nullptr);
    }
  }
}

TEST(Getinfo, ResultsAreDeterministic) {
  // rxm re-queries with its own info and opens the first result.
  Info h = msg_hints();
  Info a = expect_match(h.get()), b = expect_match(h.get());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(count(a), count(b));
  EXPECT_EQ(a->caps, b->caps);
  EXPECT_STREQ(a->domain_attr->name, b->domain_attr->name);
  // The returned info, used as hints, matches itself.
  Info again = expect_match(a.get());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->caps, a->caps);
  EXPECT_EQ(again->mode, a->mode);
  EXPECT_EQ(again->domain_attr->mr_mode, a->domain_attr->mr_mode);
}

TEST(Getinfo, RxmOverSoftrdma) {
  Info h = rdm_hints(FI_TAGGED | FI_MSG | FI_RMA);
  Info list = expect_match(h.get());
  ASSERT_TRUE(list);
  EXPECT_STREQ(list->fabric_attr->prov_name, kRxmProv);
  EXPECT_GE(list->ep_attr->max_msg_size, 1u << 30);
  EXPECT_GE(list->domain_attr->cq_data_size, 4u);  // OMPI's full tag mode needs it
  h = rdm_hints();
  h->ep_attr->type = FI_EP_DGRAM;
  expect_nodata(h.get());
}

}  // namespace
}  // namespace fit
