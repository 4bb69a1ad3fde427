#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace mcdma {
namespace {
#if defined(__APPLE__)
constexpr const char* kServiceSocket = "/var/run/mcdma/rpcd.sock";
#else
constexpr const char* kServiceSocket = "/run/mcdma/rpcd.sock";
#endif

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}
}  // namespace

// Declared in mcdma/client.hpp; the daemon listens here by default.
std::string DefaultSocketPath() {
  if (const char* env = std::getenv("MCDMA_SOCKET"); env != nullptr && *env != '\0') return env;
  if (geteuid() != 0) {
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
      return std::string(xdg) + "/mcdma/rpcd.sock";
    }
  }
  return kServiceSocket;
}

// Declared in mcdma/client.hpp; apps and mcdmactl connect here by default:
// a user's own instance if one runs, else the system service.
std::string DefaultClientSocketPath() {
  std::string path = DefaultSocketPath();
  const char* env = std::getenv("MCDMA_SOCKET");
  bool explicit_path = env != nullptr && *env != '\0';
  if (!explicit_path && !Exists(path) && Exists(kServiceSocket)) return kServiceSocket;
  return path;
}

}  // namespace mcdma
