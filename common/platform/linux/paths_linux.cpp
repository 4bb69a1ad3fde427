#include <cstdlib>

#include "platform/paths.hpp"

namespace mcdma::platform {

const char* ServiceSocketPath() { return "/run/mcdma/rpcd.sock"; }

const char* DefaultConfigPath() { return "/etc/mcdma/rpcd.toml"; }

std::string UserRuntimeDir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  return xdg != nullptr ? xdg : "";
}

}  // namespace mcdma::platform
