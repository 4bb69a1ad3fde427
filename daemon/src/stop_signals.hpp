// SIGTERM and SIGINT ask mcdma-rpcd to drain and stop. They are blocked in
// every thread (the mask is inherited, so block them before any thread
// starts) and taken by the main thread's WaitForStopSignal().
#pragma once

#include <string>

namespace mcdma::daemon {

// Blocks SIGTERM and SIGINT in the calling thread and ignores SIGPIPE.
void BlockStopSignals();

// Waits for SIGTERM or SIGINT; returns its name ("Terminated").
std::string WaitForStopSignal();

}  // namespace mcdma::daemon
