// Limits on names that the strictest supported OS sets, enforced on every
// OS so the Linux suite catches a name that would fail on a Mac:
//   * POSIX shared-memory names: macOS allows 31 bytes (PSHMNAMLEN),
//     the leading '/' included; Linux allows 255.
//   * Unix socket paths: sockaddr_un::sun_path is 104 bytes on macOS (108
//     on Linux), the terminating NUL included: 103 bytes of path.
// The default places of sockets and files are in paths.hpp.
//
// Threading: plain functions; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "mcdma/status.hpp"

namespace mcdma::platform {

inline constexpr size_t kMaxShmNameBytes = 31;
inline constexpr size_t kMaxUnixSocketPathBytes = 103;

// kInvalid naming the name, its length and the limit when `name` is not
// '/' followed by 1..30 bytes of [A-Za-z0-9._-].
Status CheckShmName(std::string_view name);
// kInvalid naming the path, its length and the limit when `path` is empty
// or longer than kMaxUnixSocketPathBytes.
Status CheckUnixSocketPath(std::string_view path);
// kPermissionDenied (Reason::kAccessDenied) naming the path and the euid
// when this process may not connect to the socket at `path` (EACCES on it
// or on a directory above it, e.g. /run/mcdma without group mcdma); OK
// otherwise, a missing socket included. gRPC reports a refused connect
// only in its error text, so callers ask this when a connect fails.
Status CheckSocketAccess(const std::string& path);

}  // namespace mcdma::platform
