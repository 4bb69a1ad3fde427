// Plain snapshots of the engine's state for the Admin service (mcdmactl
// status, sessions, exports, buffers). Taken on the engine thread
// (Engine::Status() and friends); the gRPC service converts them
// (admin_service.cpp), so no protobuf type reaches the engine.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "driver/transport.hpp"
#include "engine/users.hpp"
#include "mcdma_internal/mailbox_layout.hpp"

namespace mcdma::daemon {

// Per-operation counters: index by shm::Op.
struct OpStats {
  uint64_t submitted = 0;
  uint64_t ok = 0;
  uint64_t failed = 0;
  uint64_t bytes = 0;
};
inline constexpr size_t kOpCount = static_cast<size_t>(shm::Op::kMaxOp) + 1;
using OpCounters = std::array<OpStats, kOpCount>;

struct StatusSnapshot {
  std::string host_id;
  uint32_t pid = 0;
  double uptime_s = 0;
  bool draining = false;
  std::string socket;
  uint32_t sessions = 0;
  uint32_t buffers = 0;
  uint64_t buffer_bytes = 0;
  uint32_t exports = 0;
  uint32_t services = 0;
  uint32_t inflight = 0;  // calls and transfers
  OpCounters ops{};
  uint64_t invalid_descriptors = 0;
  uint64_t ring_faults = 0;
  uint64_t sessions_reaped = 0;
  uint64_t segment_unlink_failures = 0;
  std::vector<driver::Caps> transports;  // the loop device's, then the link device's
  // Budgets the engine keeps (the listeners' and open files are added by
  // the Admin service).
  uint64_t backlog_bytes = 0;
  std::vector<std::pair<uint32_t, UserUsage>> users;
};

struct SessionSnapshot {
  uint64_t session_id = 0;
  std::string app_name;
  uint32_t pid = 0;
  uint32_t uid = 0;
  double age_s = 0;
  std::string mailbox_segment;
  bool mailbox_linked = false;
  uint32_t buffers = 0;
  uint64_t buffer_bytes = 0;
  uint32_t exports = 0;
  uint32_t services = 0;
  uint32_t remote_handles = 0;
  uint32_t inflight = 0;
  uint64_t submitted = 0;
  uint64_t invalid_descriptors = 0;
  uint64_t ring_faults = 0;
  uint32_t backlog = 0;
};

struct ExportSnapshot {
  uint64_t export_id = 0;
  std::string name;
  uint64_t owner_session = 0;
  uint64_t buffer_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool allow_read = false;
  bool allow_write = false;
  std::vector<std::string> allowed_peers;
  int64_t expires_in_ms = -1;  // -1: no TTL
  uint32_t resolved_handles = 0;
};

struct BufferSnapshot {
  uint64_t buffer_id = 0;
  uint64_t owner_session = 0;
  uint64_t size = 0;
  std::string segment;
  bool segment_linked = false;
  uint32_t registrations = 0;
};

}  // namespace mcdma::daemon
