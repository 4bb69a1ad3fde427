#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "platform/names.hpp"

namespace mcdma {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

// Declared in mcdma/client.hpp; the daemon listens here by default: the
// system service's socket for root, else a user instance's under the
// user's runtime directory (platform/names.hpp says which on each OS).
std::string DefaultSocketPath() {
  if (const char* env = std::getenv("MCDMA_SOCKET"); env != nullptr && *env != '\0') return env;
  if (geteuid() != 0) {
    if (std::string dir = platform::UserRuntimeDir(); !dir.empty()) {
      return dir + "/mcdma/rpcd.sock";
    }
  }
  return platform::ServiceSocketPath();
}

// Declared in mcdma/client.hpp; apps and mcdmactl connect here by default:
// a user's own instance if one runs, else the system service.
std::string DefaultClientSocketPath() {
  std::string path = DefaultSocketPath();
  const char* env = std::getenv("MCDMA_SOCKET");
  bool explicit_path = env != nullptr && *env != '\0';
  const char* service = platform::ServiceSocketPath();
  if (!explicit_path && !Exists(path) && Exists(service)) return service;
  return path;
}

}  // namespace mcdma
