// Everything peering adds to a daemon, started together: the link transport
// device (tcp), the Peer gRPC server on `listen` (TLS when configured), and
// the link manager.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "config/options.hpp"
#include "driver/transport.hpp"
#include "engine/engine.hpp"
#include "fabric/membership.hpp"
#include "listener.hpp"
#include "mcdma_auth/fabric_key.hpp"
#include "peer/link_manager.hpp"
#include "peer/peer_service.hpp"

namespace mcdma::daemon {

// The tcp device on data_listen (default: listen's host, any port).
Result<std::unique_ptr<driver::Device>> CreateLinkDevice(const Options& options);

class PeerPlane {
 public:
  static Result<std::unique_ptr<PeerPlane>> Start(const Options& options, Engine& engine,
                                                  const std::shared_ptr<const FabricKey>& key);
  ~PeerPlane();
  PeerPlane(const PeerPlane&) = delete;
  PeerPlane& operator=(const PeerPlane&) = delete;

  LinkManager& links() { return *links_; }
  // Fabric membership, or null when neither fabric.store nor fabric.file
  // is set.
  fabric::Membership* membership() { return membership_.get(); }
  // The peer port's listener (connection caps, refusals) and service
  // (authentication figures), for status.
  const Listener& listener() const { return *listener_; }
  const PeerServiceImpl& service() const { return *service_; }
  const std::string& listen_address() const { return listen_; }
  // Goodbye to peers, stop the links, stop serving peers. Idempotent.
  void Stop();

 private:
  PeerPlane() = default;
  std::string listen_;
  // Accepts the peer port's connections and hands them to server_ through
  // acceptor_ (listener.hpp); stopped before the server shuts down.
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::unique_ptr<LinkManager> links_;
  std::unique_ptr<fabric::Membership> membership_;
  std::unique_ptr<PeerServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  bool stopped_ = false;
};

}  // namespace mcdma::daemon
