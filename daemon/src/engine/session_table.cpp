#include "engine/session_table.hpp"

namespace mcdma::daemon {

void SessionTable::Add(std::unique_ptr<Session> s) {
  uint64_t id = s->id();
  sessions_.emplace(id, std::move(s));
}

Session* SessionTable::Find(uint64_t id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

const Session* SessionTable::Find(uint64_t id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void SessionTable::Reap(uint64_t id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  ++reaped_;
  reaped_ring_faults_ += it->second->counters.ring_faults;
  sessions_.erase(it);
}

std::vector<uint64_t> SessionTable::Ids() const {
  std::vector<uint64_t> ids;
  ids.reserve(sessions_.size());
  for (const auto& [id, s] : sessions_) ids.push_back(id);
  return ids;
}

uint64_t SessionTable::ring_faults() const {
  uint64_t n = reaped_ring_faults_;
  for (const auto& [id, s] : sessions_) n += s->counters.ring_faults;
  return n;
}

}  // namespace mcdma::daemon
