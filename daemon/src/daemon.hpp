// The daemon process: logging, the control socket, the engine, the gRPC
// server, signals, service-manager notifications and draining.
#pragma once

#include <memory>

#include "mcdma/status.hpp"
#include "options.hpp"

namespace mcdma::daemon {

// Sets up spdlog loggers ("daemon", "engine", "control") at `level`.
void SetUpLogging(const std::string& level);

// Runs the daemon until SIGTERM/SIGINT, then drains and returns. Signals
// must already be blocked in the calling thread (so every thread inherits
// the mask and only the waiting thread receives them).
// Returns non-OK if it could not start (socket in use, bad device...).
Status RunDaemon(const Options& options);

}  // namespace mcdma::daemon
