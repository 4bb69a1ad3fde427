#include <sys/resource.h>
#include <unistd.h>

#include "platform/process.hpp"

namespace mcdma::platform {

std::string ProgramName() {
  char buf[4096] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "app";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(path.find_last_of('/') + 1);
}

Result<uint64_t> RaiseOpenFileLimit() { return internal::RaiseOpenFileLimitTo(RLIM_INFINITY); }

int64_t OpenFileCount() { return internal::CountOpenFilesIn("/proc/self/fd"); }

}  // namespace mcdma::platform
