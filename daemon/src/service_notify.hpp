// systemd's notification protocol (Type=notify, watchdog) without
// libsystemd: one datagram to $NOTIFY_SOCKET. A no-op when not under
// systemd (and on macOS, where launchd's KeepAlive needs nothing).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace mcdma::daemon {

void NotifyServiceManager(const std::string& state);
// The watchdog period systemd asked for ($WATCHDOG_USEC), if any.
std::optional<std::chrono::microseconds> WatchdogInterval();

}  // namespace mcdma::daemon
