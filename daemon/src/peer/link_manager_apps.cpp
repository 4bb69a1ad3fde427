// LinkManager: what apps and mcdmactl ask of links — lookups and
// resolutions on a peer, runtime links, the links table, the echo test.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>

#include "peer/link_manager.hpp"
#include "peer/peer_util.hpp"
#include "verbs_support.hpp"

namespace mcdma::daemon {
namespace {
uint64_t LoadLe(const std::string& s, size_t off, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(s[off + i])) << (8 * i);
  return v;
}

void DescribeLocalVerbs(const LocalVerbsInfo& lv, v1::LocalVerbs* v) {
  v->set_available(lv.available);
  v->set_reason(lv.reason);
  v->set_device(lv.device);
  v->set_port(lv.port);
  v->set_gid_index(lv.gid_index);
  v->set_gid(lv.gid);
  v->set_profile(lv.profile);
  v->set_detected_profile(lv.detected_profile);
  v->set_active_mtu(lv.active_mtu);
  v->set_rail(lv.rail);
}

// An RDMA port as it was opened and as it is now: port state, budgets.
void DescribeRdmaPort(const LocalVerbsInfo& lv, const driver::Device* device, v1::LocalVerbs* v) {
  DescribeLocalVerbs(lv, v);
  RdmaPortState st = StateOfRdmaPort(device);
  v->set_state(st.active ? "ACTIVE" : "DOWN");
  v->set_port_failure(st.failure);
  v->set_queue_pairs(st.queue_pairs);
  v->set_registrations(st.registrations);
  if (device != nullptr) {
    v->set_max_queue_pairs(device->caps().max_queue_pairs);
    v->set_max_registrations(device->caps().max_registrations);
  }
}

// The engine's counters of the link to `peer` from `origin` (kept by
// (peer, origin) across reconnects).
void AddEngineCounters(const std::vector<LinkSnapshot>& snaps, const std::string& peer,
                       LinkOrigin origin, v1::LinkInfo* li) {
  auto* c = li->mutable_counters();
  for (const LinkSnapshot& s : snaps) {
    if (s.peer != peer || s.origin != origin) continue;
    if (s.id != 0) li->set_inflight(s.inflight);
    c->set_messages_sent(s.stats.messages_sent);
    c->set_messages_received(s.stats.messages_received);
    c->set_bytes_sent(s.stats.bytes_sent);
    c->set_bytes_received(s.stats.bytes_received);
    c->set_calls_out(s.stats.calls_out);
    c->set_calls_in(s.stats.calls_in);
    c->set_reads(s.stats.reads);
    c->set_writes(s.stats.writes);
    c->set_read_bytes(s.stats.read_bytes);
    c->set_write_bytes(s.stats.write_bytes);
    c->set_ops_failed(s.stats.ops_failed);
  }
}
}  // namespace

std::shared_ptr<PeerChannel> LinkManager::MakeChannel(const std::string& target,
                                                      const std::string& peer) {
  return std::make_shared<PeerChannel>(target, peer, options_.host_id, key_, creds_);
}

Result<std::shared_ptr<PeerChannel>> LinkManager::ChannelFor(const std::string& peer) {
  MutexLock lock(mu_);
  if (auto it = channels_.find(peer); it != channels_.end()) return it->second;
  if (auto o = out_.find(peer); o != out_.end()) {
    return channels_[peer] = MakeChannel(o->second->config.address, peer);
  }
  auto p = peers_.find(peer);
  if (p == peers_.end() || p->second.callback.empty()) {
    return Status(Code::kNotFound, Reason::kNotLinked,
                  "peer '" + peer + "' is not linked to this daemon");
  }
  return channels_[peer] = MakeChannel(p->second.callback, peer);
}

namespace {
// Whether a routed attempt found no way to the peer (no route, or the
// engine still holds the link of its own): the link's own state is the
// answer then, not this.
bool NoRouteEither(const Status& routed) {
  if (routed.ok()) return false;
  return (routed.code() == Code::kNotFound && routed.reason() == Reason::kNotLinked) ||
         routed.code() == Code::kInvalid || routed.code() == Code::kLinkDown;
}
}  // namespace

Status LinkManager::RequireUp(const std::string& peer) {
  MutexLock lock(mu_);
  const Entry* seen = nullptr;
  for (auto* table : {&out_, &in_}) {
    auto it = table->find(peer);
    if (it == table->end()) continue;
    if (it->second->state == PeerState::kUp) return Status::Ok();
    seen = it->second.get();
  }
  if (seen == nullptr)
    return Status(Code::kNotFound, Reason::kNotLinked,
                  "peer '" + peer + "' is not linked to this daemon");
  return Status(Code::kLinkDown, "link to '" + peer + "' is " +
                                     std::string(PeerStateName(seen->state)) +
                                     (seen->last_error.empty() ? "" : ": " + seen->last_error));
}

Result<uint64_t> LinkManager::LookupService(uint64_t session, const std::string& peer,
                                            const std::string& service) {
  Status up = RequireUp(peer);
  // A host without a link of its own but with a route (fabric membership):
  // the lookup goes in-band over the routed link. So it does while the
  // link of its own is down and a route through others is up.
  if (up.code() == Code::kNotFound && up.reason() == Reason::kNotLinked)
    return LookupRouted(session, peer, service);
  if (up.code() == Code::kLinkDown) {
    auto routed = LookupRouted(session, peer, service);
    return NoRouteEither(routed.status()) ? Result<uint64_t>(up) : routed;
  }
  MCDMA_RETURN_IF_ERROR(up);
  MCDMA_ASSIGN_OR_RETURN(auto ch, ChannelFor(peer));
  v1::PeerLookupServiceRequest req;
  req.set_service(service);
  MCDMA_ASSIGN_OR_RETURN(v1::PeerLookupServiceReply rep, ch->LookupService(req, rpc_timeout_));
  PeerService ps;
  ps.peer = peer;
  ps.name = service;
  ps.remote_id = rep.service_id();
  {
    MutexLock lock(mu_);
    ps.peer_instance = peers_[peer].instance;
  }
  auto r = engine_.Run([&] { return engine_.AddPeerService(session, ps); });
  if (!r) return Status(Code::kUnavailable, "the daemon is stopping");
  return *r;
}

Result<uint64_t> LinkManager::LookupRouted(uint64_t session, const std::string& peer,
                                           const std::string& service) {
  auto answer = std::make_shared<std::promise<Result<Engine::RoutedLookup>>>();
  auto future = answer->get_future();
  auto started = engine_.Run([&] {
    return engine_.StartRoutedLookup(peer, service, [answer](Result<Engine::RoutedLookup> r) {
      answer->set_value(std::move(r));
    });
  });
  if (!started) return Status(Code::kUnavailable, "the daemon is stopping");
  if (!started->ok()) {
    if (started->code() == Code::kLinkDown)
      return Status(Code::kNotFound, Reason::kNotLinked,
                    "peer '" + peer + "' is not linked to this daemon, and no route to it is up");
    return *started;
  }
  if (future.wait_for(rpc_timeout_) != std::future_status::ready)
    return Status(Code::kTimeout, "no answer from '" + peer + "' over its route within " +
                                      std::to_string(rpc_timeout_.count()) + " ms");
  MCDMA_ASSIGN_OR_RETURN(Engine::RoutedLookup found, future.get());
  PeerService ps;
  ps.peer = peer;
  ps.name = service;
  ps.remote_id = found.service_id;
  ps.peer_instance = found.instance;
  auto r = engine_.Run([&] { return engine_.AddPeerService(session, ps); });
  if (!r) return Status(Code::kUnavailable, "the daemon is stopping");
  return *r;
}

Result<ResolveInfo> LinkManager::ResolveRouted(uint64_t session, const std::string& peer,
                                               const std::string& name) {
  auto answer = std::make_shared<std::promise<Result<PeerExport>>>();
  auto future = answer->get_future();
  auto started = engine_.Run([&] {
    return engine_.StartRoutedResolve(
        peer, name, [answer](Result<PeerExport> r) { answer->set_value(std::move(r)); });
  });
  if (!started) return Status(Code::kUnavailable, "the daemon is stopping");
  if (!started->ok()) {
    if (started->code() == Code::kLinkDown)
      return Status(Code::kNotFound, Reason::kNotLinked,
                    "peer '" + peer + "' is not linked to this daemon, and no route to it is up");
    return *started;
  }
  if (future.wait_for(rpc_timeout_) != std::future_status::ready)
    return Status(Code::kTimeout, "no answer from '" + peer + "' over its route within " +
                                      std::to_string(rpc_timeout_.count()) + " ms");
  MCDMA_ASSIGN_OR_RETURN(PeerExport pe, future.get());
  auto r = engine_.Run([&] { return engine_.AddPeerHandle(session, std::move(pe)); });
  if (!r) return Status(Code::kUnavailable, "the daemon is stopping");
  return *r;
}

Result<ResolveInfo> LinkManager::Resolve(uint64_t session, const std::string& peer,
                                         const std::string& name) {
  Status up = RequireUp(peer);
  // A host without a link of its own but with a route: resolved in-band,
  // and its accesses go as routed pieces. So it is while the link of its
  // own is down and a route through others is up.
  if (up.code() == Code::kNotFound && up.reason() == Reason::kNotLinked)
    return ResolveRouted(session, peer, name);
  if (up.code() == Code::kLinkDown) {
    auto routed = ResolveRouted(session, peer, name);
    return NoRouteEither(routed.status()) ? Result<ResolveInfo>(up) : routed;
  }
  MCDMA_RETURN_IF_ERROR(up);
  MCDMA_ASSIGN_OR_RETURN(auto ch, ChannelFor(peer));
  // The pieces as each of the peer's link devices reaches them (its rails
  // may be on any of them); the transport the link runs on now must be
  // among them.
  Transport transport = Transport::kTcp;
  {
    MutexLock lock(mu_);
    for (auto* table : {&out_, &in_}) {
      auto it = table->find(peer);
      if (it == table->end() || it->second->state != PeerState::kUp) continue;
      if (const auto& up = it->second->transport) transport = *up;
    }
  }
  v1::PeerResolveExportRequest req;
  req.set_name(name);
  req.set_transport(std::string(TransportName(transport)));
  MCDMA_ASSIGN_OR_RETURN(v1::PeerResolveExportReply rep, ch->ResolveExport(req, rpc_timeout_));
  PeerExport pe;
  pe.peer = peer;
  pe.name = name;
  pe.export_id = rep.export_id();
  pe.length = rep.length();
  pe.allow_read = rep.allow_read();
  pe.allow_write = rep.allow_write();
  auto malformed = [&](const std::string& what) {
    return Status(Code::kInternal,
                  "peer '" + peer + "' described export '" + name + "' with " + what);
  };
  if (rep.keys_size() == 0 || rep.keys_size() > static_cast<int>(1 + kMaxRdmaPorts))
    return malformed(std::to_string(rep.keys_size()) + " device key sets");
  for (const v1::PeerExportKeys& k : rep.keys()) {
    if (k.device().empty() || k.device().size() > 64 || pe.keys.count(k.device()) != 0)
      return malformed("a device key set named '" + k.device() + "'");
    std::vector<PeerExport::Piece>& pieces = pe.keys[k.device()];
    uint64_t expected = 0;
    for (const auto& p : k.pieces()) {
      if (p.offset() != expected || p.length() == 0 || p.access().size() != 12)
        return malformed("malformed pieces for " + k.device());
      pieces.push_back({p.offset(), p.length(), LoadLe(p.access(), 4, 8),
                        static_cast<uint32_t>(LoadLe(p.access(), 0, 4))});
      expected += p.length();
    }
    if (expected != pe.length || pieces.empty())
      return malformed("pieces for " + k.device() + " not covering it");
  }
  if (rep.expires_in_ms() != 0) {
    pe.expires = ExpiryAfter(rep.expires_in_ms());  // a peer's value: saturates
  }
  {
    MutexLock lock(mu_);
    pe.peer_instance = peers_[peer].instance;
  }
  auto r = engine_.Run([&] { return engine_.AddPeerHandle(session, std::move(pe)); });
  if (!r) return Status(Code::kUnavailable, "the daemon is stopping");
  return *r;
}

Status LinkManager::Add(const PeerConfig& peer, PeerOrigin origin) {
  MCDMA_RETURN_IF_ERROR(ValidatePeer(peer, "peer"));
  if (peer.name == options_.host_id)
    return Status(Code::kInvalid, Reason::kPeerIdentity,
                  "'" + peer.name + "' is this host's own id");
  MutexLock lock(mu_);
  if (stopping_) return Status(Code::kUnavailable, "the daemon is stopping");
  if (out_.count(peer.name) != 0)
    return Status(Code::kAlreadyExists, "a link to '" + peer.name + "' exists");
  auto e = std::make_unique<Entry>();
  e->config = peer;
  e->origin = origin;
  Entry* raw = e.get();
  out_.emplace(peer.name, std::move(e));
  channels_.erase(peer.name);
  raw->thread = std::thread([this, raw] { DialLoop(raw); });
  spdlog::get("peer")->info("link to '{}' at {} added", peer.name, peer.address);
  return Status::Ok();
}

Status LinkManager::Remove(const std::string& peer) {
  std::shared_ptr<PeerChannel> ch;
  {
    MutexLock lock(mu_);
    bool found = false;
    if (auto it = out_.find(peer); it != out_.end()) {
      it->second->removed = true;
      retired_.push_back(std::move(it->second));
      out_.erase(it);
      found = true;
    }
    if (auto it = in_.find(peer); it != in_.end()) {
      // Kept alive (retired) for a Connect or connector still using it.
      it->second->removed = true;
      retired_.push_back(std::move(it->second));
      in_.erase(it);
      found = true;
    }
    if (!found) return Status(Code::kNotFound, "no link to '" + peer + "'");
    if (auto it = channels_.find(peer); it != channels_.end()) ch = it->second;
    channels_.erase(peer);
  }
  cv_.notify_all();
  if (ch) {
    v1::PeerGoodbyeRequest bye;
    bye.set_reason(v1::PEER_GOODBYE_REASON_REMOVED);
    bye.set_detail("link removed by an administrator");
    (void)ch->Goodbye(bye, std::chrono::milliseconds(500));
  }
  (void)engine_.Run([&] {
    engine_.DropPeer(peer, Code::kPeerGone, "the link to '" + peer + "' was removed");
    return 0;
  });
  spdlog::get("peer")->info("link to '{}' removed", peer);
  return Status::Ok();
}

void LinkManager::Fill(v1::LinksReply* out) {
  auto snaps = engine_.Run([this] { return engine_.Links(); });
  out->set_host_id(options_.host_id);
  out->set_peering(true);
  out->set_listen(listen_address_.empty() ? options_.listen : listen_address_);
  out->set_fabric_key_fingerprint(key_->Fingerprint());
  DescribeLocalVerbs(engine_.verbs_info(), out->mutable_verbs());
  if (engine_.has_verbs()) {
    DescribeRdmaPort(engine_.verbs_info(), engine_.rdma_device(engine_.verbs_info().slot),
                     out->mutable_verbs());
  }
  for (const LocalVerbsInfo& p : engine_.rdma_ports())
    DescribeRdmaPort(p, engine_.rdma_device(p.slot), out->add_devices());
  auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  for (auto* table : {&out_, &in_}) {
    for (auto& [name, e] : *table) {
      v1::LinkInfo* li = out->add_links();
      DescribeLink(name, *e, now, li);
      if (!snaps) continue;
      LinkOrigin origin = e->origin == PeerOrigin::kIncoming ? LinkOrigin::kIn : LinkOrigin::kOut;
      AddEngineCounters(*snaps, name, origin, li);
      std::vector<RailSnapshot> rails;
      for (const LinkSnapshot& s : *snaps)
        if (s.id != 0 && s.id == e->link_id) rails = s.rails;
      if (e->link_id != 0) DescribeRails(*e, now, rails, li);
    }
  }
}

void LinkManager::DescribeLink(const std::string& name, const Entry& e, TimePoint now,
                               v1::LinkInfo* li) const {
  li->set_peer(name);
  li->set_address(e.origin == PeerOrigin::kIncoming ? "" : e.config.address);
  li->set_origin(std::string(PeerOriginName(e.origin)));
  li->set_state(std::string(PeerStateName(e.state)));
  li->set_transport_requested(e.config.transport);
  li->set_transport(e.transport ? std::string(TransportName(*e.transport)) : "");
  li->set_transport_reason(e.transport_reason);
  if (e.transport == Transport::kVerbs && e.state == PeerState::kUp)
    *li->mutable_verbs() = e.verbs_path;
  li->set_generation(e.generation);
  li->set_rtt_us(e.rtt_us);
  li->set_rtt_avg_us(e.rtt_avg_us);
  li->set_rtt_min_us(e.rtt_min_us);
  li->set_state_ms(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - e.state_since).count()));
  if ((e.state == PeerState::kReconnecting || e.state == PeerState::kRefused ||
       e.state == PeerState::kConnecting) &&
      e.retry_at > now) {
    li->set_retry_in_ms(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(e.retry_at - now).count()));
  }
  li->set_last_error(e.last_error);
  li->set_last_error_reason(ReasonName(e.last_error_reason));
  li->set_down_reason(e.down_reason);
  if (auto p = peers_.find(name); p != peers_.end()) {
    li->set_peer_version(p->second.version);
    li->set_peer_instance(p->second.instance);
  }
  auto* c = li->mutable_counters();
  c->set_heartbeats_sent(e.heartbeats_sent);
  c->set_heartbeats_ok(e.heartbeats_ok);
  c->set_heartbeats_missed(e.heartbeats_missed);
  c->set_downs(e.downs);
  c->set_reconnects(e.reconnects);
}

Result<v1::LinkTestReply> LinkManager::Test(const std::string& peer, uint32_t bytes,
                                            uint32_t count) {
  if (bytes == 0) bytes = 64;
  if (count == 0) count = 10;
  if (bytes > (64u << 20) || count > 100000)
    return Status(Code::kInvalid, "link test: at most 64 MiB per round trip and 100000 rounds");
  MCDMA_RETURN_IF_ERROR(RequireUp(peer));
  auto done = std::make_shared<std::promise<Result<Engine::EchoSeries>>>();
  auto fut = done->get_future();
  auto id = engine_.Run([&] {
    return engine_.StartEchoes(peer, bytes, count, [done](Result<Engine::EchoSeries> r) {
      done->set_value(std::move(r));
    });
  });
  if (!id) return Status(Code::kUnavailable, "the daemon is stopping");
  MCDMA_RETURN_IF_ERROR(id->status());
  // Each round trip may take up to the link's timeout.
  const auto limit = rpc_timeout_ * count;
  if (fut.wait_for(limit) != std::future_status::ready) {
    (void)engine_.Run([&] {
      engine_.CancelEchoes(id->value());
      return 0;
    });
    return Status(Code::kTimeout, "no echo series from '" + peer + "' within " +
                                      std::to_string(rpc_timeout_.count()) + " ms a round trip");
  }
  MCDMA_ASSIGN_OR_RETURN(Engine::EchoSeries series, fut.get());
  v1::LinkTestReply rep;
  rep.set_transport(std::string(TransportName(series.used.transport)));
  rep.set_generation(series.used.generation);
  for (auto rtt : series.rtt)
    rep.add_rtt_us(std::chrono::duration<double, std::micro>(rtt).count());
  return rep;
}

}  // namespace mcdma::daemon
