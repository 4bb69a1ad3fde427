// The socket baselines the daemon's calls are measured against, shared by
// mcdma_bench_local (over a Unix socket) and mcdma_bench_link (over TCP).
// Each is a pair of roles run as two separate processes: a server that
// echoes every request and a client that times round trips
// (harness/round_trips.hpp) and writes its samples to RoleOptions::out.
// Every role returns a process exit code: 0 ok, 1 failure (the reason goes
// to stderr).
//
//   uds   Unix stream socket (socketpair handed down by the orchestrator),
//         a 4-byte length prefix per frame, blocking reads with timeouts.
//   grpc  gRPC unary call (bench/baselines/echo.proto) over a Unix socket.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/endpoint.hpp"
#include "mcdma/status.hpp"

namespace mcdma::bench {

using harness::RoleOptions;

int RunUdsServer(const RoleOptions& options);
int RunUdsClient(const RoleOptions& options);

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

}  // namespace mcdma::bench
