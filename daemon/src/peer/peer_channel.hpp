// The client side of one peer's Peer service: a gRPC channel, the mutual
// fabric-key authentication, and the ticket that authorizes this host's
// calls. Thread-safe: the link manager's threads and control-plane handlers
// (an app's lookup or resolution) share one channel per peer.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "mcdma/status.hpp"
#include "mcdma/v1/peer.grpc.pb.h"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::daemon {

// A failed peer call as a Status: the peer's "CODE_NAME: message" when it
// sent one, else UNAUTHENTICATED -> PERMISSION_DENIED, a full
// authentication gate (RESOURCE_EXHAUSTED) -> BUSY and an unreachable peer
// -> LINK_DOWN.
Status FromPeerGrpc(const grpc::Status& s, const std::string& peer);

class PeerChannel {
 public:
  using Millis = std::chrono::milliseconds;

  // `target`: host:port to dial; `expected_peer`: the host id it must prove
  // (empty: any). `creds`: TLS or insecure channel credentials.
  PeerChannel(std::string target, std::string expected_peer, std::string own_host_id,
              std::shared_ptr<const FabricKey> key,
              const std::shared_ptr<grpc::ChannelCredentials>& creds);

  const std::string& target() const { return target_; }

  // Authenticates now (replaces any ticket held). PERMISSION_DENIED "fabric
  // key mismatch ..." when either side's proof fails. One exchange at a time
  // per channel (auth_mu_).
  Status Authenticate(Millis timeout) MCDMA_EXCLUDES(mu_, auth_mu_);
  // Authenticates unless a ticket is held: a channel made ready before its
  // first request, so that request pays for no connect and no exchange.
  Status Warm(Millis timeout) MCDMA_EXCLUDES(mu_, auth_mu_) { return EnsureTicket("", timeout); }

  // Each call authenticates first if no ticket is held, and once more if the
  // peer answers UNAUTHENTICATED (it restarted, or the ticket expired).
  Result<v1::PeerHelloReply> Hello(const v1::PeerHelloRequest& req, Millis timeout);
  Result<v1::PeerConnectReply> Connect(const v1::PeerConnectRequest& req, Millis timeout);
  Result<v1::PeerAddRailReply> AddRail(const v1::PeerAddRailRequest& req, Millis timeout);
  Result<v1::PeerResolveExportReply> ResolveExport(const v1::PeerResolveExportRequest& req,
                                                   Millis timeout);
  Result<v1::PeerLookupServiceReply> LookupService(const v1::PeerLookupServiceRequest& req,
                                                   Millis timeout);
  Result<v1::PeerHeartbeatReply> Heartbeat(const v1::PeerHeartbeatRequest& req, Millis timeout);
  Status Goodbye(const v1::PeerGoodbyeRequest& req, Millis timeout);

 private:
  template <typename Req, typename Rep, typename Fn>
  Result<Rep> CallWithTicket(const Req& req, Millis timeout, Fn fn) MCDMA_EXCLUDES(mu_);
  std::string ticket() MCDMA_EXCLUDES(mu_);
  // Makes sure a ticket other than `refused` is held, authenticating only
  // when no other caller got one meanwhile.
  Status EnsureTicket(const std::string& refused, Millis timeout) MCDMA_EXCLUDES(mu_, auth_mu_);
  Status AuthenticateOnce(Millis timeout) MCDMA_REQUIRES(auth_mu_) MCDMA_EXCLUDES(mu_);

  const std::string target_;
  const std::string expected_peer_;
  const std::string own_host_id_;
  std::shared_ptr<const FabricKey> key_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Peer::Stub> stub_;

  // Taken for a whole authentication exchange, before mu_ (never the other
  // way round); mu_ guards only the ticket and is never held across a call.
  Mutex auth_mu_;
  Mutex mu_;
  std::string ticket_ MCDMA_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point ticket_renew_ MCDMA_GUARDED_BY(mu_);
};

}  // namespace mcdma::daemon
