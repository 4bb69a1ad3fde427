// The Control gRPC service (proto/mcdma/v1/control.proto). Handlers run on
// gRPC's threads and reach the engine only through Engine::Run.
#pragma once

#include "engine/engine.hpp"
#include "listener.hpp"
#include "mcdma/v1/control.grpc.pb.h"

namespace mcdma::daemon {

class LinkManager;

class ControlService final : public v1::Control::Service {
 public:
  // `links`: null when peering is off. `listener`: the control socket's,
  // which tells who (uid, pid) is at the other end of a call's connection;
  // null only in tests that serve without one (then Hello's own uid and
  // pid are taken).
  explicit ControlService(Engine& engine, LinkManager* links = nullptr,
                          const Listener* listener = nullptr)
      : engine_(engine), links_(links), listener_(listener) {}

  grpc::Status OpenSession(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::SessionEvent, v1::SessionRequest>* stream) override;
  grpc::Status Alloc(grpc::ServerContext*, const v1::AllocRequest*, v1::AllocReply*) override;
  grpc::Status Free(grpc::ServerContext*, const v1::FreeRequest*, v1::FreeReply*) override;
  grpc::Status Export(grpc::ServerContext*, const v1::ExportRequest*, v1::ExportReply*) override;
  grpc::Status Unexport(grpc::ServerContext*, const v1::UnexportRequest*,
                        v1::UnexportReply*) override;
  grpc::Status Resolve(grpc::ServerContext*, const v1::ResolveRequest*, v1::ResolveReply*) override;
  grpc::Status ReleaseRemote(grpc::ServerContext*, const v1::ReleaseRemoteRequest*,
                             v1::ReleaseRemoteReply*) override;
  grpc::Status Serve(grpc::ServerContext*, const v1::ServeRequest*, v1::ServeReply*) override;
  grpc::Status Unserve(grpc::ServerContext*, const v1::UnserveRequest*, v1::UnserveReply*) override;
  grpc::Status LookupService(grpc::ServerContext*, const v1::LookupServiceRequest*,
                             v1::LookupServiceReply*) override;

 private:
  // Checks the session token, then runs fn (returning Status) on the engine.
  template <typename F>
  grpc::Status WithSession(const v1::SessionRef& ref, F&& fn);

  // Whether `peer` names another host (not empty, not this host's id).
  bool IsRemote(const std::string& peer) const;

  Engine& engine_;
  LinkManager* links_;
  const Listener* listener_;
};

}  // namespace mcdma::daemon
