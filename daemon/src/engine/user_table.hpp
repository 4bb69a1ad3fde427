// What each user (uid, as the kernel reported it for the control-socket
// connection) holds: sessions, live buffers, and bytes of shared memory
// (mailbox segments and buffers), against the per-user budgets
// (limits.per_user_*).
//
// Owner: the Engine, which holds one UserTable; engine thread only.
// Invariants: a user's figures are the sum of its live sessions' and
// buffers' charges; a user with nothing left is removed.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma::daemon {

struct UserBudget {
  uint32_t sessions = 0;
  uint32_t buffers = 0;
  uint64_t bytes = 0;
};

struct UserUsage {
  uint32_t sessions = 0;
  uint32_t buffers = 0;
  uint64_t bytes = 0;
};

class UserTable {
 public:
  explicit UserTable(UserBudget budget) : budget_(budget) {}

  // Charges a new session of `bytes` (its mailbox) to `uid`, or refuses
  // BUSY / NO_MEMORY with reason USER_QUOTA, changing nothing.
  Status ChargeSession(uint32_t uid, uint64_t bytes);
  // Charges a new buffer of `bytes`, or refuses NO_MEMORY, USER_QUOTA.
  Status ChargeBuffer(uint32_t uid, uint64_t bytes);
  void RefundSession(uint32_t uid, uint64_t bytes);
  void RefundBuffer(uint32_t uid, uint64_t bytes);

  const std::map<uint32_t, UserUsage>& users() const { return users_; }
  const UserBudget& budget() const { return budget_; }

 private:
  Status Charge(uint32_t uid, bool session, uint64_t bytes);
  void Refund(uint32_t uid, bool session, uint64_t bytes);
  void DropIfEmpty(std::map<uint32_t, UserUsage>::iterator it);

  UserBudget budget_;
  std::map<uint32_t, UserUsage> users_;
};

}  // namespace mcdma::daemon
