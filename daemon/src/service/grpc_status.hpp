// Status -> grpc::Status at the daemon's gRPC boundary: the code and reason
// travel in the status details (common/rpc/rpc_status.hpp), the text
// "CODE_NAME: message" is for people and logs.
#pragma once

#include "rpc/rpc_status.hpp"

namespace mcdma::daemon {

using rpc::ToGrpc;

}  // namespace mcdma::daemon
