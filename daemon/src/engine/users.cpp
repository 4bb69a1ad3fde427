#include "engine/users.hpp"

#include <algorithm>

namespace mcdma::daemon {
namespace {

std::string Uid(uint32_t uid) { return "uid " + std::to_string(uid); }

Status BytesRefused(uint32_t uid, const UserUsage& u, uint64_t bytes, uint64_t budget) {
  return Status(Code::kNoMemory, Reason::kUserQuota,
                Uid(uid) + " holds " + std::to_string(u.bytes) + " bytes of shared memory; " +
                    std::to_string(bytes) + " more would pass limits.per_user_bytes (" +
                    std::to_string(budget) + ")");
}

}  // namespace

Status UserTable::ChargeSession(uint32_t uid, uint64_t bytes) {
  UserUsage& u = users_[uid];
  if (u.sessions >= budget_.sessions) {
    Status refused(Code::kBusy, Reason::kUserQuota,
                   Uid(uid) + " holds " + std::to_string(u.sessions) +
                       " sessions (limits.per_user_sessions = " + std::to_string(budget_.sessions) +
                       ")");
    DropIfEmpty(users_.find(uid));
    return refused;
  }
  if (bytes > budget_.bytes || u.bytes > budget_.bytes - bytes) {
    Status refused = BytesRefused(uid, u, bytes, budget_.bytes);
    DropIfEmpty(users_.find(uid));
    return refused;
  }
  ++u.sessions;
  u.bytes += bytes;
  return Status::Ok();
}

Status UserTable::ChargeBuffer(uint32_t uid, uint64_t bytes) {
  UserUsage& u = users_[uid];
  if (u.buffers >= budget_.buffers) {
    Status refused(Code::kNoMemory, Reason::kUserQuota,
                   Uid(uid) + " holds " + std::to_string(u.buffers) +
                       " buffers (limits.per_user_buffers = " + std::to_string(budget_.buffers) +
                       ")");
    DropIfEmpty(users_.find(uid));
    return refused;
  }
  if (bytes > budget_.bytes || u.bytes > budget_.bytes - bytes) {
    Status refused = BytesRefused(uid, u, bytes, budget_.bytes);
    DropIfEmpty(users_.find(uid));
    return refused;
  }
  ++u.buffers;
  u.bytes += bytes;
  return Status::Ok();
}

void UserTable::RefundSession(uint32_t uid, uint64_t bytes) {
  auto it = users_.find(uid);
  if (it == users_.end()) return;
  if (it->second.sessions > 0) --it->second.sessions;
  it->second.bytes -= std::min(it->second.bytes, bytes);
  DropIfEmpty(it);
}

void UserTable::RefundBuffer(uint32_t uid, uint64_t bytes) {
  auto it = users_.find(uid);
  if (it == users_.end()) return;
  if (it->second.buffers > 0) --it->second.buffers;
  it->second.bytes -= std::min(it->second.bytes, bytes);
  DropIfEmpty(it);
}

void UserTable::DropIfEmpty(std::map<uint32_t, UserUsage>::iterator it) {
  if (it == users_.end()) return;
  const UserUsage& u = it->second;
  if (u.sessions == 0 && u.buffers == 0 && u.bytes == 0) users_.erase(it);
}

}  // namespace mcdma::daemon
