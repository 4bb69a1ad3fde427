#include "admin_client.hpp"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string_view>
#include <utility>

#include "platform/names.hpp"
#include "rpc/rpc_status.hpp"

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

template <typename Reply, typename Request, typename Method>
Result<Reply> AdminClient::Invoke(Method method, const Request& request) {
  last_error_from_daemon_ = false;
  grpc::ClientContext context;
  // No wait_for_ready: a missing or refusing socket must fail at once with
  // UNAVAILABLE rather than wait out the whole deadline.
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  Reply reply;
  grpc::Status status = ((*stub_).*method)(&context, request, &reply);
  if (status.ok()) return reply;
  // An unknown method is gRPC's answer, not the daemon's, whatever its text.
  if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
    if (auto refused = rpc::StatusFromGrpc(status)) {
      last_error_from_daemon_ = true;
      return *std::move(refused);
    }
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    MCDMA_RETURN_IF_ERROR(platform::CheckSocketAccess(socket_path_));
  }
  return Status(FromGrpc(status.error_code()), status.error_message());
}

Result<v1::StatusReply> AdminClient::GetStatus() {
  return Invoke<v1::StatusReply>(&v1::Admin::Stub::Status, v1::StatusRequest());
}

Result<v1::SessionsReply> AdminClient::ListSessions() {
  return Invoke<v1::SessionsReply>(&v1::Admin::Stub::Sessions, v1::SessionsRequest());
}

Result<v1::ExportsReply> AdminClient::ListExports() {
  return Invoke<v1::ExportsReply>(&v1::Admin::Stub::Exports, v1::ExportsRequest());
}

Result<v1::BuffersReply> AdminClient::ListBuffers() {
  return Invoke<v1::BuffersReply>(&v1::Admin::Stub::Buffers, v1::BuffersRequest());
}

Result<v1::LinksReply> AdminClient::ListLinks() {
  return Invoke<v1::LinksReply>(&v1::Admin::Stub::Links, v1::LinksRequest());
}

Result<v1::FabricReply> AdminClient::Fabric() {
  return Invoke<v1::FabricReply>(&v1::Admin::Stub::Fabric, v1::FabricRequest());
}

Result<v1::LinkAddReply> AdminClient::AddLink(const std::string& peer, const std::string& address,
                                              const std::string& transport) {
  v1::LinkAddRequest request;
  request.set_peer(peer);
  request.set_address(address);
  request.set_transport(transport);
  return Invoke<v1::LinkAddReply>(&v1::Admin::Stub::LinkAdd, request);
}

Result<v1::LinkRemoveReply> AdminClient::RemoveLink(const std::string& peer) {
  v1::LinkRemoveRequest request;
  request.set_peer(peer);
  return Invoke<v1::LinkRemoveReply>(&v1::Admin::Stub::LinkRemove, request);
}

Result<v1::LinkTestReply> AdminClient::TestLink(const v1::LinkTestRequest& request) {
  return Invoke<v1::LinkTestReply>(&v1::Admin::Stub::LinkTest, request);
}

Result<v1::TraceReply> AdminClient::Trace(const v1::TraceRequest& request) {
  return Invoke<v1::TraceReply>(&v1::Admin::Stub::Trace, request);
}

}  // namespace mcdma::tools
