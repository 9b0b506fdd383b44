// The process's one lock over the data path.
//
// lwIP keeps its state in globals and the DPDK ports, the memif mesh and the
// mbuf pool are per process, so everything a progress pass touches is per
// process too: every engine of the process, its QPs and CQ rings, and the
// TCP/IP stack under them share this one lock. A progress pass takes it once
// and runs port receive, TCP input, the QPs' receive machines (pushed from
// lwIP's receive callback), QP transmit, tcp_output and the port flush inside
// it; a posting call takes it once for its whole transmit.
//
// It nests on the thread that holds it (the stack's own guards join an
// engine's critical section at the cost of a thread-local test), and the
// outermost unlock runs the release hook first: the stack pushes the frames
// the critical section queued on its links, so batching lasts exactly one
// critical section, however deeply the calls inside it nested.
#pragma once

#include <cstdint>

namespace softrdma::big_lock {

namespace detail {
// How deep the calling thread holds the lock. Initial-exec TLS: one
// fs-relative access even in the dlopen'ed provider (4 bytes of the static
// TLS reserve), where the default model would call __tls_get_addr.
// Defined here (an inline variable, constant-initialized), so that every use
// is a plain TLS access rather than a call through a TLS wrapper function.
inline thread_local uint32_t t_depth __attribute__((tls_model("initial-exec"))) = 0;
void acquire();
bool try_acquire();
void release();  // runs the release hook first
}  // namespace detail

inline void lock() {
  if (detail::t_depth++ == 0) detail::acquire();
}
// Takes it only if no other thread holds it; true if taken (unlock() then).
inline bool try_lock() {
  if (detail::t_depth == 0 && !detail::try_acquire()) return false;
  ++detail::t_depth;
  return true;
}
inline void unlock() {
  if (--detail::t_depth == 0) detail::release();
}
// Whether the calling thread holds it.
inline bool held() { return detail::t_depth != 0; }
// Run by the outermost unlock, still under the lock. One hook per process
// (the lwIP stack's link flush); null clears it.
void set_release_hook(void (*hook)());

// Holds the lock for a scope.
class Guard {
 public:
  Guard() { lock(); }
  ~Guard() { unlock(); }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

}  // namespace softrdma::big_lock
