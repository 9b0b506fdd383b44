// The softrdma libfabric provider: internal objects.
//
// Only libfabric's public headers are installed, so the provider defines its
// own fabric, domain, EQ, CQ, counter, MR, passive and active endpoints. Each
// object embeds its libfabric fid first, so a fid pointer converts back with
// from_fid<T>(). One softrdma::Engine per process carries everything: lwIP,
// the memif mesh and DPDK's EAL exist once per process, so every fabric is a
// handle on one provider Core (core.cc) that owns the engine.
//
// Progress and locking: the provider makes progress inside the calls the
// application already makes (fi_cq_read/sread, fi_eq_read/sread, fi_cntr_read,
// fi_trywait): FI_PROGRESS_MANUAL; a domain opened for FI_PROGRESS_AUTO adds
// a thread that does the same (progress.cc). The Core's recursive mutex
// guards all provider state and is not held while waiting in the engine; the
// engine has its own lock and never calls back into the provider (a CQ's
// wakeup is an eventfd the engine writes).
#pragma once

#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "prov/rdm_match.h"
#include "prov/rdm_wire.h"
#include "stack/engine.h"

namespace softrdma::prov {

extern struct fi_provider g_prov;

// Caller iovecs per operation: one engine SGE is kept for the trailer that
// carries remote CQ data with a message (msg.cc).
inline constexpr size_t kMaxIov = kMaxSge - 1;

template <typename T, typename F>
T* from_fid(F* f) {
  return reinterpret_cast<T*>(f);
}

// --- attr.cc ---
int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
            const fi_info* hints, fi_info** info);
sockaddr_in local_addr();          // the address endpoints bind to
// True when every FI_SOFTRDMA_* setting is good; else prints the bad ones
// to stderr (once a process for the same ones: fi_getinfo runs often).
bool check_settings();
size_t max_cm_data();              // CM private data an endpoint may carry

// --- errors.cc ---
int fi_error(int neg_errno);                  // -errno -> -FI_E*
int cq_error(WcStatus s);                     // completion status -> FI_E* (positive)
int prov_errno(WcStatus s, uint32_t vendor_err);  // see errors.cc
const char* prov_errno_string(int prov_errno, char* buf, size_t len);

struct Eq;
struct Cq;
struct Core;

// --- wait.cc --- An FI_WAIT_FD wait object (see wait.cc).
struct WaitFd {
  int efd = -1;   // eventfd: the object gained an entry
  int epfd = -1;  // what FI_GETWAIT hands out: efd + the transport's fd
  // Set by fi_trywait when it lets the caller sleep; the next entry then
  // writes efd. Unarmed, entries cost no syscall (see wait.cc).
  mutable std::atomic<bool> armed{false};
  void open(const Core& core);
  void close();
  void drain() const;  // empties efd
  // Before fi_trywait's last look for entries: drains and arms.
  void arm() const;
  void signal() const;  // an entry arrived: wakes a sleeper, if one is armed
  void wake() const;    // fi_cq_signal: wakes a sleeper regardless
  int control(int command, void* arg) const;  // FI_GETWAIT, FI_GETWAITOBJ
};
struct Cntr;
struct Pep;
struct Ep;
struct RdmConns;

struct Op;
// What an operation record is to an RDM endpoint's own data path.
enum class RdmWork : uint8_t { kNone, kBuffer, kControl, kRead };

// Operation records, recycled rather than allocated per operation: chunks
// are never freed before the core, so a completion that arrives after its
// endpoint closed (flushed work) still finds its record. Guarded by the
// core's lock, as every posting and reaping path holds it.
class OpPool {
 public:
  Op* get();
  void put(Op* op);
  ~OpPool();

 private:
  std::vector<Op*> chunks_;
  std::vector<Op*> free_;
};

// The process's provider state: the one engine and what routes its events
// and completions, whichever fabric made the objects concerned.
struct Core {
  // --- core.cc ---
  // The core, made with its engine by the first fabric; null with *err set
  // when the engine cannot start.
  static std::shared_ptr<Core> acquire(int* err);
  // Drops a fabric's hold; the last one destroys the core and its engine
  // before another acquire can make a new one.
  static void release(std::shared_ptr<Core>* core);
  ~Core();

  std::unique_ptr<Engine> engine;  // first: destroyed after all that names its objects
  // The provider's state is under the engine's lock (the process's one
  // lock, which nests), so that a post or a CQ read takes one lock.
  struct Lock {
    Core* core;
    void lock() { core->engine->lock(); }
    void unlock() { core->engine->unlock(); }
  } mu{this};
  std::map<Listener*, Pep*> peps;
  std::map<Listener*, Ep*> rdm_listeners;  // native FI_EP_RDM endpoints' (rdm_ep.cc)
  std::map<Qp*, Ep*> eps;                  // theirs among them
  std::vector<Cq*> cqs;
  OpPool ops;
  // --- progress.cc ---
  // Drives the engine (waiting up to timeout_us for I/O, without holding
  // mu), then routes its CM events to the EQs and settles its completions
  // (counters count without a CQ reader). Under mu it only makes a pass
  // (c2) or routes (c1/c3: the engine's thread makes progress).
  void progress(int timeout_us = 0);
  void route();  // progress() without driving the engine
  // c1/c3: the engine has a thread of its own that makes progress.
  bool engine_threaded() const;
  // Whether a wait fd can be slept on: something other than the
  // application's own calls will make it readable (fi_trywait). cm: for
  // EQ events, which only the provider makes out of the engine's.
  bool can_block(bool cm) const;
  // FI_PROGRESS_AUTO, asked for by any domain: a thread of the core's own
  // makes progress until the core goes.
  void start_auto_progress();
  std::thread auto_thread;
  std::atomic<bool> auto_stop{false};
  // --- cm_events.cc --- the engine's CM events -> the EQs they concern.
  void dispatch_cm();
};

// Objects opened on a fabric or a domain hold it: fi_close of a parent with
// children open answers -FI_EBUSY instead of leaving them dangling.
struct Children {
  std::atomic<uint32_t> open{0};
  void add() { open.fetch_add(1, std::memory_order_relaxed); }
  void drop() { open.fetch_sub(1, std::memory_order_relaxed); }
};

struct Fabric {
  fid_fabric fid;
  std::shared_ptr<Core> core;
  Children children;  // domains, EQs, passive endpoints
};

struct Domain {
  fid_domain fid;
  Fabric* fab;
  Core& core() const { return *fab->core; }
  Pd* pd;
  Cq* sink = nullptr;  // for an endpoint that binds no CQ for one direction
  Children children;   // endpoints, CQs (the sink too), counters, MRs
  // ofi_rxm's credit message sender (flow_ctrl.cc); 0 = sent or queued.
  ssize_t (*send_credits)(fid_ep* ep, uint64_t credits) = nullptr;
};

// One EQ entry as fi_eq_read hands it out (header + CM data), or an error.
struct EqItem {
  uint32_t event;
  bool error;
  std::vector<uint8_t> buf;  // fi_eq_entry / fi_eq_cm_entry (+ data) image
  fi_eq_err_entry err{};
  std::vector<uint8_t> err_data;
  fid_t fid;                 // for purging events of a closed endpoint
};

struct Eq {
  fid_eq fid;
  Fabric* fab;
  Core& core() const { return *fab->core; }
  std::deque<EqItem> items;
  std::vector<uint8_t> last_err_data;  // valid until the next read
  WaitFd wait;
  Children users;  // AVs that report to it (fi_close answers -FI_EBUSY)
  void push(EqItem item);
  void purge(fid_t f);
};

// A completion translated for the application, in the superset format.
struct CqItem {
  fi_cq_err_entry e{};
  bool error = false;
  fi_addr_t src = FI_ADDR_NOTAVAIL;  // fi_cq_readfrom: the sender of a message (FI_SOURCE)
};

// The engine's CQ ring is the only queue: completions are settled (counted,
// and those that report nothing dropped) as they arrive, and translated
// into the caller's buffer by fi_cq_read (cq.cc).
struct Cq {
  fid_cq fid;
  Domain* dom;
  iwarp::Cq* ecq;
  fi_cq_format format;
  // One translated entry taken out of the ring and not handed out yet: an
  // error waiting for fi_cq_readerr, or the entry settling found at the
  // ring's front behind what reports nothing.
  CqItem staged;
  bool has_staged = false;
  WaitFd wait;
  std::atomic<bool> signaled{false};  // fi_cq_signal: end one fi_cq_sread
  // fi_cq_attr.size, the engine CQ's depth. Holding more than that unread is
  // an overrun (fi_cq(3)): every completion is still handed out, then reads
  // fail with FI_EOVERRUN for good instead of the CQ silently growing or
  // dropping.
  size_t size = 0;
  bool sink = false;  // the domain's CQ for unbound directions: nobody reads it
  // An RDM endpoint's own (RdmConns::work): the engine's completions of its
  // connections, settled into the endpoint's CQ. Its buffers' and control
  // messages' completions thus never take room in the application's CQ.
  bool forward = false;
  // Entries the provider makes itself (an RDM endpoint's matched messages),
  // handed out after the engine's.
  std::deque<CqItem> made;
  // The RDM endpoints' own work (rdm_datapath.cc), found by settle and
  // handled after it: handling posts to the engine.
  std::vector<std::pair<Op*, Wc>> internal, handling;
  void push(const CqItem& item);
  ssize_t read(void* buf, size_t count, fi_addr_t* src);
  ssize_t readerr(fi_cq_err_entry* out, uint64_t flags);
  // Counts what arrived, drops what reports nothing from the front (all of
  // it for the sink), under Core::mu.
  void settle();
  // fi_trywait: arms the wait fd with the engine; then whether an entry or
  // the overrun is waiting.
  void arm();
  bool ready() const;
  bool take();  // the next entry to hand out -> staged; false: none
};

struct Cntr {
  fid_cntr fid;
  Domain* dom;
  std::atomic<uint64_t> value{0}, errs{0};
};

// --- av.cc --- An address vector: peers' names (sockaddr_in) by fi_addr_t,
// the index of the entry.
struct Av {
  fid_av fid;
  Domain* dom;
  bool events = false;             // FI_EVENT: outcomes go to eq
  Eq* eq = nullptr;
  std::vector<sockaddr_in> names;  // sin_family 0: a free entry
  std::set<fi_addr_t> free_slots;  // the lowest is taken first
  uint64_t changes = 0;            // inserts and removals so far: what a cached lookup saw
  Children users;                  // endpoints bound to it (fi_close answers -FI_EBUSY)
};
// The name at an AV entry; null for one not in use.
const sockaddr_in* av_name(const Av* av, fi_addr_t addr);
// The entry holding name; FI_ADDR_NOTAVAIL if none does.
fi_addr_t av_lookup(const Av* av, const sockaddr_in& name);

struct MemRegion {
  fid_mr fid;
  Domain* dom;
  softrdma::Mr* mr;
};

// The provider's record of one posted operation: what the completion must
// say and who else must hear of it. The engine's wr_id points here.
struct Op {
  OpPool* pool = nullptr;
  Ep* ep = nullptr;
  void* context = nullptr;
  uint64_t flags = 0;           // FI_SEND|FI_MSG, FI_RECV|FI_MSG, FI_READ|FI_RMA, ...
  bool report = false;          // a CQ entry on success (FI_COMPLETION)
  Cntr* cntr = nullptr;
  void* buf = nullptr;
  size_t len = 0;
  std::vector<uint8_t> inject;  // owned copy for inject (capacity kept across uses)
  uint64_t result = 0;          // atomic without fetch, or 32-bit: the word lands here
  void* fetch_to = nullptr;     // a 32-bit fetch's result: atomic_fetched copies it
  uint8_t fetch_shift = 0;      // where in result its half is
  // Messages with remote CQ data (msg.cc): the 8 bytes after the payload.
  // A receive lists its buffers, then this slot, so the trailer lands right
  // after the payload, in the caller's buffer or here.
  uint64_t trailer = 0;
  iovec iov[kMaxSge] = {};
  size_t iov_count = 0;
  // FI_DELIVERY_COMPLETE (post.cc): engine work requests still to complete
  // for this operation, and the first error among them.
  bool delivery = false;
  int pending = 1;
  Wc first_error{};
  // RDM messages (rdm_datapath.cc): what the record is for the endpoint's
  // own work, the connection it uses, and the message's fields.
  RdmWork work = RdmWork::kNone;
  Qp* qp = nullptr;
  // kRead: the receive it fills; a receive: the multi-receive buffer it
  // is a slice of, if it is one.
  Op* owner = nullptr;
  // A multi-receive buffer (FI_MULTI_RECV): bytes given to slices, slices
  // not completed yet, and whether it takes no more messages.
  size_t multi_used = 0;
  uint32_t multi_slices = 0;
  bool multi_retired = false;
  uint64_t tag = 0, ignore = 0, cq_data = 0, msg_id = 0, size = 0;
  uint16_t msg_flags = 0;        // RdmHeader::flags of the message a receive took
  fi_addr_t addr = FI_ADDR_UNSPEC;
  uint32_t rndv_stag = 0;        // a rendezvous send's registration
};

struct Pep {
  fid_pep fid;
  Fabric* fab;
  Core& core() const { return *fab->core; }
  fi_info* info;
  Eq* eq = nullptr;
  Listener* listener = nullptr;
  sockaddr_in addr{};  // as the user named it, with the port it listens on
  // The transport listens at an address of its own (the DPDK mesh's), not
  // at the one named: its connections' addresses are not the user's.
  bool elsewhere = false;
};
// --- cm_events.cc --- an EQ error entry (ep.cc reports a connect that failed
// before it began with one too).
EqItem err_item(fid_t f, int err, int prov_errno, const std::vector<uint8_t>& data);

// A connection's peer as the user sees it (pep.cc): the transport's, or the
// listener's named address with the peer's port when it listens elsewhere.
sockaddr_in user_peer(const Pep* pep, const sockaddr_in& conn_peer);
// Listens at *addr (pep.cc); *addr becomes the name peers reach it by, and
// *elsewhere says whether the transport listens at another address.
int listen_named(Core& core, sockaddr_in* addr, Listener** out, bool* elsewhere);

// info->handle of a FI_CONNREQ: names the engine's pending connection.
struct ConnHandle {
  struct fid fid;
  ConnReq* req;
  Pep* pep;
};

struct Ep {
  fid_ep fid;
  Domain* dom;
  fi_info* info;
  Eq* eq = nullptr;
  Cq* tx_cq = nullptr;
  Cq* rx_cq = nullptr;
  bool tx_selective = false, rx_selective = false;
  Cntr *send_cntr = nullptr, *recv_cntr = nullptr, *read_cntr = nullptr, *write_cntr = nullptr;
  Qp* qp = nullptr;
  ConnReq* req = nullptr;  // passive side: from the FI_CONNREQ's handle
  bool accepted = false;   // made from an FI_CONNREQ
  sockaddr_in peer{};      // as the user sees it (see ep_getname)
  uint64_t tx_flags = 0, rx_flags = 0;
  bool enabled = false;
  // Flow control (flow_ctrl.cc): whether rxm turned it on, receives the
  // peer posted for us that we may still use, receives we posted and have
  // not yet told the peer of, and how many of those make a credit message.
  bool flow_ctrl = false;
  uint64_t peer_credits = 0;
  int64_t credits_unsent = -1;
  int64_t threshold = INT64_MAX;
  std::unique_ptr<RdmConns> rdm;  // a native FI_EP_RDM endpoint's connections
};

// --- rdm_ep.cc --- A native FI_EP_RDM endpoint (FI_RMA, FI_ATOMIC) keeps one
// connection to each peer it sends to, made at its first operation there,
// and accepts those its peers make to it (each side uses its own: two
// endpoints that start at once simply have two).
// A connection's messaging state (rdm_datapath.cc).
struct RdmLink {
  Qp* qp = nullptr;
  uint64_t serial = 0;  // told apart from a later link on a reused Qp address
  fi_addr_t peer = FI_ADDR_NOTAVAIL;  // the sender's AV entry (FI_SOURCE), once known
  uint64_t av_seen = 0;               // Av::changes when peer was looked up
  sockaddr_in name{};                 // where the peer listens (its hello)
  std::vector<uint8_t> slab;          // the eager buffers
  uint32_t credits = 0;               // buffers the peer has posted for us
  uint32_t owed = 0;                  // buffers posted again, not yet told to the peer
  // Control messages waiting for a credit: (op, msg_id).
  std::deque<std::pair<RdmOp, uint64_t>> backlog;
  bool credit_queued = false;
  // Messages waiting for a receive: payload bytes copied out of the
  // buffers, and (past FI_SOFTRDMA_UNEXPECTED_BYTES of those) the messages
  // left in their buffers, which then stay from the sender until taken.
  size_t kept_bytes = 0;
  std::set<void*> held;
  bool ending = false;  // the peer broke the protocol: disconnecting
};

struct RdmConns {
  Av* av = nullptr;
  Listener* listener = nullptr;
  sockaddr_in name{};            // where peers reach it (fi_getname)
  std::map<fi_addr_t, RdmLink*> out;  // what operations to a peer use, by its AV entry
  std::set<Qp*> in;              // the connections peers made
  std::set<Qp*> serving;         // those of them in out
  // Messages (rdm_datapath.cc): each connection's eager buffers and
  // credits, the receives and arrived messages, and the long sends whose
  // data the targets are still reading, by msg_id.
  std::map<Qp*, std::unique_ptr<RdmLink>> links;
  RdmMatcher matcher;
  std::map<uint64_t, Op*> rendezvous;
  uint64_t next_msg_id = 1;
  size_t min_multi_recv = kRdmEager;  // FI_OPT_MIN_MULTI_RECV
  uint64_t av_resolved = 0;           // Av::changes when waiting senders were last looked up
  Cq* work = nullptr;  // what its QPs complete to (Cq::forward)
  ~RdmConns();
};
int rdm_enable(Ep* ep);
void rdm_close(Ep* ep);
// The QP an operation to dest goes on: the endpoint's own (FI_EP_MSG), or
// the connection to dest, started now if there is none; null with *err.
Qp* target_qp(Ep* ep, fi_addr_t dest, int* err);
RdmLink* target_link(Ep* ep, fi_addr_t dest, int* err);  // the same, for an RDM endpoint
// The engine's CM events for RDM endpoints (Core::dispatch_cm).
void rdm_conn_request(Ep* ep, const CmEvent& ev);
void rdm_conn_event(Ep* ep, const CmEvent& ev);
// --- rdm_datapath.cc --- messages between RDM endpoints (see there).
// A connection's messaging state, made with its QP (before it connects or
// is accepted): the eager buffers are posted then. peer: the AV entry the
// other end has in ours, or FI_ADDR_NOTAVAIL; name: where it listens.
int rdm_link_open(Ep* ep, Qp* qp, fi_addr_t peer, const sockaddr_in& name, uint32_t credits);
void rdm_link_credits(Ep* ep, Qp* qp, uint32_t credits);  // the acceptor's hello
// Whether the connection on qp has a credit for one more message (a Write
// with Immediate Data takes one too); spend: it is taken.
bool rdm_credit(Ep* ep, Qp* qp, bool spend);
// The peer broke the protocol: its connection ends.
void rdm_link_end(Ep* ep, Qp* qp, const char* why);
// What a hello offers: the buffers each connection has (none for an
// endpoint without messages).
uint32_t rdm_link_buffers(const Ep* ep);
// After the QP is destroyed: its sends waiting for a rendezvous fail.
void rdm_link_close(Ep* ep, Qp* qp);
// Engine completions of the endpoint's own work (Cq::settle).
void rdm_internal(Op* op, const Wc& wc);
// report: false for the fi_inject calls, which never complete to the CQ
// (fi_sendmsg with FI_INJECT does).
ssize_t rdm_send(Ep* ep, const iovec* iov, void** desc, size_t count, fi_addr_t dest, void* ctx,
                 uint64_t flags, bool tagged, uint64_t tag, const uint64_t* data, bool report);
ssize_t rdm_recv(Ep* ep, const iovec* iov, void** desc, size_t count, fi_addr_t src, void* ctx,
                 uint64_t flags, bool tagged, uint64_t tag, uint64_t ignore);
// fi_cancel of a receive still waiting for its message.
ssize_t rdm_cancel(Ep* ep, void* ctx);
extern fi_ops_msg g_rdm_msg_ops;
extern fi_ops_tagged g_rdm_tagged_ops;

// --- object constructors, one file each ---
int fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
int domain_open(fid_fabric* fabric, fi_info* info, fid_domain** dom, void* context);
int eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context);
int cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context);
int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context);
int cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context);
int pep_open(fid_fabric* fabric, fi_info* info, fid_pep** pep, void* context);
int ep_open(fid_domain* domain, fi_info* info, fid_ep** ep, void* context);
extern fi_ops_mr g_mr_ops;
extern fi_ops_msg g_msg_ops;
extern fi_ops_rma g_rma_ops;
extern fi_ops_atomic g_atomic_ops;
extern fi_ops_tagged g_tagged_ops;

// --- flow_ctrl.cc --- ofi_rxm's credit-based flow control (see there).
extern const char* const kFlowCtrlOpsName;
void* flow_ctrl_ops();
// --- counters_ops.cc --- FI_SOFTRDMA_COUNTERS_OPS: *ops set, true if name is it.
bool open_counters_ops(const char* name, void** ops);
bool consumes_recv(WrOpcode op);          // takes a receive at the peer
bool take_credit(Ep* ep, bool priority);  // false: the peer has no receive for it
void return_credit(Ep* ep);               // the post failed after all
void grant_credits(Ep* ep);               // tell the peer of our receives, if due
void recv_posted(Ep* ep);

// --- atomic.cc --- What fi_query_atomic answers: the element's size, or 0
// when the operation is not offered for the datatype.
enum class AtomicKind { kWrite, kFetch, kCompare };
size_t atomic_size(fi_datatype dt, fi_op op, AtomicKind kind);
void atomic_fetched(Op* op);  // on success, before the completion is seen

// Completion plumbing shared by msg.cc, rma.cc and atomic.cc.
Op* new_op(Ep* ep, void* context, uint64_t flags, uint64_t op_flags, bool tx, Cntr* cntr);
void free_op(Op* op);
// priority: rxm's credit message (FI_PRIORITY), which may take the last credit.
ssize_t post_send(Ep* ep, Qp* qp, SendWr& wr, Op* op, bool priority = false);
// --- ep.cc --- what the endpoint's QPs are made with (its CQs, sizes), and
// a connect that waits for a link still being set up.
QpInit qp_init(Ep* ep);
int connect_with_retry(Ep* ep, Qp* qp, const sockaddr_in& peer, const void* param, size_t len);
// The operation an engine completion belongs to, once all of its work
// requests are done (see post.cc); null while some are outstanding. *wc
// becomes the completion that speaks for the whole operation.
Op* op_done(Wc* wc);
// A receive's completion: e's len/flags/data from wc; 0 or an FI_E* error.
int recv_done(const Op* op, const Wc& wc, fi_cq_err_entry* e);
void cntr_add(Cntr* c, bool error);

// libfabric's "not supported here" entries, so that no table has a hole.
int no_bind(fid*, fid*, uint64_t);
int no_control(fid*, int, void*);
int no_ops_open(fid*, const char*, uint64_t, void**, void*);
int no_ctx(fid_ep*, int, fi_tx_attr*, fid_ep**, void*);
int no_rctx(fid_ep*, int, fi_rx_attr*, fid_ep**, void*);
ssize_t no_left(fid_ep*);
int no_join(fid_ep*, const void*, uint64_t, fid_mc**, void*);
int no_setopt(fid_t, int, int, const void*, size_t);

// Shared by endpoints and passive endpoints (errors.cc).
int copy_name(const sockaddr_in& a, void* addr, size_t* len);  // getname/getpeer
int cm_getopt(fid_t, int level, int name, void* val, size_t* len);  // FI_OPT_CM_DATA_SIZE

}  // namespace softrdma::prov
