#include "fabric/membership.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "fabric/etcd_client.hpp"
#include "fabric/fabric_file.hpp"
#include "fabric/host_record.hpp"
#include "peer/peer_util.hpp"

namespace mcdma::daemon::fabric {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kBackoffMin{250};
constexpr milliseconds kBackoffMax{5000};

uint64_t UnixMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::shared_ptr<spdlog::logger> Log() {
  auto log = spdlog::get("fabric");
  return log ? log : spdlog::default_logger();
}

// The parts of a record whose change is worth a new Put (not the links'
// round trips, which move all the time).
std::string Shape(const v1::FabricHostRecord& r) {
  v1::FabricHostRecord s = r;
  s.clear_published_unix_ms();
  for (auto& l : *s.mutable_links()) l.clear_rtt_us();
  return s.SerializeAsString();
}

}  // namespace

Membership::Membership(const Options& options, MembershipLinks links, std::string instance,
                       uint16_t listen_port)
    : options_(options),
      links_(std::move(links)),
      instance_(std::move(instance)),
      listen_port_(listen_port),
      boot_generation_(UnixMs()),
      prefix_(HostsPrefix(options.fabric_name)) {}

Membership::~Membership() { Stop(); }

Status Membership::Start() {
  MCDMA_ASSIGN_OR_RETURN(auto nets, LocalNetworks(options_.fabric_interfaces));
  if (nets.empty())
    Log()->warn(
        "fabric: no interface that is up matches fabric.interfaces '{}': no host is "
        "reached directly",
        options_.fabric_interfaces);
  std::vector<std::string> mine;
  mine.reserve(nets.size());
  for (const auto& n : nets) mine.push_back(n.interface + " " + FormatIPv4(n.address));
  if (!options_.fabric_file.empty()) {
    MCDMA_ASSIGN_OR_RETURN(FabricFile file, LoadFabricFile(options_.fabric_file));
    {
      MutexLock lock(mu_);
      nets_ = std::move(nets);
      started_ = true;
      store_state_ = "file";
      if (!file.cables.empty())
        cables_ = std::make_unique<Cables>(file.cables.begin(), file.cables.end());
      // A file says nothing of which links are up: its cables stand for
      // them in the graph routes are computed over (this host's own links
      // as they really are).
      for (auto& r : file.hosts) {
        for (const auto& [x, y] : file.cables) {
          if (x != r.host() && y != r.host()) continue;
          auto* l = r.add_links();
          l->set_peer(x == r.host() ? y : x);
          l->set_state("up");
        }
      }
      for (auto& r : file.hosts) {
        if (r.host() == options_.host_id) continue;
        Member m;
        m.record = std::move(r);
        m.seen = Clock::now();
        members_.emplace(m.record.host(), std::move(m));
      }
    }
    Log()->info("fabric: {} hosts from the file {}", file.hosts.size(), options_.fabric_file);
    Reconcile();
    thread_ = std::thread([this] { FileLoop(); });
    return Status::Ok();
  }
  MCDMA_ASSIGN_OR_RETURN(auto endpoints, ParseEtcdUrl(options_.fabric_store));
  {
    MutexLock lock(mu_);
    nets_ = std::move(nets);
    started_ = true;
    store_state_ = "connecting";
    const auto ttl = milliseconds(options_.fabric_lease_ttl_ms);
    client_ = std::make_unique<EtcdClient>(std::move(endpoints),
                                           std::min<milliseconds>(milliseconds(2000), ttl / 3));
  }
  Log()->info("fabric '{}': store {}, lease {} ms, fabric interfaces: {}", options_.fabric_name,
              options_.fabric_store, options_.fabric_lease_ttl_ms,
              mine.empty() ? std::string("none") : fmt::format("{}", fmt::join(mine, ", ")));
  thread_ = std::thread([this] { StoreLoop(); });
  return Status::Ok();
}

void Membership::Stop() {
  int64_t lease = 0;
  EtcdClient* client = nullptr;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    lease = lease_;
    client = client_.get();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The record goes with its lease: the others evict this host now rather
  // than a TTL later.
  if (client != nullptr && lease != 0) {
    if (Status st = client->Revoke(lease); !st.ok())
      Log()->info("fabric: could not withdraw this host's record: {}", st.message());
  }
}

bool Membership::Sleep(milliseconds d) {
  MutexLock lock(mu_);
  cv_.wait_for(lock.native(), d, [&]() MCDMA_REQUIRES(mu_) { return stopping_ || watch_ended_; });
  return !stopping_;
}

void Membership::SetStore(const std::string& state, const std::string& error) {
  MutexLock lock(mu_);
  if (state != store_state_ || error != store_error_) {
    if (state == "down")
      Log()->warn("fabric: store unreachable ({}); links stay as they are", error);
    else if (state == "connected" && store_state_ == "down")
      Log()->info("fabric: store reachable again");
  }
  store_state_ = state;
  if (!error.empty() || state == "connected") store_error_ = error;
}

void Membership::StoreLoop() {
  EtcdClient* client = nullptr;
  {
    MutexLock lock(mu_);
    client = client_.get();
  }
  // Retries come well within the store's lease, so a store back after a
  // restart (which keeps leases) finds this host's lease still there.
  const milliseconds most = std::min(kBackoffMax, milliseconds(options_.fabric_lease_ttl_ms) / 4);
  milliseconds backoff = kBackoffMin;
  for (;;) {
    Status why = StoreSession(*client);
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    bool quick = why.code() == Code::kOutOfRange;  // a compacted watch: list again now
    if (!quick) SetStore("down", why.message());
    if (!Sleep(quick ? milliseconds(0) : backoff)) return;
    backoff = quick ? kBackoffMin : std::min(backoff * 2, most);
  }
}

Status Membership::StoreSession(EtcdClient& client) {
  const milliseconds ttl(options_.fabric_lease_ttl_ms);
  // The store's lease is a second shorter than fabric.lease_ttl_ms: the
  // store checks expiry about twice a second, and a dead host must be gone
  // within lease_ttl_ms.
  const auto store_ttl = std::chrono::seconds(std::max<int64_t>(2, ttl.count() / 1000 - 1));
  const milliseconds keepalive = std::chrono::duration_cast<milliseconds>(store_ttl) / 3;
  int64_t lease = 0;
  {
    MutexLock lock(mu_);
    lease = lease_;
    watch_ended_ = false;
  }
  if (lease != 0) {
    auto left = client.KeepAliveOnce(lease);
    if (!left.ok()) {
      if (left.status().code() != Code::kNotFound) return left.status();
      lease = 0;  // expired while the store was away
    }
  }
  if (lease == 0) {
    MCDMA_ASSIGN_OR_RETURN(lease, client.Grant(store_ttl));
    MutexLock lock(mu_);
    lease_ = lease;
  }
  v1::LinksReply links;
  links_.describe(&links);
  v1::FabricHostRecord own = OwnRecord(links);
  const std::string key = prefix_ + options_.host_id;
  MCDMA_RETURN_IF_ERROR(client.Put(key, EncodeRecord(own), lease));
  NotePublished(own);
  std::string published = Shape(own);

  MCDMA_ASSIGN_OR_RETURN(EtcdListing listing, client.List(prefix_));
  std::map<std::string, v1::FabricHostRecord> records;
  for (const auto& kv : listing.kvs) {
    std::string host = HostOfKey(prefix_, kv.key);
    if (host.empty() || host == options_.host_id) continue;
    auto r = DecodeRecord(kv.value, host);
    if (!r.ok()) {
      Log()->warn("fabric: ignoring {}: {}", kv.key, r.status().message());
      continue;
    }
    if (records.size() >= kMaxHosts) {
      Log()->warn("fabric: more than {} hosts; ignoring {}", kMaxHosts, kv.key);
      continue;
    }
    records.emplace(host, std::move(r).value());
  }
  {
    MutexLock lock(mu_);
    revision_ = listing.revision;
    ++relists_;
  }
  ReplaceAll(std::move(records));
  auto watch = client.WatchPrefix(
      prefix_, listing.revision + 1,
      [this](const std::vector<EtcdEvent>& events, int64_t revision) {
        for (const auto& ev : events) {
          std::string host = HostOfKey(prefix_, ev.kv.key);
          if (host.empty() || host == options_.host_id) continue;
          if (ev.type == EtcdEvent::Type::kPut)
            Upsert(host, ev.kv.value);
          else
            Evict(host);
        }
        {
          MutexLock lock(mu_);
          revision_ = std::max(revision_, revision);
        }
        Reconcile();
      },
      [this](const Status& end) {
        {
          MutexLock lock(mu_);
          watch_ended_ = true;
          watch_error_ = end.message();
        }
        cv_.notify_all();
      });
  if (!watch.ok()) return watch.status();
  SetStore("connected", "");
  Reconcile();

  // Every tick: this host's record and the routes follow its links; every
  // third of the lease: the keepalive.
  const milliseconds tick = std::min(keepalive, milliseconds(500));
  auto renew_at = Clock::now() + keepalive;
  for (;;) {
    if (!Sleep(tick)) return Status::Ok();
    {
      MutexLock lock(mu_);
      if (watch_ended_) {
        Log()->info("fabric: watch ended ({}); listing again", watch_error_);
        return Status(Code::kOutOfRange, "watch ended: " + watch_error_);
      }
    }
    if (Clock::now() >= renew_at) {
      auto left = client.KeepAliveOnce(lease);
      if (!left.ok()) {
        if (left.status().code() == Code::kNotFound) {
          MutexLock lock(mu_);
          lease_ = 0;
        }
        return left.status();
      }
      renew_at = Clock::now() + keepalive;
    }
    links.Clear();  // describe adds to what it is given
    links_.describe(&links);
    own = OwnRecord(links);
    if (std::string shape = Shape(own); shape != published || RoundTripsFell(own)) {
      MCDMA_RETURN_IF_ERROR(client.Put(key, EncodeRecord(own), lease));
      NotePublished(own);
      published = std::move(shape);
      std::vector<std::string> up;
      for (const auto& l : own.links()) {
        if (l.state() == "up") up.push_back(l.peer());
      }
      Log()->info("fabric: this host's record published again: links up to {}",
                  up.empty() ? std::string("none") : fmt::format("{}", fmt::join(up, ", ")));
    }
    Reconcile();
  }
}

v1::FabricHostRecord Membership::OwnRecord(const v1::LinksReply& links) const {
  v1::FabricHostRecord r;
  r.set_host(options_.host_id);
  r.set_instance(instance_);
  r.set_boot_generation(boot_generation_);
  r.set_version(MCDMA_VERSION_TEXT);
  r.set_published_unix_ms(UnixMs());
  auto host = HostOf(options_.listen);
  std::vector<std::string> addresses;
  if (host.ok() && host.value() != "0.0.0.0" && !host.value().empty()) {
    addresses.push_back(host.value() + ":" + std::to_string(listen_port_));
  } else {
    std::vector<LocalNet> nets;
    {
      MutexLock lock(mu_);
      nets = nets_;
    }
    addresses = FabricAddresses(nets, listen_port_);
  }
  for (size_t i = 0; i < addresses.size() && i < kMaxAddresses; ++i) r.add_addresses(addresses[i]);
  for (const auto& d : links.devices()) {
    if (r.devices_size() >= kMaxDevices || !d.available()) break;
    auto* fd = r.add_devices();
    fd->set_device(d.device());
    fd->set_port(d.port());
    fd->set_gid(d.gid());
    fd->set_profile(d.profile());
    fd->set_state(d.state());
  }
  for (const auto& l : links.links()) {
    if (r.links_size() >= kMaxAdjacency) break;
    auto* a = r.add_links();
    a->set_peer(l.peer());
    a->set_state(l.state());
    a->set_transport(l.transport());
    uint32_t up = 0;
    for (const auto& rail : l.rails()) up += rail.state() == "up" ? 1 : 0;
    a->set_rails_up(up);
    a->set_rtt_us(l.rtt_min_us() > 0 ? l.rtt_min_us() : l.rtt_avg_us());
  }
  std::sort(r.mutable_links()->begin(), r.mutable_links()->end(),
            [](const auto& x, const auto& y) { return x.peer() < y.peer(); });
  return r;
}

void Membership::ReplaceAll(std::map<std::string, v1::FabricHostRecord> records) {
  std::vector<std::string> gone;
  {
    MutexLock lock(mu_);
    for (auto& [host, m] : members_) {
      if (records.count(host) == 0 && !m.evicted) gone.push_back(host);
    }
    for (auto& [host, r] : records) Take(host, std::move(r));
  }
  for (const auto& host : gone) Evict(host);
}

void Membership::Upsert(const std::string& host, const std::string& value) {
  auto r = DecodeRecord(value, host);
  if (!r.ok()) {
    Log()->warn("fabric: ignoring the record of '{}': {}", host, r.status().message());
    return;
  }
  MutexLock lock(mu_);
  auto it = members_.find(host);
  if (it == members_.end() && members_.size() >= kMaxHosts) {
    Log()->warn("fabric: more than {} hosts; ignoring '{}'", kMaxHosts, host);
    return;
  }
  Take(host, std::move(r).value());
}

void Membership::Take(const std::string& host, v1::FabricHostRecord record) {
  Member& m = members_[host];
  if (m.record.host().empty() || m.evicted)
    Log()->info("fabric: '{}' joined", host);
  else if (m.record.instance() != record.instance())
    Log()->info("fabric: '{}' restarted (instance {})", host, record.instance());
  m.record = std::move(record);
  m.seen = Clock::now();
  m.evicted = false;
}

void Membership::Evict(const std::string& host) {
  bool drop = false;
  {
    MutexLock lock(mu_);
    auto it = members_.find(host);
    if (it == members_.end() || it->second.evicted) return;
    it->second.evicted = true;
    it->second.seen = Clock::now();
    drop = true;
    dialed_.erase(host);
    // Evicted members are kept for `mcdmactl fabric` while there is room.
    if (members_.size() > kMaxHosts) members_.erase(it);
  }
  Log()->warn("fabric: '{}' evicted (its record went away: lease expired or withdrawn)", host);
  if (drop) {
    if (Status st = links_.drop(host); !st.ok() && st.code() != Code::kNotFound)
      Log()->info("fabric: dropping the links of '{}': {}", host, st.message());
  }
}

void Membership::Reconcile() {
  std::vector<PeerConfig> add;
  std::vector<std::string> remove;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    std::set<std::string> configured;
    for (const auto& p : options_.peers) configured.insert(p.name);
    std::map<std::string, std::string> want;
    for (const auto& [host, m] : members_) {
      if (m.evicted || configured.count(host) != 0) continue;
      Reach r = ReachOf(options_.host_id, m.record, nets_, cables_.get());
      if (r.dials) want.emplace(host, r.address);
    }
    for (const auto& [host, address] : dialed_) {
      auto it = want.find(host);
      if (it == want.end() || it->second != address) remove.push_back(host);
    }
    for (const auto& host : remove) dialed_.erase(host);
    for (const auto& [host, address] : want) {
      if (dialed_.count(host) != 0) continue;
      PeerConfig p;
      p.name = host;
      p.address = address;
      p.transport = options_.fabric_transport;
      add.push_back(std::move(p));
      dialed_.emplace(host, address);
    }
  }
  for (const auto& host : remove) {
    if (Status st = links_.drop(host); !st.ok() && st.code() != Code::kNotFound)
      Log()->info("fabric: dropping the link to '{}': {}", host, st.message());
  }
  for (const auto& p : add) {
    Status st = links_.dial(p);
    if (!st.ok()) {
      Log()->warn("fabric: cannot link to '{}' at {}: {}", p.name, p.address, st.message());
      if (st.code() != Code::kAlreadyExists) {
        MutexLock lock(mu_);
        dialed_.erase(p.name);
      }
    }
  }
  UpdateRoutes();
}

bool Membership::RoundTripsFell(const v1::FabricHostRecord& own) {
  // A link's lowest round trip only falls while it is up: published again
  // when it is under half what the record says (and 200 us less), so the
  // first, inflated samples of a new link do not weigh its routes for
  // long, and load (which only raises round trips) publishes nothing.
  MutexLock lock(mu_);
  for (const auto& l : own.links()) {
    auto it = published_rtt_.find(l.peer());
    if (it == published_rtt_.end() || l.rtt_us() <= 0) continue;
    if (l.rtt_us() < it->second / 2 && it->second - l.rtt_us() > 200) return true;
  }
  return false;
}

void Membership::NotePublished(const v1::FabricHostRecord& own) {
  MutexLock lock(mu_);
  published_rtt_.clear();
  for (const auto& l : own.links()) published_rtt_[l.peer()] = l.rtt_us();
}

void Membership::UpdateRoutes() {
  v1::LinksReply links;
  links_.describe(&links);
  v1::FabricHostRecord own = OwnRecord(links);
  std::map<std::string, v1::FabricHostRecord> records;
  {
    MutexLock lock(mu_);
    // This host's links weigh what its record says (nothing, for a link
    // not yet published, and without a store), as in everyone else's view.
    for (auto& l : *own.mutable_links()) {
      auto it = published_rtt_.find(l.peer());
      l.set_rtt_us(it == published_rtt_.end() ? 0 : it->second);
    }
    for (const auto& [host, m] : members_) {
      if (!m.evicted) records.emplace(host, m.record);
    }
  }
  std::map<std::string, RouteEntry> routes = ComputeRoutes(own, records);
  bool changed = false;
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    auto same = [](const RouteEntry& a, const RouteEntry& b) {
      return a.hops == b.hops && a.instance == b.instance;
    };
    changed = !routes_pushed_ || routes.size() != routes_.size();
    for (auto a = routes.begin(), b = routes_.begin(); !changed && a != routes.end(); ++a, ++b)
      changed = a->first != b->first || !same(a->second, b->second);
    routes_ = routes;
    routes_pushed_ = true;
  }
  if (!changed) return;
  for (const auto& [host, r] : routes) {
    if (r.hops.size() > 1)
      Log()->info("fabric: route to '{}' via {} ({} hops)", host,
                  fmt::format("{}", fmt::join(r.hops, " > ")), r.hops.size());
  }
  if (links_.routes) links_.routes(instance_, routes);
}

void Membership::FileLoop() {
  while (Sleep(milliseconds(1000))) Reconcile();
}

void Membership::Fill(v1::FabricReply* out) {
  if (links_.relay) links_.relay(out->mutable_relay());
  v1::LinksReply links;
  links_.describe(&links);
  std::map<std::string, const v1::LinkInfo*> by_peer;
  for (const auto& l : links.links()) by_peer.emplace(l.peer(), &l);
  v1::FabricHostRecord own = OwnRecord(links);
  MutexLock lock(mu_);
  out->set_host_id(options_.host_id);
  out->set_source(options_.fabric_file.empty() ? "etcd" : "file");
  out->set_store(options_.fabric_file.empty() ? options_.fabric_store : options_.fabric_file);
  out->set_fabric_name(options_.fabric_name);
  out->set_store_state(store_state_);
  out->set_store_error(store_error_);
  out->set_lease_id(lease_);
  out->set_lease_ttl_ms(options_.fabric_lease_ttl_ms);
  out->set_revision(revision_);
  out->set_relists(relists_);
  for (const auto& a : own.addresses()) out->add_addresses(a);
  auto now = Clock::now();
  auto* self = out->add_hosts();
  self->set_host(options_.host_id);
  self->set_state("self");
  self->set_instance(instance_);
  self->set_boot_generation(boot_generation_);
  *self->mutable_addresses() = own.addresses();
  *self->mutable_links() = own.links();
  *self->mutable_devices() = own.devices();
  for (const auto& [host, m] : members_) {
    auto* h = out->add_hosts();
    h->set_host(host);
    h->set_state(m.evicted ? "evicted" : "member");
    h->set_instance(m.record.instance());
    h->set_boot_generation(m.record.boot_generation());
    *h->mutable_addresses() = m.record.addresses();
    *h->mutable_links() = m.record.links();
    *h->mutable_devices() = m.record.devices();
    h->set_age_ms(
        static_cast<uint64_t>(std::chrono::duration_cast<milliseconds>(now - m.seen).count()));
    Reach r = ReachOf(options_.host_id, m.record, nets_, cables_.get());
    h->set_reach(r.direct ? "direct" : "none");
    h->set_reach_detail(r.detail);
    if (auto it = dialed_.find(host); it != dialed_.end()) h->set_dial_address(it->second);
    if (auto it = by_peer.find(host); it != by_peer.end()) h->set_link_state(it->second->state());
    if (auto it = routes_.find(host); it != routes_.end() && !m.evicted) {
      for (const auto& hop : it->second.hops) h->add_route(hop);
      h->set_route_cost_us(it->second.cost_us);
    }
  }
  std::sort(out->mutable_hosts()->begin() + 1, out->mutable_hosts()->end(),
            [](const auto& x, const auto& y) { return x.host() < y.host(); });
}

}  // namespace mcdma::daemon::fabric
