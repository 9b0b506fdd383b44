// lwIP transport: sleeping in poll() when every link has a wait fd. One
// epoll set per transport holds its eventfd (wake() and events other
// transports' polls queued for it), a timerfd for lwIP's next timeout and
// the links' fds.
#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "lwip/timeouts.h"
#include "stack/net/lwip/lwip_transport_impl.h"

namespace softrdma::net::lwip_impl {

void TransportImpl::link_fd(int fd, bool add) {
  epoll_event e{};
  e.events = EPOLLIN;
  ::epoll_ctl(epfd_, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &e);
}

void Stack::arm_links() {
  for (const auto& l : links_) l->port->rx_wait_arm();
}

void TransportImpl::signal() {
  signaled_.store(true, std::memory_order_relaxed);
  uint64_t one = 1;
  while (::write(evfd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void TransportImpl::drain_signals() {
  // Read first: every pass comes here, and a plain load costs no bus lock.
  if (signaled_.load(std::memory_order_relaxed) &&
      signaled_.exchange(false, std::memory_order_relaxed)) {
    uint64_t v;
    while (::read(evfd_, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
  }
  if (timer_armed_) {
    timer_armed_ = false;
    uint64_t v;
    while (::read(tfd_, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
  }
}

// Before the caller sleeps on wait_fd(): links raise their fds on the next
// frame, and the timerfd fires when lwIP's next timer is due.
void TransportImpl::arm_wait() {
  Locked g;
  Stack& s = Stack::get();
  s.arm_links();
  u32_t ms = sys_timeouts_sleeptime();
  itimerspec its{};
  if (ms != SYS_TIMEOUTS_SLEEPTIME_INFINITE) {
    its.it_value.tv_sec = ms / 1000;
    its.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1000000L + 1000;  // never 0: disarms
  }
  ::timerfd_settime(tfd_, 0, &its, nullptr);
  timer_armed_ = ms != SYS_TIMEOUTS_SLEEPTIME_INFINITE;
  if (!fifo_.empty()) signal();
}

void TransportImpl::wait(int timeout_ms) {
  arm_wait();
  epoll_event evs[8];
  ::epoll_wait(epfd_, evs, 8, timeout_ms);
}

void TransportImpl::wake() {
  wake_pending_.store(true);
  signal();
}

}  // namespace softrdma::net::lwip_impl
