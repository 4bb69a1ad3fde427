#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "mcdma_internal/sys.hpp"
#include "platform/process.hpp"

namespace mcdma::platform {

namespace {

Result<uint64_t> RaiseTo(rlim_t most) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return SysError("getrlimit", errno, "RLIMIT_NOFILE");
  rlim_t want = std::min(lim.rlim_max, most);
  if (lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return static_cast<uint64_t>(lim.rlim_cur);
}

int64_t CountEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (d == nullptr) return -1;
  int64_t n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

}  // namespace

std::string ProgramName() {
  char buf[4096] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "app";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(path.find_last_of('/') + 1);
}

Result<uint64_t> RaiseOpenFileLimit() { return RaiseTo(RLIM_INFINITY); }

int64_t OpenFileCount() { return CountEntries("/proc/self/fd"); }

}  // namespace mcdma::platform
