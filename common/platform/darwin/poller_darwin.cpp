// Poller over kqueue. An fd has two filters (EVFILT_READ, EVFILT_WRITE),
// both always added and enabled or disabled by the interest, so Modify is
// one kevent call; Wait merges the two filters' events for a tag.
#include <fcntl.h>
#include <sys/event.h>
#include <sys/time.h>
#include <sys/types.h>

#include <array>
#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/poller.hpp"

namespace mcdma::platform {
namespace {

constexpr size_t kMaxBatch = 128;

// Applies both filters' changes and reports the first one that failed.
Status Apply(int kq, int fd, void* tag, uint32_t interest, const char* what) {
  auto flags = [&](uint32_t bit) -> uint16_t {
    return EV_ADD | EV_RECEIPT | ((interest & bit) != 0 ? EV_ENABLE : EV_DISABLE);
  };
  std::array<struct kevent, 2> changes{};
  EV_SET(&changes[0], static_cast<uintptr_t>(fd), EVFILT_READ, flags(kInterestRead), 0, 0, tag);
  EV_SET(&changes[1], static_cast<uintptr_t>(fd), EVFILT_WRITE, flags(kInterestWrite), 0, 0, tag);
  std::array<struct kevent, 2> receipts{};
  int n = kevent(kq, changes.data(), 2, receipts.data(), 2, nullptr);
  if (n < 0) return SysError("kevent", errno, what);
  for (int i = 0; i < n; ++i) {
    if ((receipts[i].flags & EV_ERROR) != 0 && receipts[i].data != 0) {
      return SysError("kevent", static_cast<int>(receipts[i].data), what);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Poller> Poller::Create() {
  Fd fd(kqueue());
  if (!fd.valid()) return SysError("kqueue", errno);
  if (fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0) return SysError("fcntl", errno, "FD_CLOEXEC");
  return Poller(std::move(fd));
}

Status Poller::Add(int fd, void* tag, uint32_t interest) {
  return Apply(fd_.get(), fd, tag, interest, "EV_ADD");
}

Status Poller::Modify(int fd, void* tag, uint32_t interest) {
  return Apply(fd_.get(), fd, tag, interest, "EV_ENABLE/EV_DISABLE");
}

void Poller::Remove(int fd) {
  std::array<struct kevent, 2> changes{};
  EV_SET(&changes[0], static_cast<uintptr_t>(fd), EVFILT_READ, EV_DELETE | EV_RECEIPT, 0, 0,
         nullptr);
  EV_SET(&changes[1], static_cast<uintptr_t>(fd), EVFILT_WRITE, EV_DELETE | EV_RECEIPT, 0, 0,
         nullptr);
  std::array<struct kevent, 2> receipts{};
  (void)kevent(fd_.get(), changes.data(), 2, receipts.data(), 2, nullptr);
}

Result<size_t> Poller::Wait(std::span<PollEvent> out, int timeout_ms) {
  // Not zeroed: the kernel fills the first n, and this runs on every spin.
  std::array<struct kevent, kMaxBatch> events;
  int max = static_cast<int>(std::min(out.size(), events.size()));
  timespec ts{.tv_sec = timeout_ms / 1000,
              .tv_nsec = static_cast<long>(timeout_ms % 1000) * 1'000'000};
  int n = kevent(fd_.get(), nullptr, 0, events.data(), max, timeout_ms < 0 ? nullptr : &ts);
  if (n < 0) {
    if (errno == EINTR) return size_t{0};
    return SysError("kevent", errno, "wait");
  }
  size_t filled = 0;
  for (int i = 0; i < n; ++i) {
    const struct kevent& ev = events[i];
    PollEvent* slot = nullptr;
    for (size_t j = 0; j < filled; ++j) {
      if (out[j].tag == ev.udata) slot = &out[j];
    }
    if (slot == nullptr) {
      slot = &out[filled++];
      *slot = PollEvent{.tag = ev.udata, .readable = false, .writable = false};
    }
    // EOF or an error on either filter is for the reader to find out.
    bool trouble = (ev.flags & (EV_EOF | EV_ERROR)) != 0;
    if (ev.filter == EVFILT_READ || trouble) slot->readable = true;
    if (ev.filter == EVFILT_WRITE) slot->writable = true;
  }
  return filled;
}

}  // namespace mcdma::platform
