// The Admin gRPC service (proto/mcdma/v1/admin.proto): read-only snapshots
// taken on the engine thread.
#pragma once

#include "engine.hpp"
#include "mcdma/v1/admin.grpc.pb.h"

namespace mcdma::daemon {

class LinkManager;

class AdminService final : public v1::Admin::Service {
 public:
  // `links`: null when peering is off.
  explicit AdminService(Engine& engine, LinkManager* links = nullptr)
      : engine_(engine), links_(links) {}
  // admin_service.cpp: the engine's snapshots, converted.
  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*,
                      v1::StatusReply* out) override;
  grpc::Status Sessions(grpc::ServerContext*, const v1::SessionsRequest*,
                        v1::SessionsReply* out) override;
  grpc::Status Exports(grpc::ServerContext*, const v1::ExportsRequest*,
                       v1::ExportsReply* out) override;
  grpc::Status Buffers(grpc::ServerContext*, const v1::BuffersRequest*,
                       v1::BuffersReply* out) override;
  // admin_links.cpp
  grpc::Status Links(grpc::ServerContext*, const v1::LinksRequest*, v1::LinksReply* rep) override;
  grpc::Status LinkAdd(grpc::ServerContext*, const v1::LinkAddRequest* req,
                       v1::LinkAddReply*) override;
  grpc::Status LinkRemove(grpc::ServerContext*, const v1::LinkRemoveRequest* req,
                          v1::LinkRemoveReply*) override;
  grpc::Status LinkTest(grpc::ServerContext*, const v1::LinkTestRequest* req,
                        v1::LinkTestReply* rep) override;

 private:
  Engine& engine_;
  LinkManager* links_;
};

}  // namespace mcdma::daemon
