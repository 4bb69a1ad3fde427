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
#include "engine/user_table.hpp"
#include "mcdma/status.hpp"
#include "mcdma_internal/mailbox_layout.hpp"

namespace mcdma::daemon {

// Operation latency buckets: upper bounds in seconds, 5 us to 10 s.
inline constexpr std::array<double, 20> kLatencyBounds = {
    5e-6, 1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1.0,  2.5,  5.0,    10.0};

struct LatencyHistogram {
  std::array<uint64_t, kLatencyBounds.size() + 1> counts{};  // the last: past 10 s
  double sum_s = 0;
  uint64_t count = 0;

  void Observe(double seconds) {
    size_t i = 0;
    while (i < kLatencyBounds.size() && seconds > kLatencyBounds[i]) ++i;
    ++counts[i];
    sum_s += seconds;
    ++count;
  }
};

// Per-operation counters: index by shm::Op.
struct OpStats {
  uint64_t submitted = 0;
  uint64_t bytes = 0;                                    // of successful operations
  std::array<uint64_t, internal::kCodeCount> by_code{};  // completions, by Code's value
  LatencyHistogram latency;

  uint64_t ok() const { return by_code[static_cast<size_t>(Code::kOk)]; }
  uint64_t failed() const { return latency.count - ok(); }  // every completion is observed
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

// A routed link (engine_routes.cpp) as status displays show it.
struct RoutedSnapshot {
  std::string peer;
  std::string next_hop;
  std::string peer_instance;
  uint64_t unacked = 0;
  uint64_t resent = 0;
  uint64_t route_changes = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t calls_out = 0;
  uint64_t calls_in = 0;
};

// What this daemon relayed for others, and its routed links.
struct RelayStats {
  uint64_t forwarded = 0;
  uint64_t forwarded_bytes = 0;
  uint64_t delivered = 0;  // routed messages that ended here
  uint64_t dropped_hop_limit = 0;
  uint64_t dropped_no_route = 0;
  uint64_t dropped_full = 0;
  uint64_t dropped_stale = 0;
  uint64_t dropped_refused = 0;
  uint64_t dropped_looped = 0;
  std::vector<RoutedSnapshot> routed;
};

}  // namespace mcdma::daemon
