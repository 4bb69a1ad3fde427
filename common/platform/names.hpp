// Limits on names that the strictest supported OS sets, enforced on every
// OS so the Linux suite catches a name that would fail on a Mac:
//   * POSIX shared-memory names: macOS allows 31 bytes (PSHMNAMLEN),
//     the leading '/' included; Linux allows 255.
//   * Unix socket paths: sockaddr_un::sun_path is 104 bytes on macOS (108
//     on Linux), the terminating NUL included: 103 bytes of path.
// And the default places of the daemon's socket (linux/paths_linux.cpp,
// darwin/paths_darwin.cpp).
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

// The system service's socket: /run/mcdma/rpcd.sock on Linux (systemd's
// RuntimeDirectory), /var/run/mcdma/rpcd.sock on macOS.
const char* ServiceSocketPath();
// The daemon's configuration file that mcdmactl doctor reads when none is
// given: /etc/mcdma/rpcd.toml on Linux (the systemd unit's), the install's
// sysconfdir on macOS (PREFIX/etc/mcdma/rpcd.toml, as the launchd plist).
const char* DefaultConfigPath();
// Where a user's own instance puts its socket directory: $XDG_RUNTIME_DIR
// on Linux, $TMPDIR on macOS (per-user, 0700); empty when unset.
std::string UserRuntimeDir();

}  // namespace mcdma::platform
