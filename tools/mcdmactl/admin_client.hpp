// AdminClient: mcdmactl's connection to the daemon's Admin gRPC service.
//
// Ownership: one AdminClient owns one gRPC channel to the daemon's Unix
// socket; it is used from mcdmactl's main thread only. Construction never
// fails: gRPC connects lazily, so an unreachable daemon shows up as the
// Result of the first request.
//
// Failure: nothing throws. An error the daemon answered with carries its
// "CODE_NAME: message" (daemon/src/service/grpc_status.hpp): the Status gets that
// code and message back and last_error_from_daemon() is true. Otherwise the
// message is gRPC's own text: a request gRPC could not deliver (no socket,
// permission denied, connection refused) is Code::kUnavailable; one that ran
// past the deadline is kTimeout; an unimplemented method (a daemon older than
// this tool) is kInvalid; anything else is kInternal.
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
  Result<v1::LinksReply> ListLinks();
  Result<v1::FabricReply> Fabric();
  // `transport` is "auto", "tcp" or "verbs"; the daemon validates all three.
  Result<v1::LinkAddReply> AddLink(const std::string& peer, const std::string& address,
                                   const std::string& transport);
  Result<v1::LinkRemoveReply> RemoveLink(const std::string& peer);
  Result<v1::LinkTestReply> TestLink(const v1::LinkTestRequest& request);
  Result<v1::TraceReply> Trace(const v1::TraceRequest& request);

  // Whether the last request that failed was refused by the daemon itself
  // (true) rather than lost on the way (false). Reset by every request.
  bool last_error_from_daemon() const { return last_error_from_daemon_; }

 private:
  // Runs one unary Admin request under the per-request deadline and turns a
  // gRPC failure into a Status.
  template <typename Reply, typename Request, typename Method>
  Result<Reply> Invoke(Method method, const Request& request);

  std::string socket_path_;
  std::chrono::milliseconds timeout_;
  // Declared after the channel it was made from, so it is destroyed first.
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> stub_;
  bool last_error_from_daemon_ = false;
};

}  // namespace mcdma::tools
