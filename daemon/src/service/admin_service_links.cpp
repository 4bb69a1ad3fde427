// The Admin service's link calls (mcdmactl links / link add|remove|test).
#include "fabric/membership.hpp"
#include "peer/link_manager.hpp"
#include "service/admin_service.hpp"
#include "service/grpc_status.hpp"

namespace mcdma::daemon {
namespace {
grpc::Status PeeringOff() {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "UNAVAILABLE: peering is off: no fabric_key is configured (create one with "
                      "`mcdmactl fabric-key new PATH`, start mcdma-rpcd with --fabric-key PATH)");
}
}  // namespace

grpc::Status AdminService::Links(grpc::ServerContext*, const v1::LinksRequest*,
                                 v1::LinksReply* rep) {
  if (links_ == nullptr) {
    rep->set_host_id(engine_.options().host_id);
    rep->set_peering(false);
    return grpc::Status::OK;
  }
  links_->Fill(rep);
  return grpc::Status::OK;
}

grpc::Status AdminService::LinkAdd(grpc::ServerContext*, const v1::LinkAddRequest* req,
                                   v1::LinkAddReply*) {
  if (links_ == nullptr) return PeeringOff();
  PeerConfig peer;
  peer.name = req->peer();
  peer.address = req->address();
  peer.transport = req->transport().empty() ? "auto" : req->transport();
  return ToGrpc(links_->Add(peer));
}

grpc::Status AdminService::LinkRemove(grpc::ServerContext*, const v1::LinkRemoveRequest* req,
                                      v1::LinkRemoveReply*) {
  if (links_ == nullptr) return PeeringOff();
  return ToGrpc(links_->Remove(req->peer()));
}

grpc::Status AdminService::LinkTest(grpc::ServerContext*, const v1::LinkTestRequest* req,
                                    v1::LinkTestReply* rep) {
  if (links_ == nullptr) return PeeringOff();
  auto r = links_->Test(req->peer(), req->bytes(), req->count());
  if (!r.ok()) return ToGrpc(r.status());
  *rep = std::move(r).value();
  return grpc::Status::OK;
}

grpc::Status AdminService::Fabric(grpc::ServerContext*, const v1::FabricRequest*,
                                  v1::FabricReply* rep) {
  rep->set_host_id(engine_.options().host_id);
  if (membership_ == nullptr) return grpc::Status::OK;  // source "": no fabric
  membership_->Fill(rep);
  return grpc::Status::OK;
}

}  // namespace mcdma::daemon
