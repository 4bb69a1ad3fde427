#include "peer/peer_channel.hpp"

#include "mcdma_auth/peer_auth.hpp"
#include "rpc/rpc_status.hpp"

namespace mcdma::daemon {
namespace {

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

}  // namespace

Status FromPeerGrpc(const grpc::Status& s, const std::string& peer) {
  if (s.ok()) return Status::Ok();
  if (auto carried = rpc::StatusFromGrpc(s)) {
    return Status(carried->code(), carried->reason(), "peer '" + peer + "': " + carried->message());
  }
  const std::string& m = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status(Code::kPermissionDenied, "peer '" + peer + "' refused us: " + m);
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status(Code::kPermissionDenied, "peer '" + peer + "': " + m);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status(Code::kInvalid, "peer '" + peer + "': " + m);
    case grpc::StatusCode::FAILED_PRECONDITION:
      // A stale generation or a request out of order: retry from Hello.
      return Status(Code::kLinkDown, "peer '" + peer + "' refused the step: " + m);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      // The peer's authentication gate is full (auth_gate.hpp): a named
      // retry-later, never INTERNAL.
      return Status(Code::kBusy, "peer '" + peer + "' is busy: " + m);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return Status(Code::kLinkDown, "peer '" + peer + "' is unreachable: " + m);
    default:
      // No mcdma details: gRPC itself failed the call (a stream torn down
      // as UNKNOWN "Stream removed", a broken HTTP/2 frame as INTERNAL...),
      // or a server that is not mcdma answered. Either way the path to the
      // peer failed, which is a link's failure; never an INTERNAL of ours.
      return Status(Code::kLinkDown, "peer '" + peer + "': the call failed in gRPC (" +
                                         rpc::GrpcCodeName(s.error_code()) + "): " + m);
  }
}

PeerChannel::PeerChannel(std::string target, std::string expected_peer, std::string own_host_id,
                         std::shared_ptr<const FabricKey> key,
                         const std::shared_ptr<grpc::ChannelCredentials>& creds)
    : target_(std::move(target)),
      expected_peer_(std::move(expected_peer)),
      own_host_id_(std::move(own_host_id)),
      key_(std::move(key)) {
  grpc::ChannelArguments args;
  // Reconnect quickly once the peer is back; the link manager paces retries.
  // gRPC takes the "min reconnect backoff" as the least time one connection
  // attempt may take: at 100 ms a loaded (or emulated) host failed its
  // first calls with "Handshaker shutdown" before the handshake was done.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(16 << 20);
  channel_ = grpc::CreateCustomChannel(target_, creds, args);
  stub_ = v1::Peer::NewStub(channel_);
}

std::string PeerChannel::ticket() {
  MutexLock lock(mu_);
  if (std::chrono::steady_clock::now() >= ticket_renew_) ticket_.clear();
  return ticket_;
}

Status PeerChannel::Authenticate(Millis timeout) {
  MutexLock single(auth_mu_);
  return AuthenticateOnce(timeout);
}

Status PeerChannel::EnsureTicket(const std::string& refused, Millis timeout) {
  // One exchange at a time per channel: callers that find no ticket (or had
  // `refused` turned down) queue here, and all but the first find the ticket
  // the first one got. Without this, every app's lookup in the same moment
  // ran an exchange of its own and the peer's gate refused the surplus.
  MutexLock single(auth_mu_);
  if (std::string t = ticket(); !t.empty() && t != refused) return Status::Ok();
  return AuthenticateOnce(timeout);
}

Status PeerChannel::AuthenticateOnce(Millis timeout) {
  std::string name = expected_peer_.empty() ? target_ : expected_peer_;
  MCDMA_ASSIGN_OR_RETURN(auto initiator,
                         peer_auth::Initiator::Create(key_, own_host_id_, expected_peer_));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  auto stream = stub_->Authenticate(&ctx);
  v1::AuthRequest hello;
  hello.mutable_hello()->set_version(initiator.hello().version);
  hello.mutable_hello()->set_host_id(initiator.hello().host_id);
  hello.mutable_hello()->set_nonce(initiator.hello().nonce);
  v1::AuthResponse resp;
  auto finish = [&](const std::string& step) -> Status {
    stream->WritesDone();
    grpc::Status gs = stream->Finish();
    if (!gs.ok()) {
      Status st = FromPeerGrpc(gs, name);
      return Status(st.code(), st.message() + " (" + step + ")");
    }
    return Status(Code::kLinkDown, "peer '" + name + "' ended authentication early (" + step + ")");
  };
  if (!stream->Write(hello) || !stream->Read(&resp) || !resp.has_challenge())
    return finish("waiting for the challenge");
  peer_auth::Challenge ch;
  ch.version = resp.challenge().version();
  ch.host_id = resp.challenge().host_id();
  ch.nonce = resp.challenge().nonce();
  ch.proof = resp.challenge().proof();
  auto proof = initiator.OnChallenge(ch);
  if (!proof.ok()) {
    ctx.TryCancel();
    return Status(proof.status().code(),
                  "peer '" + name + "' at " + target_ + ": " + proof.status().message());
  }
  v1::AuthRequest msg;
  msg.mutable_proof()->set_proof(proof->proof);
  if (!stream->Write(msg) || !stream->Read(&resp) || !resp.has_ticket())
    return finish("waiting for the ticket");
  peer_auth::Ticket t{resp.ticket().ticket(), resp.ticket().ttl_ms()};
  MCDMA_ASSIGN_OR_RETURN(peer_auth::Session session, initiator.OnTicket(t));
  stream->WritesDone();
  (void)stream->Finish();
  MutexLock lock(mu_);
  ticket_ = session.ticket;
  // Renew before half the lifetime has passed (peer.proto).
  ticket_renew_ = std::chrono::steady_clock::now() + session.ttl / 2;
  return Status::Ok();
}

template <typename Req, typename Rep, typename Fn>
Result<Rep> PeerChannel::CallWithTicket(const Req& req, Millis timeout, Fn fn) {
  std::string name = expected_peer_.empty() ? target_ : expected_peer_;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string t = ticket();
    if (t.empty()) {
      MCDMA_RETURN_IF_ERROR(EnsureTicket("", timeout));
      t = ticket();
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(timeout));
    ctx.AddMetadata(peer_auth::kTicketMetadataKey, t);
    Rep rep;
    grpc::Status gs = (stub_.get()->*fn)(&ctx, req, &rep);
    if (gs.ok()) return rep;
    if (gs.error_code() == grpc::StatusCode::UNAUTHENTICATED && attempt == 0) {
      // Only the ticket the peer refused is dropped: another caller may
      // already hold a fresh one.
      MCDMA_RETURN_IF_ERROR(EnsureTicket(t, timeout));
      continue;
    }
    return FromPeerGrpc(gs, name);
  }
  return Status(Code::kPermissionDenied, "peer '" + name + "' refused a fresh ticket");
}

Result<v1::PeerHelloReply> PeerChannel::Hello(const v1::PeerHelloRequest& req, Millis timeout) {
  return CallWithTicket<v1::PeerHelloRequest, v1::PeerHelloReply>(req, timeout,
                                                                  &v1::Peer::Stub::Hello);
}
Result<v1::PeerConnectReply> PeerChannel::Connect(const v1::PeerConnectRequest& req,
                                                  Millis timeout) {
  return CallWithTicket<v1::PeerConnectRequest, v1::PeerConnectReply>(req, timeout,
                                                                      &v1::Peer::Stub::Connect);
}
Result<v1::PeerAddRailReply> PeerChannel::AddRail(const v1::PeerAddRailRequest& req,
                                                  Millis timeout) {
  return CallWithTicket<v1::PeerAddRailRequest, v1::PeerAddRailReply>(req, timeout,
                                                                      &v1::Peer::Stub::AddRail);
}
Result<v1::PeerResolveExportReply> PeerChannel::ResolveExport(
    const v1::PeerResolveExportRequest& req, Millis timeout) {
  return CallWithTicket<v1::PeerResolveExportRequest, v1::PeerResolveExportReply>(
      req, timeout, &v1::Peer::Stub::ResolveExport);
}
Result<v1::PeerLookupServiceReply> PeerChannel::LookupService(
    const v1::PeerLookupServiceRequest& req, Millis timeout) {
  return CallWithTicket<v1::PeerLookupServiceRequest, v1::PeerLookupServiceReply>(
      req, timeout, &v1::Peer::Stub::LookupService);
}
Result<v1::PeerHeartbeatReply> PeerChannel::Heartbeat(const v1::PeerHeartbeatRequest& req,
                                                      Millis timeout) {
  return CallWithTicket<v1::PeerHeartbeatRequest, v1::PeerHeartbeatReply>(
      req, timeout, &v1::Peer::Stub::Heartbeat);
}
Status PeerChannel::Goodbye(const v1::PeerGoodbyeRequest& req, Millis timeout) {
  return CallWithTicket<v1::PeerGoodbyeRequest, v1::PeerGoodbyeReply>(req, timeout,
                                                                      &v1::Peer::Stub::Goodbye)
      .status();
}

}  // namespace mcdma::daemon
