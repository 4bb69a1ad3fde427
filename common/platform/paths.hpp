// The default places of the daemon's socket and configuration file: the
// platform seam's part of them (linux/paths_linux.cpp,
// darwin/paths_darwin.cpp) and the rules on top that every OS shares
// (paths.cpp). The daemon listens on DaemonSocketPath(); libmcdma's public
// DefaultSocketPath() and DefaultClientSocketPath() (mcdma/client.hpp)
// return DaemonSocketPath() and ClientSocketPath().
//
// Threading: plain functions; any thread.
#pragma once

#include <string>

namespace mcdma::platform {

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

// Where the daemon listens by default: $MCDMA_SOCKET if set, else, for a
// user other than root, UserRuntimeDir()/mcdma/rpcd.sock, else
// ServiceSocketPath().
std::string DaemonSocketPath();
// Where apps and mcdmactl connect by default: DaemonSocketPath(), except
// that a user with no instance of their own (no socket there, and no
// $MCDMA_SOCKET) reaches the system service's socket.
std::string ClientSocketPath();

}  // namespace mcdma::platform
