// The part of socket set-up that is the same on every OS.
#include "platform/socket.hpp"

#include <sys/socket.h>

#include <cerrno>

#include "mcdma_internal/sys.hpp"

namespace mcdma::platform {

Status SetSocketInt(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
    return SysError("setsockopt", errno, what);
  }
  return Status::Ok();
}

}  // namespace mcdma::platform
