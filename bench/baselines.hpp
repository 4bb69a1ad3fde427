// The alternatives the daemon's local call is measured against. Each is a
// pair of roles run as two separate processes: a server that echoes every
// request and a client that times round trips (harness.hpp) and writes its
// samples to RoleOptions::out. Every role returns a process exit code:
// 0 ok, 1 failure (the reason goes to stderr).
//
//   uds   Unix stream socket (socketpair handed down by the orchestrator),
//         a 4-byte length prefix per frame, blocking reads with timeouts.
//   shm   a raw shared-memory ping-pong in a memfd: one slot per direction,
//         wait = spin with sched_yield for ~50 us, then sleep on a futex.
//   grpc  gRPC unary call (bench/echo.proto) over a Unix socket.
#pragma once

#include <cstddef>

#include "harness.hpp"
#include "process.hpp"

namespace bench {

int RunUdsServer(const RoleOptions& options);
int RunUdsClient(const RoleOptions& options);

// Orchestrator side of the shm baseline: a zeroed memfd segment (close-on-
// exec; hand it to both children) with room for `max_payload` each way.
mcdma::Result<Fd> CreateShmSegment(size_t max_payload);
int RunShmServer(const RoleOptions& options);
int RunShmClient(const RoleOptions& options);

int RunGrpcServer(const RoleOptions& options);
int RunGrpcClient(const RoleOptions& options);

}  // namespace bench
