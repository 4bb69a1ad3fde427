// The Admin gRPC service (proto/mcdma/v1/admin.proto): read-only snapshots
// taken on the engine thread.
#pragma once

#include "engine/engine.hpp"
#include "listener.hpp"
#include "mcdma/v1/admin.grpc.pb.h"

namespace mcdma::daemon {

class LinkManager;
class PeerServiceImpl;
namespace fabric {
class Membership;
}

class AdminService final : public v1::Admin::Service {
 public:
  // `links`: null when peering is off.
  explicit AdminService(Engine& engine, LinkManager* links = nullptr)
      : engine_(engine), links_(links) {}
  // The listeners whose figures Status reports (either may be null).
  void SetListeners(const Listener* control, const Listener* peer) {
    control_listener_ = control;
    peer_listener_ = peer;
  }
  // The peer service, for its authentication figures (null: peering off).
  void SetPeerService(const PeerServiceImpl* peer) { peer_service_ = peer; }
  // Fabric membership (null: no fabric.store or fabric.file).
  void SetMembership(fabric::Membership* membership) { membership_ = membership; }
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
  grpc::Status Fabric(grpc::ServerContext*, const v1::FabricRequest*,
                      v1::FabricReply* rep) override;
  // admin_service.cpp
  grpc::Status Trace(grpc::ServerContext*, const v1::TraceRequest* req,
                     v1::TraceReply* rep) override;

 private:
  Engine& engine_;
  LinkManager* links_;
  const Listener* control_listener_ = nullptr;
  const Listener* peer_listener_ = nullptr;
  const PeerServiceImpl* peer_service_ = nullptr;
  fabric::Membership* membership_ = nullptr;
};

}  // namespace mcdma::daemon
