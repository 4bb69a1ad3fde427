#include "admin_client.hpp"

#include <grpcpp/grpcpp.h>

#include <utility>

namespace mcdma::tools {
namespace {

// gRPC codes fold into the few outcomes mcdmactl reports differently: "cannot
// reach" (kUnavailable), "no answer in time" (kTimeout), "daemon too old"
// (kInvalid), and everything else.
Code FromGrpc(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
      return Code::kUnavailable;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Code::kTimeout;
    case grpc::StatusCode::UNIMPLEMENTED:
      return Code::kInvalid;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Code::kPermissionDenied;
    default:
      return Code::kInternal;
  }
}

}  // namespace

AdminClient::AdminClient(std::string socket_path, std::chrono::milliseconds timeout)
    : socket_path_(std::move(socket_path)),
      timeout_(timeout),
      // The socket's file mode is the access control; there is nothing to
      // encrypt on a local socket.
      channel_(grpc::CreateChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials())),
      stub_(v1::Admin::NewStub(channel_)) {}

template <typename Request, typename Reply, typename Method>
Result<Reply> AdminClient::Invoke(Method method) {
  grpc::ClientContext context;
  // No wait_for_ready: a missing or refusing socket must fail at once with
  // UNAVAILABLE rather than wait out the whole deadline.
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  Request request;
  Reply reply;
  grpc::Status status = ((*stub_).*method)(&context, request, &reply);
  if (!status.ok()) {
    return Status(FromGrpc(status.error_code()), status.error_message());
  }
  return reply;
}

Result<v1::StatusReply> AdminClient::GetStatus() {
  return Invoke<v1::StatusRequest, v1::StatusReply>(&v1::Admin::Stub::Status);
}

Result<v1::SessionsReply> AdminClient::ListSessions() {
  return Invoke<v1::SessionsRequest, v1::SessionsReply>(&v1::Admin::Stub::Sessions);
}

Result<v1::ExportsReply> AdminClient::ListExports() {
  return Invoke<v1::ExportsRequest, v1::ExportsReply>(&v1::Admin::Stub::Exports);
}

Result<v1::BuffersReply> AdminClient::ListBuffers() {
  return Invoke<v1::BuffersRequest, v1::BuffersReply>(&v1::Admin::Stub::Buffers);
}

}  // namespace mcdma::tools
