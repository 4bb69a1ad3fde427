#include "engine/user_table.hpp"

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

Status UserTable::Charge(uint32_t uid, bool session, uint64_t bytes) {
  UserUsage& u = users_[uid];
  uint32_t& count = session ? u.sessions : u.buffers;
  const uint32_t most = session ? budget_.sessions : budget_.buffers;
  Status refused;
  if (count >= most) {
    refused = Status(session ? Code::kBusy : Code::kNoMemory, Reason::kUserQuota,
                     Uid(uid) + " holds " + std::to_string(count) +
                         (session ? " sessions (limits.per_user_sessions = "
                                  : " buffers (limits.per_user_buffers = ") +
                         std::to_string(most) + ")");
  } else if (bytes > budget_.bytes || u.bytes > budget_.bytes - bytes) {
    refused = BytesRefused(uid, u, bytes, budget_.bytes);
  } else {
    ++count;
    u.bytes += bytes;
    return Status::Ok();
  }
  DropIfEmpty(users_.find(uid));
  return refused;
}

Status UserTable::ChargeSession(uint32_t uid, uint64_t bytes) { return Charge(uid, true, bytes); }

Status UserTable::ChargeBuffer(uint32_t uid, uint64_t bytes) { return Charge(uid, false, bytes); }

void UserTable::Refund(uint32_t uid, bool session, uint64_t bytes) {
  auto it = users_.find(uid);
  if (it == users_.end()) return;
  uint32_t& count = session ? it->second.sessions : it->second.buffers;
  if (count > 0) --count;
  it->second.bytes -= std::min(it->second.bytes, bytes);
  DropIfEmpty(it);
}

void UserTable::RefundSession(uint32_t uid, uint64_t bytes) { Refund(uid, true, bytes); }

void UserTable::RefundBuffer(uint32_t uid, uint64_t bytes) { Refund(uid, false, bytes); }

void UserTable::DropIfEmpty(std::map<uint32_t, UserUsage>::iterator it) {
  if (it == users_.end()) return;
  const UserUsage& u = it->second;
  if (u.sessions == 0 && u.buffers == 0 && u.bytes == 0) users_.erase(it);
}

}  // namespace mcdma::daemon
