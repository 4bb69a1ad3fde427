#include "engine/link_table.hpp"

#include <algorithm>

namespace mcdma::daemon {

std::string_view TransportName(Transport t) {
  switch (t) {
    case Transport::kLoop:
      return "loop";
    case Transport::kTcp:
      return "tcp";
    case Transport::kVerbs:
      return "verbs";
  }
  return "tcp";
}

std::optional<Transport> TransportFromName(std::string_view name) {
  for (Transport t : {Transport::kLoop, Transport::kTcp, Transport::kVerbs}) {
    if (TransportName(t) == name) return t;
  }
  return std::nullopt;
}

std::string_view OriginName(LinkOrigin o) {
  return o == LinkOrigin::kOut ? "out" : o == LinkOrigin::kIn ? "in" : "routed";
}

EngineLink& LinkTable::Add(std::unique_ptr<EngineLink> link) {
  link->stats = &stats_[LinkKey{link->spec.peer, link->spec.origin}];
  uint64_t id = link->id;
  return *links_.emplace(id, std::move(link)).first->second;
}

std::unique_ptr<EngineLink> LinkTable::Remove(uint64_t id) {
  auto node = links_.extract(id);
  return node.empty() ? nullptr : std::move(node.mapped());
}

EngineLink* LinkTable::Find(uint64_t id) {
  auto it = links_.find(id);
  return it == links_.end() ? nullptr : it->second.get();
}

const EngineLink* LinkTable::Find(uint64_t id) const {
  auto it = links_.find(id);
  return it == links_.end() ? nullptr : it->second.get();
}

EngineLink* LinkTable::Find(const LinkKey& key) {
  for (auto& [id, l] : links_) {
    if (l->spec.peer == key.peer && l->spec.origin == key.origin) return l.get();
  }
  return nullptr;
}

EngineLink* LinkTable::To(const std::string& peer) {
  EngineLink* best = nullptr;
  for (auto& [id, l] : links_) {
    if (l->spec.peer != peer || l->failed) continue;
    // A link of its own beats a routed one; of two, the one we dialed.
    if (best == nullptr || (best->spec.origin == LinkOrigin::kRouted) ||
        (l->spec.origin == LinkOrigin::kOut))
      best = l.get();
  }
  return best;
}

std::vector<uint64_t> LinkTable::IdsTo(const std::string& peer) const {
  std::vector<uint64_t> ids;
  for (const auto& [id, l] : links_) {
    if (l->spec.peer == peer) ids.push_back(id);
  }
  return ids;
}

std::vector<uint64_t> LinkTable::Ids() const {
  std::vector<uint64_t> ids;
  ids.reserve(links_.size());
  for (const auto& [id, l] : links_) ids.push_back(id);
  return ids;
}

std::vector<LinkSnapshot> LinkTable::Snapshots(
    const std::function<uint32_t(uint64_t)>& inflight) const {
  std::vector<LinkSnapshot> out;
  for (const auto& [id, l] : links_) {
    LinkSnapshot snap;
    snap.id = id;
    snap.peer = l->spec.peer;
    snap.origin = l->spec.origin;
    snap.transport = l->spec.transport;
    snap.generation = l->spec.generation;
    snap.inflight = inflight(id);
    snap.stats = *l->stats;
    out.push_back(std::move(snap));
  }
  // Pairs without a live link still have their counters.
  for (const auto& kv : stats_) {
    const LinkKey& key = kv.first;
    bool live = std::any_of(out.begin(), out.end(), [&](const LinkSnapshot& s) {
      return s.id != 0 && s.peer == key.peer && s.origin == key.origin;
    });
    if (live) continue;
    LinkSnapshot snap;
    snap.peer = key.peer;
    snap.origin = key.origin;
    snap.stats = kv.second;
    out.push_back(std::move(snap));
  }
  return out;
}

void LinkTable::AddEcho(uint64_t seq, EchoWaiter waiter) {
  echoes_.emplace(seq, std::move(waiter));
}

std::optional<LinkTable::EchoWaiter> LinkTable::TakeEcho(uint64_t seq) {
  auto node = echoes_.extract(seq);
  if (node.empty()) return std::nullopt;
  return std::move(node.mapped());
}

std::vector<LinkTable::EchoWaiter> LinkTable::TakeEchoesOn(uint64_t link) {
  std::vector<EchoWaiter> out;
  for (auto it = echoes_.begin(); it != echoes_.end();) {
    if (it->second.link == link) {
      out.push_back(std::move(it->second));
      it = echoes_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace mcdma::daemon
