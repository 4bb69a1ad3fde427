// The parts of platform/process.hpp's open-file functions that are plain
// POSIX; the per-OS files give the limits and the directory to count.
#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/process.hpp"

namespace mcdma::platform::internal {

Result<uint64_t> RaiseOpenFileLimitTo(uint64_t most) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return SysError("getrlimit", errno, "RLIMIT_NOFILE");
  rlim_t want = std::min<rlim_t>(lim.rlim_max, static_cast<rlim_t>(most));
  if (lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return static_cast<uint64_t>(lim.rlim_cur);
}

int64_t CountOpenFilesIn(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int64_t n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

}  // namespace mcdma::platform::internal
