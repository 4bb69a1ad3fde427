// AdminClient: mcdmactl's connection to the daemon's Admin gRPC service.
//
// Ownership: one AdminClient owns one gRPC channel to the daemon's Unix
// socket; it is used from mcdmactl's main thread only. Construction never
// fails: gRPC connects lazily, so an unreachable daemon shows up as the
// Result of the first request.
//
// Failure: nothing throws. A request that gRPC could not deliver (no socket,
// permission denied, connection refused) is Code::kUnavailable; one that ran
// past the deadline is kTimeout; a request the daemon rejected keeps the
// daemon's message and maps to kInternal (or kInvalid for an unimplemented
// method, i.e. a daemon older than this tool). The message is gRPC's own text.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "mcdma/status.hpp"
#include "mcdma/v1/admin.grpc.pb.h"

namespace mcdma::tools {

class AdminClient {
 public:
  // `socket_path` is a filesystem path (not a gRPC target). `timeout` bounds
  // each request, connecting included.
  AdminClient(std::string socket_path, std::chrono::milliseconds timeout);

  const std::string& socket_path() const { return socket_path_; }

  Result<v1::StatusReply> GetStatus();
  Result<v1::SessionsReply> ListSessions();
  Result<v1::ExportsReply> ListExports();
  Result<v1::BuffersReply> ListBuffers();

 private:
  // Runs one unary Admin request under the per-request deadline and turns a
  // gRPC failure into a Status.
  template <typename Request, typename Reply, typename Method>
  Result<Reply> Invoke(Method method);

  std::string socket_path_;
  std::chrono::milliseconds timeout_;
  // Declared after the channel it was made from, so it is destroyed first.
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> stub_;
};

}  // namespace mcdma::tools
