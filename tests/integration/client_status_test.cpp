// How libmcdma reads a failed control-plane request (internal::FromGrpc):
// the daemon's own errors carry their mcdma code in the status details;
// one without them failed in gRPC on the way to the daemon, which an app
// must see as UNAVAILABLE (the daemon could not be asked), never INTERNAL.
#include <gtest/gtest.h>

#include "client_core.hpp"
#include "rpc/rpc_status.hpp"

namespace mcdma::itest {
namespace {

TEST(ClientFromGrpc, AFailureWithoutDetailsIsUnavailableNotInternal) {
  for (grpc::StatusCode c :
       {grpc::StatusCode::CANCELLED, grpc::StatusCode::UNKNOWN, grpc::StatusCode::INTERNAL,
        grpc::StatusCode::ABORTED, grpc::StatusCode::RESOURCE_EXHAUSTED,
        grpc::StatusCode::DATA_LOSS, grpc::StatusCode::UNIMPLEMENTED, grpc::StatusCode::UNAVAILABLE,
        grpc::StatusCode::DEADLINE_EXCEEDED}) {
    Status st = internal::FromGrpc(grpc::Status(c, "Stream removed"));
    EXPECT_EQ(st.code(), Code::kUnavailable) << rpc::GrpcCodeName(c) << ": " << st.ToString();
    EXPECT_NE(st.message().find("Stream removed"), std::string::npos) << st.ToString();
  }
}

TEST(ClientFromGrpc, TheDaemonsOwnCodesComeBackExactly) {
  for (Code code : {Code::kInternal, Code::kNotFound, Code::kLinkDown, Code::kBusy}) {
    Status sent(code, "from the daemon");
    Status st = internal::FromGrpc(rpc::ToGrpc(sent));
    EXPECT_EQ(st.code(), code) << st.ToString();
  }
  EXPECT_TRUE(internal::FromGrpc(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace mcdma::itest
