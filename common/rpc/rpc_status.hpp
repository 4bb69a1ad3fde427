// mcdma Status <-> grpc::Status, for every gRPC service and client of the
// project (control plane, admin plane, peer plane). The error's code and
// reason travel in the status details (proto/mcdma/v1/error.proto), so the
// receiver recovers them exactly without reading the message text.
#pragma once

#include <grpcpp/support/status.h>

#include <optional>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma::rpc {

// The gRPC code that fits an mcdma code (NOT_FOUND for kNotFound, ...).
grpc::StatusCode GrpcCodeFor(Code code);

// OK for OK; otherwise GrpcCodeFor(code), the text "CODE_NAME: message",
// and details carrying the code, reason and message.
grpc::Status ToGrpc(const Status& status);

// The mcdma Status a failed gRPC call carries in its details; nullopt when
// it carries none (the failure came from gRPC itself, or from a server that
// is not mcdma) or details that do not parse. A code this build does not
// know reads kInternal, an unknown reason kNone.
std::optional<Status> StatusFromGrpc(const grpc::Status& status);

// gRPC's name of a code ("UNKNOWN", "DEADLINE_EXCEEDED", ...), or its number.
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace mcdma::rpc
