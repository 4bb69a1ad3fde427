#include "peer/peer_plane.hpp"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "driver/tcp/tcp_transport.hpp"
#include "peer/peer_util.hpp"

namespace mcdma::daemon {
namespace {

Result<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return Status(Code::kInvalid, std::string(what) + ": cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<std::unique_ptr<driver::Device>> CreateLinkDevice(const Options& options) {
  MCDMA_ASSIGN_OR_RETURN(auto listen, SplitHostPort(options.listen, kDefaultPeerPort));
  std::pair<std::string, uint16_t> data{listen.first, 0};
  if (!options.data_listen.empty()) {
    MCDMA_ASSIGN_OR_RETURN(data, SplitHostPort(options.data_listen, 0));
  }
  driver::tcp::TcpOptions tcp;
  tcp.listen_address = data.first;
  tcp.listen_port = data.second;
  // A wildcard listener cannot know which of its addresses a peer reaches:
  // it advertises the wildcard and the peer puts in the address it dialed.
  tcp.advertise_address = data.first;
  tcp.connect_timeout = std::chrono::milliseconds(options.link_timeout_ms);
  for (const RailConfig& rail : options.rails) tcp.rail_addresses.push_back(rail.address);
  auto device = driver::tcp::CreateTcpDevice(tcp);
  if (!device.ok()) {
    return Status(device.status().code(), "data_listen " + JoinHostPort(data.first, data.second) +
                                              ": " + device.status().message());
  }
  return device;
}

Result<std::unique_ptr<PeerPlane>> PeerPlane::Start(const Options& options, Engine& engine,
                                                    const std::shared_ptr<const FabricKey>& key) {
  std::unique_ptr<PeerPlane> plane(new PeerPlane());
  std::shared_ptr<grpc::ServerCredentials> server_creds = grpc::InsecureServerCredentials();
  std::shared_ptr<grpc::ChannelCredentials> channel_creds = grpc::InsecureChannelCredentials();
  if (!options.tls_cert.empty()) {
    MCDMA_ASSIGN_OR_RETURN(std::string cert, ReadPem(options.tls_cert, "tls.cert"));
    MCDMA_ASSIGN_OR_RETURN(std::string pkey, ReadPem(options.tls_key, "tls.key"));
    MCDMA_ASSIGN_OR_RETURN(std::string ca, ReadPem(options.tls_ca, "tls.ca"));
    grpc::SslServerCredentialsOptions sopts(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    sopts.pem_root_certs = ca;
    sopts.pem_key_cert_pairs.push_back({pkey, cert});
    server_creds = grpc::SslServerCredentials(sopts);
    grpc::SslCredentialsOptions copts;
    copts.pem_root_certs = ca;
    copts.pem_private_key = pkey;
    copts.pem_cert_chain = cert;
    channel_creds = grpc::SslCredentials(copts);
  }
  MCDMA_ASSIGN_OR_RETURN(auto listen, SplitHostPort(options.listen, kDefaultPeerPort));
  // The daemon accepts the peer port's connections itself (bounded in all
  // and per address, and still accepting when descriptors run out) and
  // hands them to gRPC, whose TLS and handshake deadline apply as on its
  // own listener. Two daemons cannot share the port: bind fails.
  auto listener =
      Listener::ListenTcp("peer", listen.first, listen.second,
                          {options.peer_max_connections, options.peer_max_connections_per_address});
  if (!listener.ok()) {
    return Status(
        listener.status().code(),
        "listen " + options.listen + ": cannot serve peers there: " + listener.status().message());
  }
  plane->listener_ = std::move(listener).value();
  int bound_port = plane->listener_->port();
  grpc::ServerBuilder builder;
  plane->acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, server_creds);
  builder.SetMaxReceiveMessageSize(4 << 20);
  // A connection that never completes its handshake (TLS, HTTP/2
  // settings) is closed after the authentication stage deadline; one that
  // then carries no call for 30 s is closed too (linked peers send
  // heartbeats far more often).
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(options.auth_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 30'000);
  // The listen port goes to peers in Hello; it must be known before the
  // link manager dials, so the server starts first (its service routes to
  // the link manager, which exists from here on).
  auto* plane_ptr = plane.get();
  plane_ptr->links_ =
      std::make_unique<LinkManager>(options, engine, key, channel_creds, listen.second);
  plane_ptr->service_ = std::make_unique<PeerServiceImpl>(
      engine, *plane_ptr->links_, key, options.host_id, options.auth_per_address,
      std::chrono::milliseconds(options.auth_timeout_ms));
  builder.RegisterService(plane_ptr->service_.get());
  plane_ptr->server_ = builder.BuildAndStart();
  if (!plane_ptr->server_) {
    return Status(Code::kSystem, "listen " + options.listen + ": cannot start the peer service");
  }
  plane_ptr->listener_->Start([plane_ptr](int fd) {
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters p;
    p.listener_fd = plane_ptr->listener_->listen_fd();
    p.fd = fd;
    plane_ptr->acceptor_->HandleNewConnection(&p);
  });
  // An ephemeral port (0) may have been asked for: tell peers the one we got.
  plane_ptr->links_->set_listen_port(static_cast<uint16_t>(bound_port));
  plane_ptr->listen_ = JoinHostPort(listen.first, static_cast<uint32_t>(bound_port));
  plane_ptr->links_->set_listen_address(plane_ptr->listen_);
  plane_ptr->links_->Start();
  if (!options.fabric_store.empty() || !options.fabric_file.empty()) {
    LinkManager* links = plane_ptr->links_.get();
    fabric::MembershipLinks ml;
    ml.dial = [links](const PeerConfig& p) { return links->Add(p, PeerOrigin::kFabric); };
    ml.drop = [links](const std::string& host) { return links->Remove(host); };
    ml.describe = [links](v1::LinksReply* out) { links->Fill(out); };
    Engine* eng = &engine;
    ml.routes = [eng](const std::string& self,
                      const std::map<std::string, fabric::RouteEntry>& routes) {
      std::map<std::string, Engine::Route> out;
      for (const auto& [host, r] : routes)
        out.emplace(host, Engine::Route{r.next_hop, r.hops, r.instance});
      eng->Run([eng, self, out = std::move(out)]() mutable {
        eng->SetRoutes(self, std::move(out));
        return true;
      });
    };
    ml.relay = [eng](v1::FabricRelay* out) {
      auto stats = eng->Run([eng] { return eng->relay_stats(); });
      if (!stats) return;
      out->set_forwarded(stats->forwarded);
      out->set_forwarded_bytes(stats->forwarded_bytes);
      out->set_delivered(stats->delivered);
      out->set_dropped_hop_limit(stats->dropped_hop_limit);
      out->set_dropped_no_route(stats->dropped_no_route);
      out->set_dropped_full(stats->dropped_full);
      out->set_dropped_stale(stats->dropped_stale);
      out->set_dropped_refused(stats->dropped_refused);
      out->set_dropped_looped(stats->dropped_looped);
      for (const auto& r : stats->routed) {
        auto* o = out->add_routed();
        o->set_peer(r.peer);
        o->set_next_hop(r.next_hop);
        o->set_unacked(r.unacked);
        o->set_resent(r.resent);
        o->set_route_changes(r.route_changes);
        o->set_messages_sent(r.messages_sent);
        o->set_messages_received(r.messages_received);
        o->set_calls_out(r.calls_out);
        o->set_calls_in(r.calls_in);
      }
    };
    plane_ptr->membership_ = std::make_unique<fabric::Membership>(
        options, std::move(ml), links->instance_id(), static_cast<uint16_t>(bound_port));
    MCDMA_RETURN_IF_ERROR(plane_ptr->membership_->Start());
  }
  spdlog::get("peer")->info("peer service on {} ({}), fabric key {}", plane_ptr->listen_,
                            options.tls_cert.empty() ? "plaintext" : "TLS", key->Fingerprint());
  return plane;
}

void PeerPlane::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // Peers' calls first (no Connect may start a link while the links stop),
  // then our links (Goodbye to each peer). Start may have failed half-way.
  // The fabric first: this host's record is withdrawn while its links
  // still say goodbye.
  if (membership_) membership_->Stop();
  if (listener_) listener_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  if (links_) links_->Stop(v1::PEER_GOODBYE_REASON_SHUTDOWN);
}

PeerPlane::~PeerPlane() { Stop(); }

}  // namespace mcdma::daemon
