// LinkManager: the rails of links (docs/architecture.md §21). The dialer
// probes each candidate pair of the canonical plan with a real connection
// (AddRail, then both ends connect; a pair that does not connect within
// rail_probe_ms is no rail) and probes a failed one again after the
// hold-down; both ends watch the interfaces of their up rails and take a
// rail out when its interface stops running. The engine reissues what a
// failed rail carried.
#include <spdlog/spdlog.h>

#include <future>
#include <set>
#include <tuple>

#include "peer/link_manager.hpp"
#include "platform/netif.hpp"

namespace mcdma::daemon {
namespace {
constexpr auto kRailWatchInterval = std::chrono::milliseconds(100);
constexpr auto kMaxProbeInterval = std::chrono::milliseconds(60'000);

// Whether the interface holding `address` runs; the error says why not.
Status InterfaceRuns(const std::string& address) {
  MCDMA_ASSIGN_OR_RETURN(platform::InterfaceState state, platform::InterfaceHolding(address));
  if (!state.running) return Status(Code::kLinkDown, "interface " + state.name + " is down");
  return Status::Ok();
}
// The engine's view of a pair, from the end that is the dialer or not.
RailSpec SpecOf(const RailPair& pair, bool dialer, uint32_t peer_slot_bytes) {
  RailSpec spec;
  spec.index = pair.index;
  spec.local = dialer ? pair.dialer.name() : pair.callee.name();
  spec.remote = dialer ? pair.callee.name() : pair.dialer.name();
  spec.transport = Transport::kTcp;
  spec.profile = "tcp";
  spec.peer_slot_bytes = peer_slot_bytes;
  return spec;
}
}  // namespace

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
    plan = PlanRails(own_rails_, e->peer_rails);
    for (const RailPair& p : plan) {
      Entry::RailTry& t = e->rails[p.index];
      t.up = false;
      t.local = p.dialer.name();
      t.remote = p.callee.name();
      t.local_address = p.dialer.address();
    }
  }
  if (!ch) return;
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_ || e->removed || e->link_lost || e->link_id != link_id) return;
    }
    // The pairs due for a probe whose interface runs. A rail whose
    // interface is down is not probed, and that is no failed probe: it is
    // probed at the first look after its interface comes back.
    std::vector<const RailPair*> due;
    auto now = std::chrono::steady_clock::now();
    for (const RailPair& p : plan) {
      {
        MutexLock lock(mu_);
        if (stopping_ || e->link_lost || e->link_id != link_id) return;
        const Entry::RailTry& t = e->rails[p.index];
        if (t.up || now < t.retry_at) continue;
      }
      Status runs = InterfaceRuns(p.dialer.address());
      if (!runs.ok()) {
        MutexLock lock(mu_);
        e->rails[p.index].last_error = runs.message();
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
        // ProbeRail marked it up in the step that installed it; it may
        // have gone down again since (then OnEngineRailDown said so).
        t.fails = 0;
      } else if (!t.up) {
        if (t.fails == 0)
          log->info("link to '{}': rail {} ({} > {}) not up: {}", e->config.name, p.index,
                    p.dialer.name(), p.callee.name(), st.message());
        t.last_error = st.message();
        // A pair that keeps failing its probe (two cables that do not
        // meet) is tried less and less often, up to once a minute.
        auto wait = hold_down * (1u << std::min<uint32_t>(t.fails, 6));
        t.retry_at = std::chrono::steady_clock::now() + std::min(wait, kMaxProbeInterval);
        ++t.fails;
      }
    }
    if (!Wait(e, kRailWatchInterval)) return;
  }
}

Status LinkManager::ProbeRail(Entry* e, PeerChannel& ch, const RailPair& pair, uint64_t generation,
                              uint64_t link_id) {
  const auto probe = std::chrono::milliseconds(options_.rail_probe_ms);
  auto ep = engine_.Run([&] { return engine_.CreateRailEndpoint(pair.dialer.address(), probe); });
  if (!ep) return Status(Code::kUnavailable, "the engine has stopped");
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<driver::Endpoint> endpoint, std::move(*ep));
  v1::PeerAddRailRequest req;
  req.set_generation(generation);
  req.set_index(pair.index);
  req.set_caller_rail(pair.dialer.name());
  req.set_callee_rail(pair.callee.name());
  req.set_endpoint_info(endpoint->LocalInfo());
  req.set_slot_bytes(options_.link_slot_bytes);
  MCDMA_ASSIGN_OR_RETURN(v1::PeerAddRailReply rep, ch.AddRail(req, rpc_timeout_));
  auto conn = endpoint->Connect(rep.endpoint_info());
  if (!conn.ok()) return Status(conn.status().code(), "probe: " + conn.status().message());
  RailSpec spec = SpecOf(pair, /*dialer=*/true, rep.slot_bytes());
  auto added = engine_.Run([&]() -> Status {
    MutexLock lock(mu_);
    if (e->link_id != link_id) return Status(Code::kLinkDown, "the link went down meanwhile");
    MCDMA_RETURN_IF_ERROR(engine_.AddRail(link_id, spec, std::move(conn).value()));
    Entry::RailTry& t = e->rails[pair.index];
    t.up = true;
    t.last_error.clear();
    spdlog::get("peer")->info("link to '{}': rail {} up ({} > {})", e->config.name, pair.index,
                              pair.dialer.name(), pair.callee.name());
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
  const auto probe = std::chrono::milliseconds(options_.rail_probe_ms);
  auto ep = engine_.Run([&] { return engine_.CreateRailEndpoint(pair.callee.address(), probe); });
  if (!ep) return Status(Code::kUnavailable, "the engine has stopped");
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<driver::Endpoint> owned, std::move(*ep));
  std::shared_ptr<driver::Endpoint> endpoint = std::move(owned);
  v1::PeerAddRailReply rep;
  rep.set_endpoint_info(endpoint->LocalInfo());
  rep.set_slot_bytes(options_.link_slot_bytes);
  RailSpec spec = SpecOf(pair, /*dialer=*/false, req.slot_bytes());
  const std::string& remote = req.endpoint_info();
  const std::string& local_address = pair.callee.address();
  MutexLock lock(mu_);
  if (stopping_) return Status(Code::kUnavailable, "the daemon is stopping");
  JoinFinishedConnectors();
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t([this, e, link_id, endpoint, spec, remote, local_address, done] {
    auto conn = endpoint->Connect(remote);
    if (conn.ok()) {
      (void)engine_.Run([&]() -> Status {
        MutexLock lock(mu_);
        if (e->link_id != link_id) return Status(Code::kLinkDown, "gone");
        Status st = engine_.AddRail(link_id, spec, std::move(conn).value());
        if (st.ok()) {
          Entry::RailTry& t = e->rails[spec.index];
          t.up = true;
          t.local = spec.local;
          t.remote = spec.remote;
          t.local_address = local_address;
          t.last_error.clear();
        }
        return st;
      });
    } else {
      MutexLock lock(mu_);
      Entry::RailTry& t = e->rails[spec.index];
      t.local = spec.local;
      t.remote = spec.remote;
      t.last_error = conn.status().message();
    }
    done->store(true);
  });
  connectors_.push_back(Connector{std::move(t), done});
  return rep;
}

void LinkManager::OnEngineRailDown(uint64_t link_id, uint32_t index, const std::string& why) {
  const auto hold_down = std::chrono::milliseconds(options_.rail_hold_down_ms);
  {
    MutexLock lock(mu_);
    for (auto* table : {&out_, &in_}) {
      for (auto& [name, e] : *table) {
        if (e->link_id != link_id) continue;
        Entry::RailTry& t = e->rails[index];
        if (t.up) ++t.downs;
        t.up = false;
        t.fails = 0;
        t.last_error = why;
        t.retry_at = std::chrono::steady_clock::now() + hold_down;
      }
    }
  }
  cv_.notify_all();
}

void LinkManager::RailWatchLoop() {
  while (true) {
    std::vector<std::tuple<uint64_t, uint32_t, std::string>> down;
    {
      MutexLock lock(mu_);
      cv_.wait_for(lock.native(), kRailWatchInterval,
                   [&]() MCDMA_REQUIRES(mu_) { return stopping_; });
      if (stopping_) return;
      for (auto* table : {&out_, &in_}) {
        for (auto& [name, e] : *table) {
          if (e->link_id == 0) continue;
          for (auto& [index, t] : e->rails) {
            if (!t.up || t.local_address.empty()) continue;
            down.emplace_back(e->link_id, index, t.local_address);
          }
        }
      }
    }
    // A rail whose path broke elsewhere (its interface still runs) shows
    // as work that does not complete.
    if (!down.empty()) {
      const auto stalled_after = std::chrono::milliseconds(options_.link_timeout_ms);
      (void)engine_.Run([&] { return engine_.TakeStalledRailsDown(stalled_after); });
    }
    for (const auto& rail : down) {
      Status st = InterfaceRuns(std::get<2>(rail));
      if (st.ok()) continue;
      std::string why = "rail interface: " + st.message();
      (void)engine_.Run([&] {
        engine_.TakeRailDown(std::get<0>(rail), std::get<1>(rail), why);
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
    ri->set_state(r.up ? "up" : "down");
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
    if (!r.up && t != e.rails.end() && t->second.retry_at > now) {
      ri->set_retry_in_ms(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(t->second.retry_at - now).count()));
    }
  }
  for (const auto& [index, t] : e.rails) {
    if (shown.count(index) != 0) continue;
    v1::RailInfo* ri = li->add_rails();
    ri->set_index(index);
    ri->set_transport("tcp");
    ri->set_local(t.local);
    ri->set_remote(t.remote);
    ri->set_name(t.local + ">" + t.remote);
    ri->set_state("down");
    ri->set_downs(t.downs);
    ri->set_last_error(t.last_error);
    if (t.retry_at > now) {
      ri->set_retry_in_ms(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(t.retry_at - now).count()));
    }
  }
}

}  // namespace mcdma::daemon
