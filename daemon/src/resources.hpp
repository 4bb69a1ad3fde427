// What sessions own in the daemon: buffers, exports, services, remote
// handles, in-flight calls. Plain records; the Engine owns all of them and
// only the engine thread touches them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/transport.hpp"
#include "mcdma_internal/shm_segment.hpp"

namespace mcdma::daemon {

using Clock = std::chrono::steady_clock;

// A bulk buffer: a shared-memory segment registered with the transport in
// pieces of at most the device's registration limit. In-flight transfers
// hold a shared_ptr, so the registration and the mapping outlive the owner's
// session until the last request on them has completed.
struct BufferRecord {
  uint64_t id = 0;
  uint64_t owner = 0;  // session id
  ShmSegment segment;
  uint64_t piece_bytes = 0;
  std::vector<std::unique_ptr<driver::MemoryRegion>>
      pieces;  // declared after segment: deregistered first
  Clock::time_point created;

  uint64_t size() const { return segment.size(); }
  // The registered slice covering [offset, offset + length), cut at the
  // piece boundary; the caller loops for the rest.
  driver::LocalSlice Slice(uint64_t offset, uint64_t length) const {
    const auto& piece = pieces[offset / piece_bytes];
    uint64_t in_piece = offset % piece_bytes;
    uint64_t n = std::min(length, piece->length() - in_piece);
    return driver::LocalSlice{piece.get(), in_piece, n};
  }
  driver::RemoteSlice Remote(uint64_t offset) const {
    const auto& piece = pieces[offset / piece_bytes];
    return driver::RemoteSlice{piece->RemoteAddr(offset % piece_bytes), piece->rkey()};
  }
  uint64_t PieceRemaining(uint64_t offset) const { return piece_bytes - offset % piece_bytes; }
};

struct ExportRecord {
  uint64_t id = 0;
  std::string name;
  uint64_t owner = 0;
  std::shared_ptr<BufferRecord> buffer;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool allow_read = false;
  bool allow_write = false;
  std::vector<std::string> allowed_peers;
  std::optional<Clock::time_point> expires;
  uint32_t handles = 0;  // remote handles resolved to it
  // Set when unexported, expired or its owner went away; transfers still
  // holding the record stop posting.
  bool revoked = false;
};

// A session's view of someone's export. Weak: the export's end (unexport,
// TTL, owner gone) revokes the handle without waiting for the resolver.
struct RemoteHandle {
  std::weak_ptr<ExportRecord> target;
  uint64_t export_id = 0;
};

struct ServiceRecord {
  uint64_t id = 0;
  std::string name;
  uint64_t session = 0;
};

// A call delivered (or queued for delivery) to a server, awaiting its reply.
struct PendingCall {
  uint64_t caller = 0;  // session id
  uint64_t caller_tag = 0;
  uint64_t server = 0;  // session id
  uint64_t service = 0;
  Clock::time_point deadline;
};

// A one-sided transfer in progress, cut into pieces posted on the transport.
struct TransferOp {
  uint64_t id = 0;
  uint64_t session = 0;
  uint64_t tag = 0;
  bool is_read = false;
  std::shared_ptr<BufferRecord> local;
  uint64_t local_offset = 0;
  std::shared_ptr<ExportRecord> target;  // held only while the op runs
  uint64_t remote_offset = 0;            // relative to the export's start
  uint64_t length = 0;
  uint64_t posted = 0;  // bytes posted so far
  uint64_t done = 0;    // bytes completed OK
  uint32_t outstanding = 0;
  Code error = Code::kOk;
  std::string error_detail;
  bool completed = false;  // the app has been told
  Clock::time_point deadline;
};

}  // namespace mcdma::daemon
