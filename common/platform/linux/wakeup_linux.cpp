// Wakeup over an eventfd: one fd, a counter the waiter resets.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "mcdma_internal/sys.hpp"
#include "platform/wakeup.hpp"

namespace mcdma::platform {

Result<Wakeup> Wakeup::Create() {
  Wakeup w;
  w.read_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!w.read_.valid()) return SysError("eventfd", errno);
  return w;
}

void Wakeup::Signal() const {
  uint64_t one = 1;
  (void)!write(read_.get(), &one, sizeof(one));
}

void Wakeup::Drain() const {
  uint64_t count = 0;
  (void)!read(read_.get(), &count, sizeof(count));
}

}  // namespace mcdma::platform
