#include <unistd.h>

#include <cstdlib>
#include <string>

namespace mcdma {

// Declared in mcdma/client.hpp; shared with the daemon so both sides agree.
std::string DefaultSocketPath() {
  if (const char* env = std::getenv("MCDMA_SOCKET"); env != nullptr && *env != '\0') return env;
  if (geteuid() != 0) {
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
      return std::string(xdg) + "/mcdma/rpcd.sock";
    }
  }
  return "/run/mcdma/rpcd.sock";
}

}  // namespace mcdma
