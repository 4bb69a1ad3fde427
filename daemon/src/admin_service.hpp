// The Admin gRPC service (proto/mcdma/v1/admin.proto): read-only snapshots
// taken on the engine thread.
#pragma once

#include "engine.hpp"
#include "mcdma/v1/admin.grpc.pb.h"

namespace mcdma::daemon {

class AdminService final : public v1::Admin::Service {
 public:
  explicit AdminService(Engine& engine) : engine_(engine) {}
  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*,
                      v1::StatusReply* rep) override {
    return Snapshot([&] { engine_.FillStatus(rep); });
  }
  grpc::Status Sessions(grpc::ServerContext*, const v1::SessionsRequest*,
                        v1::SessionsReply* rep) override {
    return Snapshot([&] { engine_.FillSessions(rep); });
  }
  grpc::Status Exports(grpc::ServerContext*, const v1::ExportsRequest*,
                       v1::ExportsReply* rep) override {
    return Snapshot([&] { engine_.FillExports(rep); });
  }
  grpc::Status Buffers(grpc::ServerContext*, const v1::BuffersRequest*,
                       v1::BuffersReply* rep) override {
    return Snapshot([&] { engine_.FillBuffers(rep); });
  }

 private:
  template <typename F>
  grpc::Status Snapshot(F&& fill) {
    auto r = engine_.Run([&] {
      fill();
      return 0;
    });
    if (!r)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE: the daemon is stopping");
    return grpc::Status::OK;
  }
  Engine& engine_;
};

}  // namespace mcdma::daemon
