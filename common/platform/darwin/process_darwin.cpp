#include <mach-o/dyld.h>

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

}  // namespace mcdma::platform
