// The mechanism under test: a call through mcdma-rpcd on this host. The
// server role opens a session and serves "bench.echo" (the handler replies
// with the request's bytes); the client role opens its own session and
// calls it in a loop. Both connect to the daemon the orchestrator started,
// retrying Connect for up to kConnectRetry while it comes up.
#pragma once

#include <chrono>

#include "harness.hpp"
#include "mcdma/client.hpp"

namespace bench {

inline constexpr char kEchoService[] = "bench.echo";
inline constexpr auto kConnectRetry = std::chrono::seconds(10);

// Connect to options.socket, retried on every failure for kConnectRetry.
mcdma::Result<std::unique_ptr<mcdma::Client>> ConnectWithRetry(const RoleOptions& options,
                                                               const char* app_name);

int RunDaemonServer(const RoleOptions& options);
int RunDaemonClient(const RoleOptions& options);

}  // namespace bench
