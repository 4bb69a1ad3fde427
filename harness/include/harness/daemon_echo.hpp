// The mechanism every benchmark compares the others with: a call through
// mcdma-rpcd. The server role opens a session and serves "bench.echo" (the
// handler replies with the request's bytes); the client role opens its own
// session and calls it in a loop (round_trips.hpp). Both connect to the
// daemon the orchestrator started, retrying Connect while it comes up.
//
// Threading: the role's thread (and the Client's own threads).
#pragma once

#include <memory>
#include <string>

#include "harness/child.hpp"
#include "harness/endpoint.hpp"
#include "mcdma/client.hpp"

namespace mcdma::harness {

inline constexpr char kEchoService[] = "bench.echo";
// The daemon is "ready" only once a session opens, which can lag the socket
// accepting; until this passes every failed Connect is retried.
inline constexpr Millis kConnectRetry(10000);

Result<std::unique_ptr<Client>> ConnectWithRetry(const ClientOptions& options,
                                                 Millis retry = kConnectRetry);
Result<std::unique_ptr<Client>> ConnectWithRetry(const std::string& socket,
                                                 const std::string& app_name);

// Serves kEchoService on options.socket's daemon until the lifeline closes.
int RunDaemonServer(const RoleOptions& options);
// Calls kEchoService for every payload and writes the samples.
int RunDaemonClient(const RoleOptions& options);

}  // namespace mcdma::harness
