// Time to the first message and memory per endpoint of a libfabric
// FI_EP_RDM provider: two processes on this machine, each opening fabric,
// domain, CQ and AV, then an endpoint, twice. For each pair of endpoints
// the child posts a receive and hands its name over a pipe; the parent
// inserts it and sends 8 bytes. Printed per round (one line, key=value):
// first_ms, from the parent's fi_send to the child's receive completion
// (CLOCK_MONOTONIC, which both share), connection set-up included; and
// each side's resident memory added by opening, enabling and using its
// endpoint (kB, from /proc/self/statm), the sender's and the receiver's.
// The first round also pays for what two processes set up once between
// them (softrdma's DPDK mesh: a memif link); the second is the endpoint's
// own cost.
//
// usage: rdm_first_message <provider name>   (FI_PROVIDER_PATH etc. from the
// environment; "softrdma" with FI_PROVIDER=^ofi_rxm is softrdma's own)
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

[[noreturn]] void die(const char* what, int rc) {
  std::fprintf(stderr, "rdm_first_message: %s: %s\n", what, fi_strerror(-rc));
  std::exit(1);
}

void check(int rc, const char* what) {
  if (rc != 0) die(what, rc);
}

double now_ms() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

long rss_kb() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f || std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  if (f) std::fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct Side {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  long rss_before = 0;  // before the newest endpoint and its CQ and AV
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;

  explicit Side(const char* prov) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED | FI_MSG;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL;
    hints->fabric_attr->prov_name = strdup(prov);
    check(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), "fi_getinfo");
    fi_freeinfo(hints);
    check(fi_fabric(info->fabric_attr, &fabric, nullptr), "fi_fabric");
    check(fi_domain(fabric, info, &domain, nullptr), "fi_domain");
  }
  // A new endpoint with its own CQ and AV (the previous one stays open).
  void open_ep() {
    rss_before = rss_kb();
    fi_cq_attr ca{};
    ca.format = FI_CQ_FORMAT_TAGGED;
    check(fi_cq_open(domain, &ca, &cq, nullptr), "fi_cq_open");
    fi_av_attr aa{};
    aa.type = FI_AV_TABLE;
    check(fi_av_open(domain, &aa, &av, nullptr), "fi_av_open");
    check(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
    check(fi_ep_bind(ep, &av->fid, 0), "bind av");
    check(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "bind cq");
    check(fi_enable(ep), "fi_enable");
  }
  // Waits for one completion (progressing the provider).
  void wait() {
    fi_cq_tagged_entry e;
    for (;;) {
      ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) return;
      if (n != -FI_EAGAIN) die("fi_cq_read", static_cast<int>(n));
    }
  }
  // Keeps the provider progressing (the peer may still need us) until fd
  // is readable.
  void progress_until(int fd) {
    fi_cq_tagged_entry e;
    pollfd p{fd, POLLIN, 0};
    while (poll(&p, 1, 0) == 0) fi_cq_read(cq, &e, 1);
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: rdm_first_message <provider>\n");
    return 2;
  }
  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 1;
  constexpr int kRounds = 2;
  const pid_t child = fork();
  if (child == 0) {
    Side s(argv[1]);
    for (int round = 0; round < kRounds; ++round) {
      s.open_ep();
      char name[64];
      size_t len = sizeof(name);
      check(fi_getname(&s.ep->fid, name, &len), "fi_getname");
      uint64_t buf = 0;
      check(static_cast<int>(fi_trecv(s.ep, &buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, 7, 0,
                                      nullptr)),
            "fi_trecv");
      if (write(to_parent[1], &len, sizeof(len)) < 0 || write(to_parent[1], name, len) < 0)
        return 1;
      s.wait();
      const double t1 = now_ms();
      const long rss = rss_kb() - s.rss_before;
      if (buf != 0x5eed) return 1;  // the bytes that crossed
      if (write(to_parent[1], &t1, sizeof(t1)) < 0 || write(to_parent[1], &rss, sizeof(rss)) < 0)
        return 1;
      s.progress_until(to_child[0]);
      char go;
      if (read(to_child[0], &go, 1) != 1) return 1;
    }
    return 0;
  }
  Side s(argv[1]);
  for (int round = 0; round < kRounds; ++round) {
    s.open_ep();
    size_t len = 0;
    char name[64];
    if (read(to_parent[0], &len, sizeof(len)) != sizeof(len) || len > sizeof(name) ||
        read(to_parent[0], name, len) != static_cast<ssize_t>(len))
      return 1;
    fi_addr_t peer;
    if (fi_av_insert(s.av, name, 1, &peer, 0, nullptr) != 1) die("fi_av_insert", -FI_EINVAL);
    const uint64_t msg = 0x5eed;
    const double t0 = now_ms();
    ssize_t rc;
    fi_cq_tagged_entry e;
    while ((rc = fi_tsend(s.ep, &msg, sizeof(msg), nullptr, peer, 7, nullptr)) == -FI_EAGAIN)
      fi_cq_read(s.cq, &e, 1);
    check(static_cast<int>(rc), "fi_tsend");
    s.wait();
    double t1 = 0;
    long rss_rx = 0;
    if (read(to_parent[0], &t1, sizeof(t1)) != sizeof(t1) ||
        read(to_parent[0], &rss_rx, sizeof(rss_rx)) != sizeof(rss_rx))
      return 1;
    const long rss_tx = rss_kb() - s.rss_before;
    if (write(to_child[1], "x", 1) < 0) return 1;
    std::printf("round=%d first_ms=%.3f tx_ep_kb=%ld rx_ep_kb=%ld\n", round + 1, t1 - t0,
                rss_tx, rss_rx);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
