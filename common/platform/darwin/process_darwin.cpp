#include <dirent.h>
#include <mach-o/dyld.h>
#include <sys/resource.h>
#include <sys/syslimits.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

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
  uint32_t size = 0;
  (void)_NSGetExecutablePath(nullptr, &size);  // asks for the size
  if (size == 0) return "app";
  std::vector<char> buf(size + 1, '\0');
  if (_NSGetExecutablePath(buf.data(), &size) != 0) return "app";
  std::string path(buf.data());
  return path.substr(path.find_last_of('/') + 1);
}

Result<uint64_t> RaiseOpenFileLimit() { return RaiseTo(OPEN_MAX); }

int64_t OpenFileCount() { return CountEntries("/dev/fd"); }

}  // namespace mcdma::platform
