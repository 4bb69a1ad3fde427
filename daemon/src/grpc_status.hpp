// Status <-> grpc::Status at the gRPC boundary. The gRPC message carries
// "CODE_NAME: message" so a client recovers the exact mcdma Code.
#pragma once

#include <grpcpp/grpcpp.h>

#include "mcdma/status.hpp"

namespace mcdma::daemon {

inline grpc::StatusCode ToGrpcCode(Code c) {
  switch (c) {
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
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Code::kTimeout:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case Code::kBusy:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Code::kUnavailable:
    case Code::kLinkDown:
    case Code::kPeerGone:
      return grpc::StatusCode::UNAVAILABLE;
    case Code::kRevoked:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case Code::kCancelled:
      return grpc::StatusCode::CANCELLED;
    default:
      return grpc::StatusCode::INTERNAL;
  }
}

inline grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(s.code()), std::string(CodeName(s.code())) + ": " + s.message());
}

}  // namespace mcdma::daemon
