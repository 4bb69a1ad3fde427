// Telling the service manager how the daemon is doing.
//   Linux (linux/service_manager_linux.cpp): systemd's notification
//     protocol (Type=notify, the watchdog) without libsystemd: one datagram
//     to $NOTIFY_SOCKET; a no-op when not started by systemd.
//   macOS (darwin/service_manager_darwin.cpp): launchd's KeepAlive needs
//     nothing, so both calls do nothing.
//
// Threading: any thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace mcdma::platform {

// "READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=..." (newline-separated).
void NotifyServiceManager(const std::string& state);
// The watchdog period the service manager asked for, if any.
std::optional<std::chrono::microseconds> WatchdogInterval();

}  // namespace mcdma::platform
