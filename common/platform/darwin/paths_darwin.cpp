#include <cstdlib>

#include "platform/paths.hpp"

namespace mcdma::platform {

// The install's sysconfdir (CMAKE_INSTALL_FULL_SYSCONFDIR, set by
// common/CMakeLists.txt): /usr/local/etc, or Homebrew's etc.
#ifndef MCDMA_SYSCONFDIR
#define MCDMA_SYSCONFDIR "/usr/local/etc"
#endif

const char* ServiceSocketPath() { return "/var/run/mcdma/rpcd.sock"; }

const char* DefaultConfigPath() { return MCDMA_SYSCONFDIR "/mcdma/rpcd.toml"; }

std::string UserRuntimeDir() {
  const char* tmp = std::getenv("TMPDIR");  // per-user, mode 0700, under /var/folders
  if (tmp == nullptr) return "";
  std::string dir = tmp;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace mcdma::platform
