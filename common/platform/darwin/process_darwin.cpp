#include <mach-o/dyld.h>
#include <sys/resource.h>
#include <sys/syslimits.h>

#include <cstdint>
#include <vector>

#include "platform/process.hpp"

namespace mcdma::platform {

std::string ProgramName() {
  uint32_t size = 0;
  (void)_NSGetExecutablePath(nullptr, &size);  // asks for the size
  if (size == 0) return "app";
  std::vector<char> buf(size + 1, '\0');
  if (_NSGetExecutablePath(buf.data(), &size) != 0) return "app";
  std::string path(buf.data());
  return path.substr(path.find_last_of('/') + 1);
}

Result<uint64_t> RaiseOpenFileLimit() { return internal::RaiseOpenFileLimitTo(OPEN_MAX); }

int64_t OpenFileCount() { return internal::CountOpenFilesIn("/dev/fd"); }

}  // namespace mcdma::platform
