// What a peer daemon sends this one: the Peer service's requests
// (daemon/src/peer/peer_service.cpp) and the Authenticate exchange
// (auth/src/peer_auth.cpp, Responder and TicketBook), through a real
// PeerServiceImpl over an in-process gRPC channel, with a LinkManager and
// an engine behind it (link_manager_callee.cpp: what turns Hello, Connect,
// Heartbeat and Goodbye into engine steps). The initiator's side of the
// exchange (what a responder sends back) runs on its own.
//
// Input: records of a kind byte, a u16 length and that many bytes, each
// parsed with ParseFromArray as the message of its kind:
//   0 Authenticate: two AuthRequests, as written (the first length-prefixed)
//   1 Authenticate: an AuthRequest hello, then the proof the initiator of
//     that hello would compute with the fabric key; the ticket it gets is
//     sent with the records that follow
//   2 Initiator: an AuthResponse challenge and then a ticket (the first
//     length-prefixed); flag byte first: bit 0 replaces the challenge's
//     proof by the correct one
//   3 Hello  4 Connect  5 ResolveExport  6 LookupService  7 Heartbeat
//   8 Goodbye  9 the record's bytes as the ticket to send
// An input starts without a ticket.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz_engine.hpp"
#include "fuzz_support.hpp"
#include "mcdma/v1/peer.grpc.pb.h"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdma_auth/peer_auth.hpp"
#include "peer/link_manager.hpp"
#include "peer/peer_service.hpp"

namespace mcdma::fuzz {
namespace {

constexpr size_t kMaxRecords = 16;
// Peers' state (hosts, links) accumulates in the LinkManager; a fresh one
// every so many inputs keeps memory bounded.
constexpr uint64_t kInputsPerServer = 4096;
constexpr const char* kHostId = "fuzz-host";

std::shared_ptr<const FabricKey> Key() {
  static auto key = [] {
    std::array<uint8_t, FabricKey::kBytes> bytes{};
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(7 * i + 1);
    return std::make_shared<const FabricKey>(FabricKey::FromBytes(bytes));
  }();
  return key;
}

struct Server {
  daemon::Options options;
  std::unique_ptr<daemon::LinkManager> links;
  std::unique_ptr<daemon::PeerServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Peer::Stub> stub;

  explicit Server(daemon::Engine& engine) {
    options = engine.options();
    links = std::make_unique<daemon::LinkManager>(options, engine, Key(),
                                                  grpc::InsecureChannelCredentials(), 7471);
    service = std::make_unique<daemon::PeerServiceImpl>(engine, *links, Key(), kHostId,
                                                        /*auth_per_address=*/32,
                                                        std::chrono::milliseconds(5000));
    grpc::ServerBuilder builder;
    builder.RegisterService(service.get());
    // The sync server's pollers wake every CQ_TIMEOUT_MSEC (10 ms by
    // default), which would set the pace of a streaming call here.
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 1);
    server = builder.BuildAndStart();
    if (!server) std::abort();
    stub = v1::Peer::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  }
  ~Server() {
    server->Shutdown(std::chrono::system_clock::now());
    server->Wait();
    links->Stop(v1::PEER_GOODBYE_REASON_SHUTDOWN);
  }
};

// Engine side, once: an app serving a service and exporting a buffer, so
// LookupService and ResolveExport find something.
void SetUpApp(daemon::Engine& engine) {
  (void)engine.Run([&] {
    daemon::HelloInfo hello;
    hello.app_name = "fuzz-peer";
    auto opened = engine.OpenSession(hello);
    if (!opened.ok()) std::abort();
    uint64_t sid = opened->session_id;
    (void)engine.Mapped(sid, opened->mailbox_segment);
    auto buf = engine.Alloc(sid, 8192);
    if (!buf.ok() || !engine.Serve(sid, "fuzz.svc").ok()) std::abort();
    (void)engine.Mapped(sid, buf->segment);
    daemon::ExportSpec spec;
    spec.name = "fuzz.exp";
    spec.buffer_id = buf->buffer_id;
    spec.allow_read = true;
    if (!engine.Export(sid, spec).ok()) std::abort();
    return 0;
  });
}

template <typename M>
bool Parse(std::span<const uint8_t> bytes, M& msg) {
  return msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

std::unique_ptr<grpc::ClientContext> Context(const std::string& ticket) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!ticket.empty()) ctx->AddMetadata(peer_auth::kTicketMetadataKey, ticket);
  return ctx;
}

// Kinds 0 and 1. Returns the ticket, if one was issued.
std::string Authenticate(v1::Peer::Stub& stub, const v1::AuthRequest& first,
                         const v1::AuthRequest* second) {
  auto ctx = Context("");
  auto stream = stub.Authenticate(ctx.get());
  v1::AuthResponse resp;
  std::string ticket;
  if (stream->Write(first) && stream->Read(&resp)) {
    v1::AuthRequest proof;
    if (second != nullptr) {
      proof = *second;
    } else if (resp.has_challenge()) {
      peer_auth::Transcript t{first.hello().nonce(), resp.challenge().nonce(),
                              first.hello().host_id(), resp.challenge().host_id()};
      proof.mutable_proof()->set_proof(
          peer_auth::ComputeProof(*Key(), peer_auth::Role::kInitiator, t));
    }
    if (stream->Write(proof) && stream->Read(&resp) && resp.has_ticket())
      ticket = resp.ticket().ticket();
  }
  stream->WritesDone();
  (void)stream->Finish();
  return ticket;
}

// Kind 2: the initiator's checks of what a responder sends.
void Initiate(uint8_t flags, const v1::AuthResponse& challenge, const v1::AuthResponse& ticket) {
  auto init = peer_auth::Initiator::Create(Key(), "fuzz-peer", "");
  if (!init.ok()) std::abort();
  peer_auth::Challenge c{challenge.challenge().version(), challenge.challenge().host_id(),
                         challenge.challenge().nonce(), challenge.challenge().proof()};
  if (flags & 1) {
    peer_auth::Transcript t{init->hello().nonce, c.nonce, init->hello().host_id, c.host_id};
    c.proof = peer_auth::ComputeProof(*Key(), peer_auth::Role::kResponder, t);
  }
  auto proof = init->OnChallenge(c);
  if (!proof.ok()) return;
  if (proof->proof.size() != peer_auth::kProofBytes) std::abort();
  (void)init->OnTicket({ticket.ticket().ticket(), ticket.ticket().ttl_ms()});
}

std::span<const uint8_t> Prefixed(Input& in) { return in.Take(in.U16()); }

}  // namespace
}  // namespace mcdma::fuzz

using namespace mcdma;
using namespace mcdma::fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Malformed strings in the inputs make protobuf log each one.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static daemon::Engine& engine = []() -> daemon::Engine& {
    daemon::Engine& e = FuzzEngine::GetWithoutLinks().engine();
    SetUpApp(e);
    return e;
  }();
  // Never destroyed at exit (the engine thread still runs then).
  static Server* server = nullptr;
  static uint64_t inputs = 0;
  if (inputs++ % kInputsPerServer == 0) {
    delete server;
    server = new Server(engine);
  }
  v1::Peer::Stub& stub = *server->stub;

  Input in(data, size);
  std::string ticket;
  for (size_t i = 0; i < kMaxRecords && in.left() >= 3; ++i) {
    uint8_t kind = in.U8();
    auto bytes = in.Take(in.U16());
    Input rec(bytes.data(), bytes.size());
    switch (kind % 10) {
      case 0: {
        v1::AuthRequest first, second;
        if (Parse(Prefixed(rec), first) && Parse(rec.Take(rec.left()), second))
          ticket = Authenticate(stub, first, &second);
        break;
      }
      case 1: {
        v1::AuthRequest hello;
        if (Parse(bytes, hello)) ticket = Authenticate(stub, hello, nullptr);
        break;
      }
      case 2: {
        uint8_t flags = rec.U8();
        v1::AuthResponse challenge, t;
        if (Parse(Prefixed(rec), challenge) && Parse(rec.Take(rec.left()), t))
          Initiate(flags, challenge, t);
        break;
      }
      case 3: {
        v1::PeerHelloRequest req;
        v1::PeerHelloReply rep;
        if (Parse(bytes, req)) (void)stub.Hello(Context(ticket).get(), req, &rep);
        break;
      }
      case 4: {
        v1::PeerConnectRequest req;
        v1::PeerConnectReply rep;
        if (Parse(bytes, req)) (void)stub.Connect(Context(ticket).get(), req, &rep);
        break;
      }
      case 5: {
        v1::PeerResolveExportRequest req;
        v1::PeerResolveExportReply rep;
        if (Parse(bytes, req)) (void)stub.ResolveExport(Context(ticket).get(), req, &rep);
        break;
      }
      case 6: {
        v1::PeerLookupServiceRequest req;
        v1::PeerLookupServiceReply rep;
        if (Parse(bytes, req)) (void)stub.LookupService(Context(ticket).get(), req, &rep);
        break;
      }
      case 7: {
        v1::PeerHeartbeatRequest req;
        v1::PeerHeartbeatReply rep;
        if (Parse(bytes, req)) (void)stub.Heartbeat(Context(ticket).get(), req, &rep);
        break;
      }
      case 8: {
        v1::PeerGoodbyeRequest req;
        v1::PeerGoodbyeReply rep;
        if (Parse(bytes, req)) (void)stub.Goodbye(Context(ticket).get(), req, &rep);
        break;
      }
      case 9: {
        // Metadata values are printable ASCII; anything else the client refuses.
        std::string t(bytes.begin(), bytes.end());
        bool printable = true;
        for (char c : t) printable &= c >= 0x20 && c < 0x7f;
        if (printable) ticket = t;
        break;
      }
    }
  }
  return 0;
}
