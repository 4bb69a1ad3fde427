// LinkManager: what a peer asks of this host through the Peer service
// (Hello, Connect, Heartbeat, Goodbye). `host` is always the host id of the
// caller's ticket, never one written in a request.
#include <spdlog/spdlog.h>

#include "driver/tcp/tcp_transport.hpp"
#include "peer/link_manager.hpp"
#include "peer/peer_util.hpp"
#include "peer/transport_choice.hpp"

namespace mcdma::daemon {

v1::PeerHelloReply LinkManager::OnHello(const std::string& host, const v1::PeerHelloRequest& req,
                                        const std::string& source_ip) {
  bool restarted = false;
  {
    MutexLock lock(mu_);
    restarted = NotePeerInstance(host, req.instance_id(), req.daemon_version());
    PeerInfo& info = peers_[host];
    info.rails = AcceptRails(host, req.rails());
    const std::string& back = req.listen_host().empty() ? source_ip : req.listen_host();
    if (req.listen_port() != 0 && !back.empty()) {
      std::string callback = JoinHostPort(back, req.listen_port());
      if (info.callback != callback && !out_.count(host)) channels_.erase(host);
      info.callback = callback;
    }
  }
  if (restarted) {
    (void)engine_.Run([&] {
      engine_.DropPeer(host, Code::kPeerGone, "peer '" + host + "' restarted");
      return 0;
    });
  }
  v1::PeerHelloReply rep = {};
  rep.set_protocol_version(1);
  rep.set_host_id(options_.host_id);
  rep.set_daemon_version(MCDMA_VERSION_TEXT);
  rep.add_capabilities("one-sided");
  OfferTransports(rep.mutable_transports());
  rep.set_instance_id(instance_id_);
  *rep.mutable_rails() = own_rails_;
  return rep;
}

Result<v1::PeerConnectReply> LinkManager::OnConnect(const std::string& host,
                                                    const v1::PeerConnectRequest& req,
                                                    const std::string& source_ip) {
  MCDMA_ASSIGN_OR_RETURN(const Transport transport, OfferedTransport(req.transport()));
  const bool verbs = transport == Transport::kVerbs;
  IncomingAttempt attempt;
  attempt.host = host;
  attempt.generation = req.generation();
  attempt.remote = req.endpoint_info();
  attempt.remote_slot_bytes = req.slot_bytes();
  attempt.transport = transport;
  Entry* e = nullptr;
  MCDMA_ASSIGN_OR_RETURN(e, AdmitIncoming(host, req.generation(), &attempt.instance));
  if (!verbs) {
    std::string remote_host = source_ip.empty() ? "127.0.0.1" : source_ip;
    MCDMA_ASSIGN_OR_RETURN(attempt.remote,
                           driver::tcp::RebaseEndpointInfo(attempt.remote, remote_host));
  }
  MCDMA_ASSIGN_OR_RETURN(std::shared_ptr<driver::Endpoint> endpoint, NewLinkEndpoint(transport));
  std::string local_info = endpoint->LocalInfo();
  v1::VerbsPath path;
  if (verbs) {
    MCDMA_ASSIGN_OR_RETURN(path,
                           DescribeVerbsPath(engine_.verbs_info(), local_info, attempt.remote));
  }
  v1::PeerConnectReply rep;
  rep.set_endpoint_info(local_info);
  rep.set_generation(req.generation());
  rep.set_slot_bytes(options_.link_slot_bytes);
  const uint64_t generation = req.generation();
  MCDMA_ASSIGN_OR_RETURN(uint64_t old_link,
                         BeginIncoming(e, endpoint, std::move(attempt), req.transport(), path));
  if (old_link != 0) {
    (void)engine_.Run([&] {
      engine_.DropLink(old_link, Code::kLinkDown,
                       "peer reconnected under generation " + std::to_string(generation));
      return 0;
    });
  }
  return rep;
}

Result<Transport> LinkManager::OfferedTransport(const std::string& name) const {
  const std::optional<Transport> asked = TransportFromName(name);
  const bool verbs = asked == Transport::kVerbs;
  if (asked != Transport::kTcp && !(verbs && engine_.has_verbs())) {
    return Status(Code::kInvalid, Reason::kTransportRefused,
                  "transport \"" + name + "\" is not offered here");
  }
  return *asked;
}

Result<LinkManager::Entry*> LinkManager::AdmitIncoming(const std::string& host, uint64_t generation,
                                                       std::string* instance) {
  MutexLock lock(mu_);
  if (stopping_) return Status(Code::kUnavailable, "the daemon is stopping");
  auto p = peers_.find(host);
  if (p == peers_.end()) return Status(Code::kInvalid, "Connect before Hello");
  *instance = p->second.instance;
  auto& slot = in_[host];
  if (!slot) {
    slot = std::make_unique<Entry>();
    slot->config.name = host;
    slot->config.transport = "tcp";
    slot->origin = PeerOrigin::kIncoming;
    slot->state = PeerState::kConnecting;
  }
  Entry* e = slot.get();
  if (generation <= e->generation) {
    return Status(Code::kLinkDown, "generation " + std::to_string(generation) + " is not above " +
                                       std::to_string(e->generation) +
                                       "; reconnect with a higher one");
  }
  return e;
}

Result<uint64_t> LinkManager::BeginIncoming(Entry* e, std::shared_ptr<driver::Endpoint> endpoint,
                                            IncomingAttempt attempt,
                                            const std::string& transport_name,
                                            const v1::VerbsPath& path) {
  MutexLock lock(mu_);
  if (stopping_) return Status(Code::kUnavailable, "the daemon is stopping");
  if (e->removed) return Status(Code::kLinkDown, "the link was removed meanwhile");
  const uint64_t old_link = e->link_id;
  const uint64_t generation = attempt.generation;
  e->generation = generation;
  e->rtt_min_us = 0;  // a new data link: its own round trips
  e->link_id = 0;
  e->config.transport = transport_name;
  e->transport = attempt.transport;
  e->transport_reason = "chosen by the peer that dialed";
  e->verbs_path = path;
  if (e->state == PeerState::kUp)
    e->last_error = "the peer connected again (generation " + std::to_string(generation) + ")";
  e->last_error_reason = Reason::kNone;
  SetState(e, PeerState::kConnecting);
  // The data connection completes once the caller has our endpoint: on
  // a thread of its own, after this reply is sent.
  JoinFinishedConnectors();
  auto done = std::make_shared<std::atomic<bool>>(false);
  connectors_.push_back(
      {std::thread([this, e, endpoint = std::move(endpoint), attempt = std::move(attempt), done] {
         struct MarkDone {
           std::atomic<bool>& flag;
           ~MarkDone() { flag.store(true); }
         } mark{*done};
         CompleteIncoming(e, *endpoint, attempt);
       }),
       done});
  return old_link;
}

void LinkManager::JoinFinishedConnectors() {
  for (auto it = connectors_.begin(); it != connectors_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = connectors_.erase(it);
    } else {
      ++it;
    }
  }
}

void LinkManager::CompleteIncoming(Entry* e, driver::Endpoint& endpoint,
                                   const IncomingAttempt& attempt) {
  auto conn = endpoint.Connect(attempt.remote);
  Status st = conn.status();
  if (st.ok()) st = InstallIncoming(e, attempt, conn.value());
  if (st.ok()) {
    // This host did not dial, so it asks the peer things (an app's first
    // lookup of a service there) over a channel of its own to the peer's
    // callback address. Authenticated now, the apps' first requests do not
    // pay for a connect and an exchange under their own deadlines.
    if (auto ch = ChannelFor(attempt.host); ch.ok()) {
      if (Status warm = (*ch)->Warm(rpc_timeout_); !warm.ok())
        spdlog::get("peer")->debug("channel back to '{}' not ready yet: {}", attempt.host,
                                   warm.ToString());
    }
  }
  MutexLock lock(mu_);
  if (e->removed || e->generation != attempt.generation) return;  // superseded meanwhile
  if (st.ok()) {
    spdlog::get("peer")->info("link from '{}' up (generation {})", attempt.host,
                              attempt.generation);
  } else {
    e->last_error = "data connection: " + st.message();
    e->last_error_reason = st.reason();
    SetState(e, PeerState::kDown);
    spdlog::get("peer")->warn("link from '{}' failed: {}", attempt.host, st.ToString());
  }
}

Status LinkManager::InstallIncoming(Entry* e, const IncomingAttempt& attempt,
                                    std::unique_ptr<driver::Connection>& conn) {
  LinkSpec spec{attempt.host,     LinkOrigin::kIn,           attempt.generation,
                attempt.instance, attempt.remote_slot_bytes, attempt.transport};
  // Installed and recorded in one engine step: a link-down report (also on
  // the engine thread) cannot fall in between.
  auto r = engine_.Run([&]() -> Status {
    MutexLock lock(mu_);
    if (e->removed || stopping_ || e->generation != attempt.generation)
      return Status(Code::kLinkDown, "superseded while connecting");
    if (spec.transport == Transport::kVerbs) spec.peer_device = e->verbs_path.peer_device();
    MCDMA_ASSIGN_OR_RETURN(uint64_t id, engine_.InstallLink(spec, std::move(conn)));
    if (e->ever_up && e->state != PeerState::kUp) ++e->reconnects;
    e->ever_up = true;
    e->link_id = id;
    e->last_heartbeat = std::chrono::steady_clock::now();
    SetState(e, PeerState::kUp);
    return Status::Ok();
  });
  return !r ? Status(Code::kUnavailable, "the engine has stopped") : *r;
}

Result<v1::PeerHeartbeatReply> LinkManager::OnHeartbeat(const std::string& host,
                                                        const v1::PeerHeartbeatRequest& req) {
  v1::PeerHeartbeatReply rep;
  rep.set_echo_timestamp_ns(req.timestamp_ns());
  MutexLock lock(mu_);
  auto it = in_.find(host);
  if (it == in_.end()) return rep;  // generation 0: reconnect
  Entry* e = it->second.get();
  rep.set_generation(
      e->state == PeerState::kUp || e->state == PeerState::kConnecting ? e->generation : 0);
  if (rep.generation() == req.generation()) {
    e->last_heartbeat = std::chrono::steady_clock::now();
    ++e->heartbeats_ok;
    e->rtt_us = req.rtt_us();
    e->rtt_avg_us = e->rtt_avg_us == 0 ? e->rtt_us : 0.875 * e->rtt_avg_us + 0.125 * e->rtt_us;
    if (e->rtt_us > 0)
      e->rtt_min_us = e->rtt_min_us == 0 ? e->rtt_us : std::min(e->rtt_min_us, e->rtt_us);
  } else {
    ++e->heartbeats_missed;
  }
  return rep;
}

void LinkManager::OnGoodbye(const std::string& host, const v1::PeerGoodbyeRequest& req) {
  std::string why =
      "peer '" + host + "' said goodbye (" + v1::PeerGoodbyeReason_Name(req.reason()) + ")";
  if (!req.detail().empty()) why += ": " + req.detail().substr(0, 256);
  spdlog::get("peer")->info("{}", why);
  {
    MutexLock lock(mu_);
    if (auto it = in_.find(host); it != in_.end()) {
      it->second->link_id = 0;
      it->second->last_error = why;
      it->second->last_error_reason = Reason::kNone;
      SetState(it->second.get(), PeerState::kDown);
    }
    if (auto it = out_.find(host); it != out_.end()) {
      it->second->link_lost = true;
      it->second->said_goodbye = true;
      it->second->last_error = why;
      it->second->last_error_reason = Reason::kNone;
    }
  }
  cv_.notify_all();
  (void)engine_.Run([&] {
    engine_.DropPeer(host, Code::kPeerGone, why);
    return 0;
  });
}

}  // namespace mcdma::daemon
