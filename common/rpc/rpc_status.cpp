#include "rpc/rpc_status.hpp"

#include <string>

#include "mcdma/v1/error.pb.h"

namespace mcdma::rpc {

grpc::StatusCode GrpcCodeFor(Code code) {
  switch (code) {
    case Code::kOk:
      return grpc::StatusCode::OK;
    case Code::kInvalid:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case Code::kOutOfRange:
      return grpc::StatusCode::OUT_OF_RANGE;
    case Code::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case Code::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case Code::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case Code::kNoMemory:
    case Code::kBusy:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Code::kTimeout:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case Code::kUnavailable:
    case Code::kLinkDown:
    case Code::kPeerGone:
      return grpc::StatusCode::UNAVAILABLE;
    case Code::kRevoked:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case Code::kCancelled:
      return grpc::StatusCode::CANCELLED;
    case Code::kInternal:
    case Code::kSystem:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const grpc::StatusCode code = GrpcCodeFor(status.code());
  v1::ErrorDetail detail;
  detail.set_code(static_cast<uint32_t>(status.code()));
  detail.set_reason(static_cast<uint32_t>(status.reason()));
  v1::RpcStatus rpc;
  rpc.set_code(static_cast<int32_t>(code));
  rpc.set_message(status.message());
  rpc.add_details()->PackFrom(detail);
  return grpc::Status(code, std::string(CodeName(status.code())) + ": " + status.message(),
                      rpc.SerializeAsString());
}

std::optional<Status> StatusFromGrpc(const grpc::Status& status) {
  if (status.ok()) return Status::Ok();
  if (status.error_details().empty()) return std::nullopt;
  v1::RpcStatus rpc;
  if (!rpc.ParseFromString(status.error_details())) return std::nullopt;
  for (const auto& any : rpc.details()) {
    v1::ErrorDetail detail;
    if (!any.Is<v1::ErrorDetail>() || !any.UnpackTo(&detail)) continue;
    Code code = CodeFromWire(detail.code());
    // An error detail that says OK is no error: the server is broken.
    if (code == Code::kOk) code = Code::kInternal;
    return Status(code, ReasonFromWire(detail.reason()), rpc.message());
  }
  return std::nullopt;
}

std::string GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      break;
  }
  return "gRPC code " + std::to_string(static_cast<int>(code));
}

}  // namespace mcdma::rpc
