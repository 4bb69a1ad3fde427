// The Peer gRPC service (proto/mcdma/v1/peer.proto) that other daemons call:
// Authenticate answers anyone; every other call first checks the caller's
// ticket and is answered for the ticket's host id only.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "engine/engine.hpp"
#include "mcdma/v1/peer.grpc.pb.h"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdma_auth/peer_auth.hpp"
#include "peer/auth_gate.hpp"
#include "peer/link_manager.hpp"

namespace mcdma::daemon {

class PeerServiceImpl final : public v1::Peer::Service {
 public:
  // Authentication is bounded by `auth` (per address, stage deadline).
  PeerServiceImpl(Engine& engine, LinkManager& links, std::shared_ptr<const FabricKey> key,
                  std::string host_id, uint32_t auth_per_address,
                  std::chrono::milliseconds auth_stage_timeout);

  grpc::Status Authenticate(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::AuthResponse, v1::AuthRequest>* stream) override;
  grpc::Status Hello(grpc::ServerContext* ctx, const v1::PeerHelloRequest* req,
                     v1::PeerHelloReply* rep) override;
  grpc::Status Connect(grpc::ServerContext* ctx, const v1::PeerConnectRequest* req,
                       v1::PeerConnectReply* rep) override;
  grpc::Status AddRail(grpc::ServerContext* ctx, const v1::PeerAddRailRequest* req,
                       v1::PeerAddRailReply* rep) override;
  grpc::Status ResolveExport(grpc::ServerContext* ctx, const v1::PeerResolveExportRequest* req,
                             v1::PeerResolveExportReply* rep) override;
  grpc::Status LookupService(grpc::ServerContext* ctx, const v1::PeerLookupServiceRequest* req,
                             v1::PeerLookupServiceReply* rep) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::PeerHeartbeatRequest* req,
                         v1::PeerHeartbeatReply* rep) override;
  grpc::Status Goodbye(grpc::ServerContext* ctx, const v1::PeerGoodbyeRequest* req,
                       v1::PeerGoodbyeReply* rep) override;

  // Calls refused for a missing or bad ticket, and failed authentications.
  uint64_t refused() const { return refused_.load(); }
  AuthFigures auth_figures() const { return gate_.figures(); }

 private:
  // The caller's host id from its ticket; UNAUTHENTICATED otherwise.
  Result<std::string> Caller(grpc::ServerContext* ctx);

  Engine& engine_;
  LinkManager& links_;
  std::shared_ptr<const FabricKey> key_;
  const std::string host_id_;
  peer_auth::TicketBook tickets_;
  AuthGate gate_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace mcdma::daemon
