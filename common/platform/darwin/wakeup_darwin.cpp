// Wakeup over a non-blocking pipe (macOS has no eventfd). A full pipe
// already wakes the waiter, so Signal never blocks and never needs to
// succeed twice.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/wakeup.hpp"

namespace mcdma::platform {

Result<Wakeup> Wakeup::Create() {
  int fds[2] = {-1, -1};
  if (pipe(fds) != 0) return SysError("pipe", errno);
  Wakeup w;
  w.read_ = Fd(fds[0]);
  w.write_ = Fd(fds[1]);
  for (int fd : fds) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      return SysError("fcntl", errno, "wake-up pipe");
    }
  }
  return w;
}

void Wakeup::Signal() const {
  char one = 1;
  (void)!write(write_.get(), &one, 1);
}

void Wakeup::Drain() const {
  std::array<char, 256> buf{};
  while (read(read_.get(), buf.data(), buf.size()) > 0) {
  }
}

}  // namespace mcdma::platform
