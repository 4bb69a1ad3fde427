#include "platform/names.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace mcdma::platform {

Status CheckShmName(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalid, "shared-memory name '" + std::string(name) + "' " + why);
  };
  if (name.size() < 2 || name.front() != '/') return bad("must be '/' followed by a name");
  if (name.size() > kMaxShmNameBytes) {
    return bad("is " + std::to_string(name.size()) + " bytes; macOS allows at most " +
               std::to_string(kMaxShmNameBytes) + " (PSHMNAMLEN), so every host does");
  }
  for (char c : name.substr(1)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return bad("has a character other than letters, digits, '.', '_' and '-'");
  }
  return Status::Ok();
}

Status CheckUnixSocketPath(std::string_view path) {
  if (path.empty()) return Status(Code::kInvalid, "the Unix socket path is empty");
  if (path.size() > kMaxUnixSocketPathBytes) {
    return Status(Code::kInvalid,
                  "Unix socket path '" + std::string(path) + "' is " + std::to_string(path.size()) +
                      " bytes; macOS allows at most " + std::to_string(kMaxUnixSocketPathBytes) +
                      " (sun_path), so every host does: choose a shorter path");
  }
  return Status::Ok();
}

Status CheckSocketAccess(const std::string& path) {
  if (faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0 || errno != EACCES) {
    return Status::Ok();
  }
  return Status(
      Code::kPermissionDenied, Reason::kAccessDenied,
      "cannot connect to " + path + ": permission denied (euid " + std::to_string(geteuid()) + ")");
}

}  // namespace mcdma::platform
