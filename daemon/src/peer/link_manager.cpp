// LinkManager: the dialing side (one thread per peer this host dials) and
// the sweep of incoming links.
#include "peer/link_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <future>

#include "driver/tcp/tcp_transport.hpp"
#include "mcdma_internal/sys.hpp"
#include "peer/peer_util.hpp"
#include "peer/transport_choice.hpp"

namespace mcdma::daemon {
namespace {
constexpr uint32_t kProtocolVersion = 1;
// A Goodbye at stop, authentication included.
constexpr auto kGoodbyeTimeout = std::chrono::milliseconds(2000);

// A refusal is not cured by retrying soon: wrong key, wrong host id,
// unsupported transport or version.
bool IsRefusal(const Status& st) {
  return st.code() == Code::kPermissionDenied || st.code() == Code::kInvalid;
}
}  // namespace

LinkManager::LinkManager(const Options& options, Engine& engine,
                         std::shared_ptr<const FabricKey> key,
                         std::shared_ptr<grpc::ChannelCredentials> creds, uint16_t listen_port)
    : options_(options),
      engine_(engine),
      key_(std::move(key)),
      creds_(std::move(creds)),
      listen_port_(listen_port),
      instance_id_(RandomHex(16)),
      rpc_timeout_(std::chrono::milliseconds(options.link_timeout_ms)),
      own_rails_(OwnRails(options, engine.rdma_ports())) {}

LinkManager::~LinkManager() {
  // Stop() is also called on the orderly path; here only what a failed
  // start-up left (an exception from a destructor would terminate).
  try {
    Stop(v1::PEER_GOODBYE_REASON_SHUTDOWN);
  } catch (const std::exception& e) {
    fprintf(stderr, "mcdma-rpcd: stopping the links failed: %s\n", e.what());
  }
}

void LinkManager::Start() {
  (void)engine_.Run([this] {
    engine_.SetLinkDownHandler(
        [this](uint64_t link_id, const std::string& why) { OnEngineLinkDown(link_id, why); });
    engine_.SetRailDownHandler(
        [this](uint64_t link_id, uint32_t index, const std::string& why, bool never_up) {
          OnEngineRailDown(link_id, index, why, never_up);
        });
    return 0;
  });
  MutexLock lock(mu_);
  for (const PeerConfig& p : options_.peers) {
    auto e = std::make_unique<Entry>();
    e->config = p;
    e->origin = PeerOrigin::kConfig;
    Entry* raw = e.get();
    out_.emplace(p.name, std::move(e));
    raw->thread = std::thread([this, raw] { DialLoop(raw); });
  }
  sweeper_ = std::thread([this] { SweepLoop(); });
  if (!own_rails_.empty()) rail_watch_ = std::thread([this] { RailWatchLoop(); });
}

void LinkManager::Stop(v1::PeerGoodbyeReason reason) {
  std::vector<std::string> linked;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto* table : {&out_, &in_}) {
      for (auto& [name, e] : *table) {
        if (e->state == PeerState::kUp &&
            std::find(linked.begin(), linked.end(), name) == linked.end())
          linked.push_back(name);
      }
    }
  }
  cv_.notify_all();
  // Peers that only dialed us are told over a channel to where they listen.
  std::vector<std::shared_ptr<PeerChannel>> goodbyes;
  for (const std::string& name : linked) {
    if (auto ch = ChannelFor(name); ch.ok()) goodbyes.push_back(*ch);
  }
  v1::PeerGoodbyeRequest bye;
  bye.set_reason(reason);
  bye.set_detail("mcdma-rpcd is stopping");
  // Side by side, each within kGoodbyeTimeout: a channel that must first
  // authenticate (a peer that only dialed us) takes a few round trips, and
  // one unreachable peer must not hold up the others' goodbyes.
  std::vector<std::future<Status>> said;
  said.reserve(goodbyes.size());
  for (auto& ch : goodbyes) {
    said.push_back(
        std::async(std::launch::async, [&bye, ch] { return ch->Goodbye(bye, kGoodbyeTimeout); }));
  }
  for (auto& f : said) (void)f.get();
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    for (auto& [name, e] : out_) {
      if (e->thread.joinable()) threads.push_back(std::move(e->thread));
    }
    for (auto& e : retired_) {
      if (e->thread.joinable()) threads.push_back(std::move(e->thread));
    }
    for (auto& c : connectors_) threads.push_back(std::move(c.thread));
    connectors_.clear();
    if (sweeper_.joinable()) threads.push_back(std::move(sweeper_));
    if (rail_watch_.joinable()) threads.push_back(std::move(rail_watch_));
  }
  for (auto& t : threads) t.join();
  (void)engine_.Run([this] {
    engine_.SetLinkDownHandler(nullptr);
    engine_.SetRailDownHandler(nullptr);
    return 0;
  });
}

bool LinkManager::NotePeerInstance(const std::string& host, const std::string& instance,
                                   const std::string& version) {
  PeerInfo& info = peers_[host];
  bool restarted = !info.instance.empty() && info.instance != instance;
  info.instance = instance;
  info.version = version;
  if (!restarted) return false;
  spdlog::get("peer")->info("peer '{}' restarted (new instance {})", host, instance);
  // What it dialed in under its old instance is stale; its generations
  // start again at 1.
  if (auto it = in_.find(host); it != in_.end()) {
    it->second->generation = 0;
    it->second->link_id = 0;
    it->second->last_error = "peer restarted";
    it->second->last_error_reason = Reason::kNone;
    SetState(it->second.get(), PeerState::kDown);
  }
  return true;
}

std::string_view PeerStateName(PeerState s) {
  switch (s) {
    case PeerState::kConnecting:
      return "connecting";
    case PeerState::kUp:
      return "up";
    case PeerState::kReconnecting:
      return "reconnecting";
    case PeerState::kRefused:
      return "refused";
    case PeerState::kDown:
      return "down";
  }
  return "down";
}

std::string_view PeerOriginName(PeerOrigin o) {
  switch (o) {
    case PeerOrigin::kConfig:
      return "config";
    case PeerOrigin::kRuntime:
      return "runtime";
    case PeerOrigin::kIncoming:
      return "incoming";
    case PeerOrigin::kFabric:
      return "fabric";
  }
  return "config";
}

void LinkManager::SetState(Entry* e, PeerState state) {
  if (e->state == state) return;
  if (e->state == PeerState::kUp) {
    ++e->downs;
    e->down_reason = e->last_error;
  }
  e->state = state;
  e->state_since = std::chrono::steady_clock::now();
}

bool LinkManager::Wait(Entry* e, std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  cv_.wait_for(lock.native(), d,
               [&]() MCDMA_REQUIRES(mu_) { return stopping_ || e->removed || e->link_lost; });
  return !stopping_ && !e->removed;
}

void LinkManager::OfferTransports(
    google::protobuf::RepeatedPtrField<v1::PeerTransport>* out) const {
  if (engine_.has_verbs()) {
    v1::PeerTransport* v = out->Add();
    v->set_name("verbs");
    v->set_profile(engine_.verbs_info().profile);
  }
  out->Add()->set_name("tcp");
}

v1::PeerHelloRequest LinkManager::HelloRequest() const {
  v1::PeerHelloRequest req;
  req.add_protocol_versions(kProtocolVersion);
  req.set_host_id(options_.host_id);
  req.set_daemon_version(MCDMA_VERSION_TEXT);
  req.add_capabilities("one-sided");
  OfferTransports(req.mutable_transports());
  req.set_instance_id(instance_id_);
  req.set_listen_port(listen_port_);
  *req.mutable_rails() = own_rails_;
  if (auto hp = SplitHostPort(options_.listen, kDefaultPeerPort); hp.ok()) {
    const std::string& host = hp->first;
    if (host != "0.0.0.0" && host != "::" && !host.empty()) req.set_listen_host(host);
  }
  return req;
}

void LinkManager::DialLoop(Entry* e) {
  auto log = spdlog::get("peer");
  auto min = std::chrono::milliseconds(options_.reconnect_min_ms);
  auto max = std::chrono::milliseconds(options_.reconnect_max_ms);
  auto backoff = min;
  bool ever_up = false;
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_ || e->removed) return;
      e->link_lost = false;
    }
    Status st = ConnectOnce(e);
    if (st.ok()) {
      backoff = min;
      {
        MutexLock lock(mu_);
        if (ever_up) ++e->reconnects;
        // Failed attempts before the first success are not worth showing.
        if (!ever_up) {
          e->last_error.clear();
          e->last_error_reason = Reason::kNone;
        }
        ever_up = true;
      }
      log->info("link to '{}' up (generation {})", e->config.name, e->generation);
      std::thread rails;
      {
        MutexLock lock(mu_);
        if (!own_rails_.empty() && !e->peer_rails.empty()) {
          rails = std::thread(
              [this, e, gen = e->generation, link = e->link_id] { RailLoop(e, gen, link); });
        }
      }
      std::string why = HeartbeatLoop(e);
      cv_.notify_all();
      if (rails.joinable()) rails.join();
      MutexLock lock(mu_);
      if (stopping_ || e->removed) return;
      e->last_error = why;
      e->last_error_reason = Reason::kNone;
      SetState(e, PeerState::kReconnecting);
      // A peer that said Goodbye is stopping on purpose: no quick retries.
      if (e->said_goodbye) backoff = max;
      e->said_goodbye = false;
      log->warn("link to '{}' down: {}", e->config.name, why);
    } else {
      MutexLock lock(mu_);
      if (stopping_ || e->removed) return;
      e->last_error = st.message();
      e->last_error_reason = st.reason();
      bool refused = IsRefusal(st);
      SetState(e, refused ? PeerState::kRefused
                          : (ever_up ? PeerState::kReconnecting : PeerState::kConnecting));
      if (refused) backoff = max;
      log->warn("link to '{}' {}: {}", e->config.name, refused ? "refused" : "not up",
                st.ToString());
    }
    {
      MutexLock lock(mu_);
      e->retry_at = std::chrono::steady_clock::now() + backoff;
      e->link_lost = false;
    }
    if (!Wait(e, backoff)) return;
    backoff = std::min(backoff * 2, max);
  }
}

Result<std::unique_ptr<driver::Endpoint>> LinkManager::NewLinkEndpoint(Transport transport) {
  auto ep = engine_.Run([&] { return engine_.CreateLinkEndpoint(transport); });
  if (!ep) return Status(Code::kUnavailable, "the engine has stopped");
  return std::move(*ep);
}

Status LinkManager::ConnectOnce(Entry* e) {
  const std::string& name = e->config.name;
  std::shared_ptr<PeerChannel> ch = DialChannel(*e);
  MCDMA_ASSIGN_OR_RETURN(v1::PeerHelloReply hello, SayHello(*e, *ch));
  MCDMA_ASSIGN_OR_RETURN(TransportChoice choice, ChooseOutgoingTransport(*e, hello));
  const bool verbs = choice.transport == Transport::kVerbs;
  NoteHelloReply(e, hello, choice);
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<driver::Endpoint> endpoint,
                         NewLinkEndpoint(choice.transport));
  uint64_t generation = 0;
  {
    // Every attempt takes a new generation: the peer may have accepted an
    // attempt whose data connection then failed.
    MutexLock lock(mu_);
    generation = ++e->generation;
    e->rtt_min_us = 0;  // a new data link: its own round trips
  }
  v1::PeerConnectRequest creq;
  std::string local_info = endpoint->LocalInfo();
  creq.set_transport(std::string(TransportName(choice.transport)));
  creq.set_endpoint_info(local_info);
  creq.set_generation(generation);
  creq.set_slot_bytes(options_.link_slot_bytes);
  MCDMA_ASSIGN_OR_RETURN(v1::PeerConnectReply crep, ch->Connect(creq, rpc_timeout_));
  std::string remote = crep.endpoint_info();
  v1::VerbsPath path;
  if (verbs) {
    MCDMA_ASSIGN_OR_RETURN(path, DescribeVerbsPath(engine_.verbs_info(), local_info, remote));
  } else {
    MCDMA_ASSIGN_OR_RETURN(std::string host, HostOf(e->config.address));
    MCDMA_ASSIGN_OR_RETURN(remote, driver::tcp::RebaseEndpointInfo(remote, host));
  }
  auto conn = endpoint->Connect(remote);
  if (!conn.ok()) {
    return Status(conn.status().code(), "data connection to '" + name + "' over " +
                                            std::string(TransportName(choice.transport)) + ": " +
                                            conn.status().message());
  }
  LinkSpec spec{
      name, LinkOrigin::kOut, generation, hello.instance_id(), crep.slot_bytes(), choice.transport};
  if (verbs) spec.peer_device = path.peer_device();
  return InstallOutgoing(e, spec, conn.value(), path);
}

std::shared_ptr<PeerChannel> LinkManager::DialChannel(const Entry& e) {
  const std::string& name = e.config.name;
  MutexLock lock(mu_);
  auto it = channels_.find(name);
  if (it == channels_.end() || it->second->target() != e.config.address) {
    channels_[name] = MakeChannel(e.config.address, name);
  }
  return channels_[name];
}

Result<v1::PeerHelloReply> LinkManager::SayHello(const Entry& e, PeerChannel& ch) {
  const std::string& name = e.config.name;
  MCDMA_ASSIGN_OR_RETURN(v1::PeerHelloReply hello, ch.Hello(HelloRequest(), rpc_timeout_));
  if (hello.host_id() != name) {
    return Status(Code::kInvalid, "the daemon at " + e.config.address + " is '" + hello.host_id() +
                                      "', not '" + name + "'");
  }
  return hello;
}

Result<TransportChoice> LinkManager::ChooseOutgoingTransport(
    const Entry& e, const v1::PeerHelloReply& hello) const {
  bool peer_tcp = false;
  VerbsOffer peer_verbs;
  for (const auto& t : hello.transports()) {
    peer_tcp |= t.name() == "tcp";
    if (t.name() == "verbs" && !peer_verbs.offered) peer_verbs = {true, t.profile()};
  }
  return ChooseTransport(e.config.transport, e.config.name, engine_.verbs_info(), peer_verbs,
                         peer_tcp);
}

void LinkManager::NoteHelloReply(Entry* e, const v1::PeerHelloReply& hello,
                                 const TransportChoice& choice) {
  const std::string& name = e->config.name;
  bool restarted = false;
  {
    MutexLock lock(mu_);
    restarted = NotePeerInstance(name, hello.instance_id(), hello.daemon_version());
    e->peer_rails = AcceptRails(name, hello.rails());
    e->transport = choice.transport;
    e->transport_reason = choice.reason;
    e->verbs_path.Clear();
  }
  if (restarted) {
    (void)engine_.Run([&] {
      engine_.DropPeer(name, Code::kPeerGone, "peer '" + name + "' restarted");
      return 0;
    });
  }
}

Status LinkManager::InstallOutgoing(Entry* e, const LinkSpec& spec,
                                    std::unique_ptr<driver::Connection>& conn,
                                    const v1::VerbsPath& path) {
  // Installed and recorded in one engine step: a link-down report (also on
  // the engine thread) cannot fall in between.
  auto installed = engine_.Run([&]() -> Status {
    MutexLock lock(mu_);
    if (e->removed || stopping_) return Status(Code::kLinkDown, "removed while connecting");
    MCDMA_ASSIGN_OR_RETURN(uint64_t id, engine_.InstallLink(spec, std::move(conn)));
    e->link_id = id;
    e->link_lost = false;
    e->last_heartbeat = std::chrono::steady_clock::now();
    e->verbs_path = path;
    SetState(e, PeerState::kUp);
    return Status::Ok();
  });
  if (!installed) return Status(Code::kUnavailable, "the engine has stopped");
  return *installed;
}

std::string LinkManager::HeartbeatLoop(Entry* e) {
  auto interval = std::chrono::milliseconds(options_.heartbeat_ms);
  auto timeout = std::chrono::milliseconds(options_.link_timeout_ms);
  std::shared_ptr<PeerChannel> ch;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(e->config.name);
    if (it != channels_.end()) ch = it->second;
  }
  auto last_ok = std::chrono::steady_clock::now();
  std::string why;
  while (ch) {
    if (!Wait(e, interval)) {
      why = "stopping";
      break;
    }
    {
      MutexLock lock(mu_);
      if (e->link_lost) {
        why = e->last_error.empty() ? "the data link failed" : e->last_error;
      }
    }
    if (!why.empty()) break;  // the link is dropped below if it is still installed
    v1::PeerHeartbeatRequest req;
    req.set_generation(e->generation);
    auto sent_at = std::chrono::steady_clock::now();
    req.set_timestamp_ns(static_cast<uint64_t>(sent_at.time_since_epoch().count()));
    {
      MutexLock lock(mu_);
      req.set_rtt_us(e->rtt_us);
      ++e->heartbeats_sent;
    }
    auto rep = ch->Heartbeat(req, timeout);
    auto now = std::chrono::steady_clock::now();
    if (rep.ok() && rep->generation() == e->generation) {
      double rtt = std::chrono::duration<double, std::micro>(now - sent_at).count();
      MutexLock lock(mu_);
      ++e->heartbeats_ok;
      e->rtt_us = rtt;
      e->rtt_avg_us = e->rtt_avg_us == 0 ? rtt : 0.875 * e->rtt_avg_us + 0.125 * rtt;
      e->rtt_min_us = e->rtt_min_us == 0 ? rtt : std::min(e->rtt_min_us, rtt);
      e->last_heartbeat = now;
      last_ok = now;
      continue;
    }
    {
      MutexLock lock(mu_);
      ++e->heartbeats_missed;
    }
    if (rep.ok()) {
      why = "peer holds generation " + std::to_string(rep->generation()) + ", not " +
            std::to_string(e->generation);
      break;
    }
    if (now - last_ok >= timeout || rep.status().code() == Code::kPermissionDenied) {
      why = "no heartbeat answer for " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(now - last_ok).count()) +
            " ms: " + rep.status().message();
      break;
    }
  }
  if (why.empty()) why = "the link was removed";
  DropOutgoingLink(e, why);
  return why;
}

void LinkManager::DropOutgoingLink(Entry* e, const std::string& why) {
  uint64_t link_id = 0;
  {
    MutexLock lock(mu_);
    link_id = e->link_id;
    e->link_id = 0;
  }
  if (link_id != 0) {
    Code code = why == "stopping" ? Code::kPeerGone : Code::kLinkDown;
    (void)engine_.Run([&] {
      engine_.DropLink(link_id, code, why);
      return 0;
    });
  }
}

void LinkManager::OnEngineLinkDown(uint64_t link_id, const std::string& why) {
  {
    MutexLock lock(mu_);
    for (auto* table : {&out_, &in_}) {
      for (auto& [name, e] : *table) {
        if (e->link_id != link_id) continue;
        e->link_lost = true;
        e->last_error = why;
        e->last_error_reason = Reason::kNone;
        if (e->origin == PeerOrigin::kIncoming) {
          e->link_id = 0;
          SetState(e.get(), PeerState::kDown);
        }
      }
    }
  }
  cv_.notify_all();
}

void LinkManager::SweepLoop() {
  auto interval = std::chrono::milliseconds(options_.heartbeat_ms);
  auto timeout = std::chrono::milliseconds(options_.link_timeout_ms);
  MutexLock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock.native(), interval, [&]() MCDMA_REQUIRES(mu_) { return stopping_; });
    if (stopping_) break;
    auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<uint64_t, std::string>> drop;
    for (auto& [name, e] : in_) {
      if (e->state != PeerState::kUp || e->link_id == 0 || now - e->last_heartbeat < timeout)
        continue;
      std::string why = "no heartbeat from '" + name + "' for " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           now - e->last_heartbeat)
                                           .count()) +
                        " ms";
      drop.emplace_back(e->link_id, why);
      e->last_error = why;
      e->last_error_reason = Reason::kNone;
      e->link_id = 0;
      SetState(e.get(), PeerState::kDown);
    }
    if (drop.empty()) continue;
    lock.Unlock();
    for (const auto& d : drop) {
      (void)engine_.Run([&] {
        engine_.DropLink(d.first, Code::kLinkDown, d.second);
        return 0;
      });
    }
    lock.Lock();
  }
}

}  // namespace mcdma::daemon
