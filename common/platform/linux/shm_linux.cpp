#include <fcntl.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "mcdma_internal/sys.hpp"
#include "platform/shm.hpp"

namespace mcdma::platform {

Status ReserveSharedMemory(int fd, uint64_t bytes, const std::string& name) {
  int err = 0;
  do {
    err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (err == EINTR);
  if (err == 0) return Status::Ok();
  if (err == ENOSPC || err == ENOMEM || err == EFBIG) {
    return Status(Code::kNoMemory, Reason::kShmFull,
                  "no room in /dev/shm for segment " + name + " of " + std::to_string(bytes) +
                      " bytes (" + std::strerror(err) + ")");
  }
  return SysError("posix_fallocate", err, name);
}

uint64_t SharedMemoryCapacity() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
}

uint64_t SharedMemoryFree() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

}  // namespace mcdma::platform
