#include "peer/peer_service.hpp"

#include <spdlog/spdlog.h>

#include "peer/peer_util.hpp"
#include "service/grpc_status.hpp"

namespace mcdma::daemon {
namespace {
grpc::Status Unauthenticated(const std::string& why) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
}
grpc::Status Malformed(const std::string& why) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed " + why);
}

// What a peer needs to reach one registered piece: rkey (4 bytes) and
// remote address (8 bytes), little-endian.
std::string EncodeAccess(uint32_t rkey, uint64_t addr) {
  std::string out(12, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((rkey >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i) out[4 + i] = static_cast<char>((addr >> (8 * i)) & 0xff);
  return out;
}

void ToReply(const PeerGrant& g, v1::PeerResolveExportReply* out) {
  out->set_export_id(g.export_id);
  out->set_length(g.length);
  out->set_allow_read(g.allow_read);
  out->set_allow_write(g.allow_write);
  auto put = [](const PeerGrant::Piece& piece, v1::PeerExportPiece* p) {
    p->set_offset(piece.offset);
    p->set_length(piece.length);
    p->set_access(EncodeAccess(piece.rkey, piece.addr));
  };
  for (const PeerGrant::Piece& piece : g.pieces) put(piece, out->add_pieces());
  for (const auto& [device, pieces] : g.keys) {
    v1::PeerExportKeys* k = out->add_keys();
    k->set_device(device);
    for (const PeerGrant::Piece& piece : pieces) put(piece, k->add_pieces());
  }
  if (g.expires_in_ms) out->set_expires_in_ms(*g.expires_in_ms);
}
}  // namespace

PeerServiceImpl::PeerServiceImpl(Engine& engine, LinkManager& links,
                                 std::shared_ptr<const FabricKey> key, std::string host_id,
                                 uint32_t auth_per_address,
                                 std::chrono::milliseconds auth_stage_timeout)
    : engine_(engine),
      links_(links),
      key_(std::move(key)),
      host_id_(std::move(host_id)),
      gate_(auth_per_address, auth_stage_timeout) {}

Result<std::string> PeerServiceImpl::Caller(grpc::ServerContext* ctx) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(peer_auth::kTicketMetadataKey);
  if (it == md.end()) {
    ++refused_;
    return Status(Code::kPermissionDenied, "no ticket: authenticate first");
  }
  auto host = tickets_.Verify(std::string_view(it->second.data(), it->second.size()));
  if (!host.ok()) {
    ++refused_;
    return Status(Code::kPermissionDenied, "ticket refused: " + host.status().message());
  }
  return host;
}

grpc::Status PeerServiceImpl::Authenticate(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<v1::AuthResponse, v1::AuthRequest>* stream) {
  // Bounded: per address and in all, and each stage has a deadline that
  // cancels the stream (auth_gate.hpp).
  std::optional<AuthGate::Pass> pass = gate_.Admit(ctx);
  if (!pass) {
    ++refused_;
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "too many authentications at once from " +
                            AuthGate::AddressOf(ctx->peer()) + " or in all; retry later");
  }
  auto log = spdlog::get("peer");
  auto responder = peer_auth::Responder::Create(key_, host_id_);
  if (!responder.ok()) return ToGrpc(responder.status());
  v1::AuthRequest req;
  if (!stream->Read(&req)) {
    if (pass->timed_out()) {
      ++refused_;
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "authentication: no hello in time");
    }
    return Malformed("authentication: no hello");
  }
  if (!req.has_hello()) return Malformed("authentication: expected hello first");
  peer_auth::Hello hello{req.hello().version(), req.hello().host_id(), req.hello().nonce()};
  auto challenge = responder->OnHello(hello);
  if (!challenge.ok()) {
    ++refused_;
    return Malformed("hello: " + challenge.status().message());
  }
  v1::AuthResponse resp;
  auto* c = resp.mutable_challenge();
  c->set_version(challenge->version);
  c->set_host_id(challenge->host_id);
  c->set_nonce(challenge->nonce);
  c->set_proof(challenge->proof);
  pass->NextStage();
  if (!stream->Write(resp)) return grpc::Status(grpc::StatusCode::CANCELLED, "peer went away");
  if (!stream->Read(&req)) {
    ++refused_;
    if (pass->timed_out()) {
      log->warn("authentication from '{}' ({}): no proof within the stage deadline", hello.host_id,
                ctx->peer());
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "authentication: no proof in time");
    }
    log->warn(
        "authentication from '{}' ({}): the initiator gave up after the challenge "
        "(it could not verify our proof: different fabric key?)",
        hello.host_id, ctx->peer());
    return grpc::Status(grpc::StatusCode::CANCELLED, "initiator gave up");
  }
  if (!req.has_proof()) return Malformed("authentication: expected proof");
  auto ticket = responder->OnProof(peer_auth::Proof{req.proof().proof()}, tickets_);
  if (!ticket.ok()) {
    ++refused_;
    log->warn("authentication from '{}' ({}) refused: {}", hello.host_id, ctx->peer(),
              ticket.status().message());
    if (ticket.status().code() == Code::kPermissionDenied)
      return Unauthenticated(ticket.status().message());
    if (ticket.status().code() == Code::kBusy)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, ticket.status().message());
    return Malformed("proof: " + ticket.status().message());
  }
  resp.Clear();
  resp.mutable_ticket()->set_ticket(ticket->ticket);
  resp.mutable_ticket()->set_ttl_ms(ticket->ttl_ms);
  stream->Write(resp);
  log->debug("peer '{}' ({}) authenticated", hello.host_id, ctx->peer());
  return grpc::Status::OK;
}

grpc::Status PeerServiceImpl::Hello(grpc::ServerContext* ctx, const v1::PeerHelloRequest* req,
                                    v1::PeerHelloReply* rep) {
  auto caller = Caller(ctx);
  if (!caller.ok()) return Unauthenticated(caller.status().message());
  const std::string& host = *caller;
  if (req->host_id() != host) {
    return Malformed("hello: host id '" + req->host_id() + "' is not the authenticated '" + host +
                     "'");
  }
  bool v1_ok = false;
  for (uint32_t v : req->protocol_versions()) v1_ok |= v == 1;
  if (!v1_ok) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "INVALID: no common peer protocol version (this daemon speaks 1)");
  }
  if (req->instance_id().size() != 32) return Malformed("hello: instance_id");
  *rep = links_.OnHello(host, *req, IpOfGrpcPeer(ctx->peer()));
  return grpc::Status::OK;
}

grpc::Status PeerServiceImpl::Connect(grpc::ServerContext* ctx, const v1::PeerConnectRequest* req,
                                      v1::PeerConnectReply* rep) {
  auto caller = Caller(ctx);
  if (!caller.ok()) return Unauthenticated(caller.status().message());
  const std::string& host = *caller;
  if (!req->link().empty()) return Malformed("connect: only the default link \"\" exists");
  if (req->generation() == 0) return Malformed("connect: generation 0");
  auto r = links_.OnConnect(host, *req, IpOfGrpcPeer(ctx->peer()));
  if (!r.ok()) return ToGrpc(r.status());
  *rep = std::move(r).value();
  return grpc::Status::OK;
}

grpc::Status PeerServiceImpl::AddRail(grpc::ServerContext* ctx, const v1::PeerAddRailRequest* req,
                                      v1::PeerAddRailReply* rep) {
  auto caller = Caller(ctx);
  if (!caller.ok()) return Unauthenticated(caller.status().message());
  if (req->generation() == 0) return Malformed("add rail: generation 0");
  if (req->index() == 0) return Malformed("add rail: rail 0 is the link's own connection");
  auto r = links_.OnAddRail(*caller, *req);
  if (!r.ok()) return ToGrpc(r.status());
  *rep = std::move(r).value();
  return grpc::Status::OK;
}

grpc::Status PeerServiceImpl::ResolveExport(grpc::ServerContext* ctx,
                                            const v1::PeerResolveExportRequest* req,
                                            v1::PeerResolveExportReply* rep) {
  auto caller = Caller(ctx);
  if (!caller.ok()) return Unauthenticated(caller.status().message());
  const std::string& host = *caller;
  const std::optional<Transport> transport = TransportFromName(req->transport());
  if (transport != Transport::kTcp && transport != Transport::kVerbs)
    return Malformed("resolve: unknown transport");
  auto grant = engine_.Run([&] { return engine_.ResolveForPeer(host, req->name(), *transport); });
  if (!grant) return ToGrpc(Status(Code::kUnavailable, "the daemon is stopping"));
  if (!grant->ok()) return ToGrpc(grant->status());
  ToReply(grant->value(), rep);
  return grpc::Status::OK;
}

grpc::Status PeerServiceImpl::LookupService(grpc::ServerContext* ctx,
                                            const v1::PeerLookupServiceRequest* req,
                                            v1::PeerLookupServiceReply* rep) {
  auto caller = Caller(ctx);
  if (!caller.ok()) return Unauthenticated(caller.status().message());
  const std::string& host = *caller;
  (void)host;
  auto id = engine_.Run([&] { return engine_.LookupForPeer(req->service()); });
  if (!id) return ToGrpc(Status(Code::kUnavailable, "the daemon is stopping"));
  if (!id->ok()) return ToGrpc(id->status());
  rep->set_service_id(id->value());
  return grpc::Status::OK;
}

grpc::Status PeerServiceImpl::Heartbeat(grpc::ServerContext* ctx,
                                        const v1::PeerHeartbeatRequest* req,
                                        v1::PeerHeartbeatReply* rep) {
  auto caller = Caller(ctx);
  if (!caller.ok()) return Unauthenticated(caller.status().message());
  const std::string& host = *caller;
  auto r = links_.OnHeartbeat(host, *req);
  if (!r.ok()) return ToGrpc(r.status());
  *rep = std::move(r).value();
  return grpc::Status::OK;
}

grpc::Status PeerServiceImpl::Goodbye(grpc::ServerContext* ctx, const v1::PeerGoodbyeRequest* req,
                                      v1::PeerGoodbyeReply*) {
  auto caller = Caller(ctx);
  if (!caller.ok()) return Unauthenticated(caller.status().message());
  const std::string& host = *caller;
  links_.OnGoodbye(host, *req);
  tickets_.RevokePeer(host);
  return grpc::Status::OK;
}

}  // namespace mcdma::daemon
