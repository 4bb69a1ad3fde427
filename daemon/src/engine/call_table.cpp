#include "engine/call_table.hpp"

namespace mcdma::daemon {

void CallTable::Add(uint64_t id, const PendingCall& call) {
  deadlines_.emplace(call.deadline, id);
  calls_.emplace(id, call);
}

const PendingCall* CallTable::Find(uint64_t id) const {
  auto it = calls_.find(id);
  return it == calls_.end() ? nullptr : &it->second;
}

PendingCall* CallTable::FindMutable(uint64_t id) {
  auto it = calls_.find(id);
  return it == calls_.end() ? nullptr : &it->second;
}

std::optional<PendingCall> CallTable::Take(uint64_t id) {
  auto node = calls_.extract(id);
  if (node.empty()) return std::nullopt;
  return node.mapped();
}

std::vector<std::pair<uint64_t, PendingCall>> CallTable::TakeExpired(Clock::time_point now) {
  std::vector<std::pair<uint64_t, PendingCall>> out;
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    uint64_t id = deadlines_.top().second;
    deadlines_.pop();
    auto it = calls_.find(id);
    if (it == calls_.end() || it->second.deadline > now) continue;
    out.emplace_back(id, it->second);
    calls_.erase(it);
  }
  return out;
}

std::optional<Clock::time_point> CallTable::NextDeadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.top().first;
}

std::vector<uint64_t> CallTable::OnLink(uint64_t link) const {
  std::vector<uint64_t> out;
  for (const auto& [id, call] : calls_) {
    if (call.link() == link) out.push_back(id);
  }
  return out;
}

uint32_t CallTable::CountOnLink(uint64_t link) const {
  uint32_t n = 0;
  for (const auto& [id, call] : calls_) n += call.link() == link ? 1 : 0;
  return n;
}

std::vector<uint64_t> CallTable::ServedBy(uint64_t session) const {
  std::vector<uint64_t> out;
  for (const auto& [id, call] : calls_) {
    if (call.served_by_session(session)) out.push_back(id);
  }
  return out;
}

void CallTable::DropCalledBy(uint64_t session) {
  std::erase_if(calls_, [session](const auto& kv) { return kv.second.called_by_session(session); });
}

}  // namespace mcdma::daemon
