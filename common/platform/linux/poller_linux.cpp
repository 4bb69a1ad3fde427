// Poller over epoll (level-triggered).
#include <sys/epoll.h>

#include <array>
#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/poller.hpp"

namespace mcdma::platform {
namespace {

constexpr size_t kMaxBatch = 128;

uint32_t EpollMask(uint32_t interest) {
  uint32_t events = 0;
  if ((interest & kInterestRead) != 0) events |= EPOLLIN | EPOLLRDHUP;
  if ((interest & kInterestWrite) != 0) events |= EPOLLOUT;
  return events;
}

}  // namespace

Result<Poller> Poller::Create() {
  Fd fd(epoll_create1(EPOLL_CLOEXEC));
  if (!fd.valid()) return SysError("epoll_create1", errno);
  return Poller(std::move(fd));
}

Status Poller::Add(int fd, void* tag, uint32_t interest) {
  epoll_event ev{.events = EpollMask(interest), .data = {.ptr = tag}};
  if (epoll_ctl(fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return SysError("epoll_ctl", errno, "ADD");
  return Status::Ok();
}

Status Poller::Modify(int fd, void* tag, uint32_t interest) {
  epoll_event ev{.events = EpollMask(interest), .data = {.ptr = tag}};
  if (epoll_ctl(fd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) return SysError("epoll_ctl", errno, "MOD");
  return Status::Ok();
}

void Poller::Remove(int fd) { (void)epoll_ctl(fd_.get(), EPOLL_CTL_DEL, fd, nullptr); }

Result<size_t> Poller::Wait(std::span<PollEvent> out, int timeout_ms) {
  // Not zeroed: the kernel fills the first n, and this runs on every spin.
  std::array<epoll_event, kMaxBatch> events;
  int max = static_cast<int>(std::min(out.size(), events.size()));
  int n = epoll_wait(fd_.get(), events.data(), max, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return size_t{0};
    return SysError("epoll_wait", errno);
  }
  for (int i = 0; i < n; ++i) {
    uint32_t e = events[i].events;
    out[i] = PollEvent{.tag = events[i].data.ptr,
                       .readable = (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0,
                       .writable = (e & EPOLLOUT) != 0};
  }
  return static_cast<size_t>(n);
}

}  // namespace mcdma::platform
