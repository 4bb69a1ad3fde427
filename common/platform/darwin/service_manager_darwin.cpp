// launchd keeps the daemon alive (KeepAlive in the plist) and needs no
// readiness or watchdog messages.
#include "platform/service_manager.hpp"

namespace mcdma::platform {

void NotifyServiceManager(const std::string& /*state*/) {}

std::optional<std::chrono::microseconds> WatchdogInterval() { return std::nullopt; }

}  // namespace mcdma::platform
