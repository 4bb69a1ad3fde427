#include <dirent.h>
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

std::vector<std::string> ListSharedMemory(const std::string& prefix) {
  std::vector<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (const dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) == 0) names.push_back("/" + name);
  }
  closedir(dir);
  return names;
}

}  // namespace mcdma::platform
