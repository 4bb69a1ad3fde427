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

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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

// The pieces the roles above are made of, shared with mcdma_bench_link's
// TCP and gRPC-over-TCP rows.
//
// Stream framing: a u32 length (host order) then the payload. ReadFrame
// reads one whole frame into `buf` (resized to hold it) and returns its
// length; kPeerGone for a clean EOF between frames, kTimeout when the
// socket's SO_RCVTIMEO expires.
mcdma::Status SetSocketTimeouts(int fd, std::chrono::milliseconds timeout);
// With `spin` > 0 each read first polls (non-blocking, yielding the CPU)
// for up to `spin` before it blocks: the daemon's own wait policy.
mcdma::Result<uint32_t> ReadFrame(int fd, std::vector<std::byte>& buf,
                                  std::chrono::microseconds spin = {});
mcdma::Status WriteAll(int fd, const std::byte* data, size_t size);
// Server: echoes frames on connected `fd` until the client closes (exit code).
int EchoFrames(const RoleOptions& options, int fd, std::chrono::microseconds spin = {});
// Client: the timed round trips of every payload over connected `fd`, then
// the sample file (exit code).
int TimeFrames(const RoleOptions& options, int fd, std::chrono::microseconds spin = {});
// gRPC echo server on `listen_uri` ("unix:PATH", "HOST:0"); with
// `report_port` the kernel-chosen port goes down the ready pipe
// (SignalReadyPort). Serves until the lifeline closes.
int RunGrpcEchoServer(const RoleOptions& options, const std::string& listen_uri, bool report_port);
// gRPC echo client of `target_uri` (HTTP proxies off).
int RunGrpcEchoClient(const RoleOptions& options, const std::string& target_uri);

}  // namespace bench
