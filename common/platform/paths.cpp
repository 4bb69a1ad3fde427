#include "platform/paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace mcdma::platform {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

// The system service's socket for root, else a user instance's under the
// user's runtime directory (linux/ and darwin/paths_*.cpp say which).
std::string DaemonSocketPath() {
  if (const char* env = std::getenv("MCDMA_SOCKET"); env != nullptr && *env != '\0') return env;
  if (geteuid() != 0) {
    if (std::string dir = UserRuntimeDir(); !dir.empty()) {
      return dir + "/mcdma/rpcd.sock";
    }
  }
  return ServiceSocketPath();
}

// A user's own instance if one runs, else the system service.
std::string ClientSocketPath() {
  std::string path = DaemonSocketPath();
  const char* env = std::getenv("MCDMA_SOCKET");
  bool explicit_path = env != nullptr && *env != '\0';
  const char* service = ServiceSocketPath();
  if (!explicit_path && !Exists(path) && Exists(service)) return service;
  return path;
}

}  // namespace mcdma::platform
