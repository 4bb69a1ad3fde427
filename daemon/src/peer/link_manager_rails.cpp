// LinkManager: the rails of links (docs/architecture.md §21). The dialer
// probes each candidate pair of the canonical plan with a real connection
// (AddRail, then both ends connect and the engine sends a probe over the
// new connection; a pair whose probe is not answered within rail_probe_ms
// is no rail) and probes a failed one again after the hold-down; both ends
// watch their up rails — a tcp rail's interface, an RDMA rail's port — and
// take a rail out when it stops. The engine reissues what a failed rail
// carried.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <set>
#include <tuple>

#include "peer/link_manager.hpp"
#include "platform/netif.hpp"
#include "verbs_support.hpp"

namespace mcdma::daemon {
namespace {
constexpr auto kRailWatchInterval = std::chrono::milliseconds(100);
constexpr auto kMaxProbeInterval = std::chrono::milliseconds(60'000);
// A pair whose end on the peer is not ready is asked again after 200, 400,
// 800 ms, then every second.
constexpr auto kMaxEndDownInterval = std::chrono::milliseconds(1000);
// A pair that was up before and failed its probe is asked again this many
// times on the same quick schedule: right after a port comes back its path
// may not carry yet (routes, neighbour entries, a switch port still
// learning), and a pair known to meet should not wait seconds for it.
constexpr uint32_t kQuickReprobes = 4;

// The quick schedule, after `n` tries in a row: 200, 400, 800 ms, then
// every second.
std::chrono::milliseconds QuickRetryWait(uint32_t n) {
  return std::min<std::chrono::milliseconds>(kRailWatchInterval * (2u << std::min<uint32_t>(n, 3)),
                                             kMaxEndDownInterval);
}

// Whether a failed probe is followed by a quick one (see FailedProbeWait).
bool QuickReprobe(uint32_t fails, uint64_t downs) { return downs > 0 && fails < kQuickReprobes; }

// How long after a failed probe a pair is probed again, `fails` probes
// having failed in a row before it and the pair having gone down `downs`
// times after being up: quickly a few times for a pair that met before
// (kQuickReprobes), else the hold-down doubled per failure, up to once a
// minute (two cables that do not meet).
std::chrono::milliseconds FailedProbeWait(uint32_t fails, uint64_t downs,
                                          std::chrono::milliseconds hold_down) {
  if (QuickReprobe(fails, downs)) return QuickRetryWait(fails);
  return std::min<std::chrono::milliseconds>(hold_down * (1u << std::min<uint32_t>(fails, 6)),
                                             kMaxProbeInterval);
}

// Whether the interface holding `address` runs; the error says why not.
Status InterfaceRuns(const std::string& address) {
  MCDMA_ASSIGN_OR_RETURN(platform::InterfaceState state, platform::InterfaceHolding(address));
  if (!state.running) return Status(Code::kLinkDown, "interface " + state.name + " is down");
  return Status::Ok();
}

// The stricter of two profiles that meet: the connection runs at it.
std::string StricterProfile(const std::string& a, const std::string& b) {
  for (const char* strict : {"apple-tb5", "mcdma-cx5"})
    if (a == strict || b == strict) return strict;
  return a;
}

// Whether the dialer's config lets it use a pair: "tcp" links only tcp
// rails; "verbs" links only RDMA rails, less the pair of both first
// devices (the link's own connection); "auto" links every pair.
bool PairWanted(const RailPair& p, const std::string& transport, const RailOffer& own,
                const RailOffer& peer) {
  const bool verbs = p.dialer.transport() == "verbs";
  if (transport == "tcp") return !verbs;
  if (transport != "verbs") return true;
  if (!verbs) return false;
  auto first = [](const RailOffer& offer) -> std::string {
    for (const v1::PeerRail& r : offer)
      if (r.transport() == "verbs") return r.name();
    return "";
  };
  return !(p.dialer.name() == first(own) && p.callee.name() == first(peer));
}
}  // namespace

const LocalVerbsInfo* LinkManager::RdmaPortNamed(const std::string& name) const {
  for (const LocalVerbsInfo& p : engine_.rdma_ports())
    if (p.rail == name) return &p;
  return nullptr;
}

RailSpec LinkManager::SpecOf(const RailPair& pair, bool dialer, uint32_t peer_slot_bytes) const {
  const v1::PeerRail& mine = dialer ? pair.dialer : pair.callee;
  const v1::PeerRail& theirs = dialer ? pair.callee : pair.dialer;
  RailSpec spec;
  spec.index = pair.index;
  spec.local = mine.name();
  spec.remote = theirs.name();
  spec.peer_slot_bytes = peer_slot_bytes;
  if (mine.transport() == "verbs") {
    spec.transport = Transport::kVerbs;
    spec.profile = StricterProfile(mine.profile(), theirs.profile());
    const LocalVerbsInfo* port = RdmaPortNamed(mine.name());
    spec.slot = port != nullptr ? port->slot : 0;  // 0: no such port (RailEndpoint refuses)
    spec.device = mine.device();
    spec.port = mine.port();
    spec.peer_device = theirs.device();
  } else {
    spec.transport = Transport::kTcp;
    spec.profile = "tcp";
    spec.slot = kTcpSlot;
    spec.peer_device = std::string(kTcpKeys);
  }
  return spec;
}

Status LinkManager::RailEndReady(const RailSpec& spec) const {
  if (spec.transport == Transport::kTcp) {
    for (const v1::PeerRail& r : own_rails_)
      if (r.name() == spec.local) return InterfaceRuns(r.address());
    return Status(Code::kInvalid, "no rail '" + spec.local + "' on this host");
  }
  driver::Device* dev = engine_.rdma_device(spec.slot);
  if (dev == nullptr)
    return Status(Code::kInvalid, "no RDMA port '" + spec.local + "' on this host");
  RdmaPortState st = StateOfRdmaPort(dev);
  if (!st.active)
    return Status(Code::kLinkDown, "port " + spec.device + ":" + std::to_string(spec.port) +
                                       " is not ACTIVE" +
                                       (st.failure.empty() ? "" : " (" + st.failure + ")"));
  return Status::Ok();
}

Result<std::unique_ptr<driver::Endpoint>> LinkManager::RailEndpoint(const RailSpec& spec) {
  const auto probe = std::chrono::milliseconds(options_.rail_probe_ms);
  std::string address;
  for (const v1::PeerRail& r : own_rails_)
    if (r.name() == spec.local) address = r.address();
  auto ep = engine_.Run([&]() -> Result<std::unique_ptr<driver::Endpoint>> {
    if (spec.transport == Transport::kVerbs) return engine_.CreateRdmaEndpoint(spec.slot);
    return engine_.CreateRailEndpoint(address, probe);
  });
  if (!ep) return Status(Code::kUnavailable, "the engine has stopped");
  return std::move(*ep);
}

RailOffer LinkManager::AcceptRails(const std::string& peer, const RailOffer& offered) const {
  Status st = CheckRailOffer(offered, "peer '" + peer + "'");
  if (st.ok()) return offered;
  spdlog::get("peer")->warn("rails of '{}' refused, its links run on their own connection: {}",
                            peer, st.message());
  return {};
}

void LinkManager::RailLoop(Entry* e, uint64_t generation, uint64_t link_id) {
  auto log = spdlog::get("peer");
  const auto hold_down = std::chrono::milliseconds(options_.rail_hold_down_ms);
  std::shared_ptr<PeerChannel> ch;
  std::vector<RailPair> plan;
  {
    MutexLock lock(mu_);
    auto it = channels_.find(e->config.name);
    if (it != channels_.end()) ch = it->second;
    for (const RailPair& p : PlanRails(own_rails_, e->peer_rails)) {
      if (!PairWanted(p, e->config.transport, own_rails_, e->peer_rails)) continue;
      plan.push_back(p);
      RailSpec spec = SpecOf(p, /*dialer=*/true, 0);
      Entry::RailTry& t = e->rails[p.index];
      t.up = false;
      t.Describe(spec);
    }
  }
  if (!ch) return;
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_ || e->removed || e->link_lost || e->link_id != link_id) return;
    }
    // The pairs due for a probe whose end here is ready. A rail whose
    // interface is down or whose port is not ACTIVE is not probed, and that
    // is no failed probe: it is probed at the first look after it is back.
    std::vector<const RailPair*> due;
    auto now = std::chrono::steady_clock::now();
    for (const RailPair& p : plan) {
      {
        MutexLock lock(mu_);
        if (stopping_ || e->link_lost || e->link_id != link_id) return;
        const Entry::RailTry& t = e->rails[p.index];
        if (t.up || now < t.retry_at) continue;
      }
      Status ready = RailEndReady(SpecOf(p, /*dialer=*/true, 0));
      if (!ready.ok()) {
        MutexLock lock(mu_);
        e->rails[p.index].last_error = ready.message();
        continue;
      }
      due.push_back(&p);
    }
    // Probes run side by side: a pair that does not meet costs its probe
    // time without holding up the others.
    std::vector<std::future<Status>> probes;
    probes.reserve(due.size());
    for (const RailPair* p : due) {
      probes.push_back(std::async(std::launch::async, [this, e, &ch, p, generation, link_id] {
        return ProbeRail(e, *ch, *p, generation, link_id);
      }));
    }
    for (size_t i = 0; i < due.size(); ++i) {
      const RailPair& p = *due[i];
      Status st = probes[i].get();
      MutexLock lock(mu_);
      Entry::RailTry& t = e->rails[p.index];
      if (st.ok()) {
        // Installed, its probe on its way: the engine says when it fails
        // (OnEngineRailDown), and the failure of a probe counts there.
        continue;
      }
      if (!t.up && st.reason() == Reason::kRailEndDown) {
        // The peer's end is not ready (its cable is still coming back):
        // like this end not ready, no failed probe; asked again within
        // kMaxEndDownInterval, so a rail is back about as soon as both
        // ends are.
        if (t.end_down == 0)
          log->info("link to '{}': rail {} ({} > {}) waits for the peer's end: {}", e->config.name,
                    p.index, p.dialer.name(), p.callee.name(), st.message());
        t.last_error = st.message();
        t.retry_at = std::chrono::steady_clock::now() + QuickRetryWait(t.end_down);
        ++t.end_down;
        continue;
      }
      if (!t.up) {
        t.end_down = 0;
        const auto wait = FailedProbeWait(t.fails, t.downs, hold_down);
        if (t.fails == 0 || QuickReprobe(t.fails, t.downs))
          log->info("link to '{}': rail {} ({} > {}) not up: {}; probed again in {} ms",
                    e->config.name, p.index, p.dialer.name(), p.callee.name(), st.message(),
                    wait.count());
        t.last_error = st.message();
        t.retry_at = std::chrono::steady_clock::now() + wait;
        ++t.fails;
      }
    }
    if (!Wait(e, kRailWatchInterval)) return;
  }
}

Status LinkManager::ProbeRail(Entry* e, PeerChannel& ch, const RailPair& pair, uint64_t generation,
                              uint64_t link_id) {
  RailSpec spec = SpecOf(pair, /*dialer=*/true, 0);
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<driver::Endpoint> endpoint, RailEndpoint(spec));
  v1::PeerAddRailRequest req;
  req.set_generation(generation);
  req.set_index(pair.index);
  req.set_caller_rail(pair.dialer.name());
  req.set_callee_rail(pair.callee.name());
  req.set_endpoint_info(endpoint->LocalInfo());
  req.set_slot_bytes(options_.link_slot_bytes);
  MCDMA_ASSIGN_OR_RETURN(v1::PeerAddRailReply rep, ch.AddRail(req, rpc_timeout_));
  if (spec.transport == Transport::kVerbs) {
    MCDMA_RETURN_IF_ERROR(
        CheckVerbsEndpoint(rep.endpoint_info(), pair.callee, "peer '" + e->config.name + "'"));
  }
  auto conn = endpoint->Connect(rep.endpoint_info());
  if (!conn.ok()) return Status(conn.status().code(), "probe: " + conn.status().message());
  spec.peer_slot_bytes = rep.slot_bytes();
  auto added = engine_.Run([&]() -> Status {
    MutexLock lock(mu_);
    if (e->link_id != link_id) return Status(Code::kLinkDown, "the link went down meanwhile");
    MCDMA_RETURN_IF_ERROR(engine_.AddRail(link_id, spec, std::move(conn).value()));
    Entry::RailTry& t = e->rails[pair.index];
    t.up = true;
    t.end_down = 0;
    t.last_error.clear();
    return Status::Ok();
  });
  if (!added) return Status(Code::kUnavailable, "the engine has stopped");
  return *added;
}

Result<v1::PeerAddRailReply> LinkManager::OnAddRail(const std::string& host,
                                                    const v1::PeerAddRailRequest& req) {
  RailPair pair;
  uint64_t link_id = 0;
  Entry* e = nullptr;
  {
    MutexLock lock(mu_);
    if (stopping_) return Status(Code::kUnavailable, "the daemon is stopping");
    auto it = in_.find(host);
    auto peer = peers_.find(host);
    if (it == in_.end() || peer == peers_.end() || it->second->link_id == 0 ||
        it->second->generation != req.generation()) {
      return Status(Code::kLinkDown, "no link of generation " + std::to_string(req.generation()) +
                                         " from '" + host + "' is up here");
    }
    e = it->second.get();
    link_id = e->link_id;
    std::vector<RailPair> plan = PlanRails(peer->second.rails, own_rails_);
    MCDMA_ASSIGN_OR_RETURN(pair,
                           FindRailPair(plan, req.index(), req.caller_rail(), req.callee_rail()));
  }
  RailSpec spec = SpecOf(pair, /*dialer=*/false, req.slot_bytes());
  if (spec.transport == Transport::kVerbs)
    MCDMA_RETURN_IF_ERROR(
        CheckVerbsEndpoint(req.endpoint_info(), pair.dialer, "peer '" + host + "'"));
  // Not ready here is no pair that fails to meet: the dialer tries again
  // soon, without counting a failed probe (RailLoop).
  if (Status ready = RailEndReady(spec); !ready.ok())
    return Status(ready.code(), Reason::kRailEndDown, ready.message());
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<driver::Endpoint> owned, RailEndpoint(spec));
  std::shared_ptr<driver::Endpoint> endpoint = std::move(owned);
  v1::PeerAddRailReply rep;
  rep.set_endpoint_info(endpoint->LocalInfo());
  rep.set_slot_bytes(options_.link_slot_bytes);
  const std::string& remote = req.endpoint_info();
  MutexLock lock(mu_);
  if (stopping_) return Status(Code::kUnavailable, "the daemon is stopping");
  JoinFinishedConnectors();
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t([this, e, link_id, endpoint, spec, remote, done] {
    auto conn = endpoint->Connect(remote);
    if (conn.ok()) {
      (void)engine_.Run([&]() -> Status {
        MutexLock lock(mu_);
        if (e->link_id != link_id) return Status(Code::kLinkDown, "gone");
        Status st = engine_.AddRail(link_id, spec, std::move(conn).value());
        if (st.ok()) {
          Entry::RailTry& t = e->rails[spec.index];
          t.Describe(spec);
          t.up = true;
          t.last_error.clear();
        }
        return st;
      });
    } else {
      MutexLock lock(mu_);
      Entry::RailTry& t = e->rails[spec.index];
      t.Describe(spec);
      t.last_error = conn.status().message();
    }
    done->store(true);
  });
  connectors_.push_back(Connector{std::move(t), done});
  return rep;
}

void LinkManager::OnEngineRailDown(uint64_t link_id, uint32_t index, const std::string& why,
                                   bool never_up) {
  const auto hold_down = std::chrono::milliseconds(options_.rail_hold_down_ms);
  {
    MutexLock lock(mu_);
    for (auto* table : {&out_, &in_}) {
      for (auto& [name, e] : *table) {
        if (e->link_id != link_id) continue;
        Entry::RailTry& t = e->rails[index];
        t.up = false;
        t.last_error = why;
        if (never_up) {
          // Connected but its probe went unanswered: a failed probe, as one
          // that does not connect.
          t.retry_at =
              std::chrono::steady_clock::now() + FailedProbeWait(t.fails, t.downs, hold_down);
          ++t.fails;
        } else {
          ++t.downs;
          t.fails = 0;
          t.retry_at = std::chrono::steady_clock::now() + hold_down;
        }
      }
    }
  }
  cv_.notify_all();
}

void LinkManager::RailWatchLoop() {
  struct Watched {
    uint64_t link_id;
    uint32_t index;
    RailSpec spec;
  };
  while (true) {
    std::vector<Watched> watched;
    {
      MutexLock lock(mu_);
      cv_.wait_for(lock.native(), kRailWatchInterval,
                   [&]() MCDMA_REQUIRES(mu_) { return stopping_; });
      if (stopping_) return;
      for (auto* table : {&out_, &in_}) {
        for (auto& [name, e] : *table) {
          if (e->link_id == 0) continue;
          for (auto& [index, t] : e->rails) {
            if (!t.up) continue;
            watched.push_back({e->link_id, index, t.WatchSpec()});
          }
        }
      }
    }
    // A rail whose path broke elsewhere (its interface still runs) shows
    // as work that does not complete.
    if (!watched.empty()) {
      const auto stalled_after = std::chrono::milliseconds(options_.link_timeout_ms);
      (void)engine_.Run([&] { return engine_.TakeStalledRailsDown(stalled_after); });
    }
    for (const Watched& w : watched) {
      Status st = RailEndReady(w.spec);
      if (st.ok()) continue;
      std::string why =
          (w.spec.transport == Transport::kVerbs ? "rail port: " : "rail interface: ") +
          st.message();
      (void)engine_.Run([&] {
        engine_.TakeRailDown(w.link_id, w.index, why);
        return 0;
      });
    }
  }
}

void LinkManager::DescribeRails(const Entry& e, TimePoint now,
                                const std::vector<RailSnapshot>& engine_rails,
                                v1::LinkInfo* li) const {
  std::set<uint32_t> shown;
  for (const RailSnapshot& r : engine_rails) {
    v1::RailInfo* ri = li->add_rails();
    shown.insert(r.index);
    ri->set_index(r.index);
    ri->set_transport(std::string(TransportName(r.transport)));
    ri->set_local(r.local);
    ri->set_remote(r.remote);
    ri->set_name(r.index == 0 ? "link" : r.local + ">" + r.remote);
    ri->set_profile(r.profile);
    ri->set_state(r.up ? "up" : r.probing ? "probing" : "down");
    ri->set_device(r.device);
    ri->set_port(r.port);
    if (r.transport == Transport::kVerbs) ri->set_peer_device(r.peer_device);
    ri->set_probe_rtt_us(r.probe_rtt_us);
    ri->set_up_for_ms(r.up_for_ms);
    ri->set_last_resort(r.last_resort);
    ri->set_messages(r.messages);
    ri->set_bytes_sent(r.stats.bytes_sent);
    ri->set_bytes_received(r.stats.bytes_received);
    ri->set_slices(r.stats.slices);
    ri->set_slices_reissued(r.stats.slices_reissued);
    ri->set_inflight_bytes(r.inflight_bytes);
    ri->set_throughput_mbps(r.rate_bps / 1e6);
    ri->set_share(r.share);
    ri->set_downs(r.stats.downs);
    ri->set_last_error(r.last_error);
    auto t = e.rails.find(r.index);
    if (!r.up && t != e.rails.end()) {
      // Shown while it is not up: once up, its failed probes are history
      // (counted again from its next down).
      ri->set_failed_probes(t->second.fails);
      // Down and not being probed: what its latest probe met (the peer
      // refusing, a connect that failed) is newer than why it went down.
      if (!t->second.up && !t->second.last_error.empty()) ri->set_last_error(t->second.last_error);
      if (t->second.retry_at > now) {
        ri->set_retry_in_ms(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(t->second.retry_at - now)
                .count()));
      }
    }
  }
  for (const auto& [index, t] : e.rails) {
    if (shown.count(index) != 0) continue;
    v1::RailInfo* ri = li->add_rails();
    ri->set_index(index);
    ri->set_transport(t.transport);
    ri->set_device(t.device);
    ri->set_peer_device(t.peer_device);
    ri->set_local(t.local);
    ri->set_remote(t.remote);
    ri->set_name(t.local + ">" + t.remote);
    ri->set_state("down");
    ri->set_downs(t.downs);
    ri->set_failed_probes(t.fails);
    ri->set_last_error(t.last_error);
    if (t.retry_at > now) {
      ri->set_retry_in_ms(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(t.retry_at - now).count()));
    }
  }
}

}  // namespace mcdma::daemon
