// One app session as the engine sees it: the mailbox segment, the daemon's
// private copies of its ring indices and geometry, the daemon half of the
// arena, the backlogs of events that did not fit, and what it owns.
//
// Owner: the engine thread. Nothing here trusts the segment's contents: the
// geometry is kept privately, indices the app writes are range-checked on
// every read, and descriptors are copied out before they are looked at.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/resources.hpp"
#include "mcdma_internal/arena_allocator.hpp"
#include "mcdma_internal/mailbox_layout.hpp"
#include "mcdma_internal/shm_segment.hpp"

namespace mcdma::daemon {

struct SessionCounters {
  uint64_t submitted = 0;
  uint64_t invalid = 0;
  uint64_t ring_faults = 0;
};

// An event waiting for room in a ring or in the arena. The payload is copied
// here only on this slow path.
struct QueuedEvent {
  shm::EventDesc event;
  std::vector<std::byte> payload;
};

// How much may wait in one session's backlog: events per ring, payload
// bytes for the session, and what is left of the daemon-wide byte budget.
struct BacklogLimit {
  uint32_t events = 0;
  uint64_t bytes = 0;
  uint64_t total_room = 0;
};

class Session {
 public:
  // Creates and initializes the mailbox segment (chowned to uid), its name
  // starting with `segment_tag` (ShmSegment::NewName).
  static Result<std::unique_ptr<Session>> Create(uint64_t id, const shm::MailboxGeometry& geometry,
                                                 uint32_t uid, const std::string& segment_tag = "");

  uint64_t id() const { return id_; }
  const shm::MailboxGeometry& geometry() const { return geo_; }
  ShmSegment& segment() { return segment_; }
  shm::MailboxHeader* header() const { return header_; }

  // Submission ring. Available() returns how many descriptors the app has
  // published, or nullopt when its tail is out of range (a ring fault).
  std::optional<uint32_t> Available() const;
  shm::SubmitDesc CopySubmission(uint32_t i) const;  // i-th after head
  void Consume(uint32_t n);
  uint32_t sq_head() const { return sq_head_; }
  // Skips everything the app claims to have published (after a ring fault).
  void ResyncSubmissions(uint32_t tail);

  // Posts an event to the completion ring (inbox=false) or the inbox, with
  // its payload copied into the daemon half of the arena. Queues it when
  // there is no room; returns false if a backlog limit would be passed
  // (the event is then dropped and the caller must report the failure).
  bool Post(bool inbox, const shm::EventDesc& event, std::span<const std::byte> payload,
            const BacklogLimit& limit);
  // Retries queued events; true if any went out.
  bool FlushBacklog();
  size_t backlog() const { return cq_backlog_.size() + inbox_backlog_.size(); }
  size_t completion_backlog() const { return cq_backlog_.size(); }
  // Payload bytes held in the backlogs.
  uint64_t backlog_bytes() const { return backlog_bytes_; }
  // Wakes the app if it sleeps.
  void RingApp();

  // Payload ranges. Arena offsets are relative to the arena start.
  bool InAppHalf(uint64_t off, uint64_t len) const {
    return off <= geo_.app_arena_bytes && len <= geo_.app_arena_bytes - off;
  }
  std::span<const std::byte> AppPayload(uint32_t off, uint32_t len) const {
    return {arena_ + off, len};
  }
  // Hands back a daemon-half range the app received; false if it is not one.
  bool Release(uint64_t off, uint64_t len) { return daemon_arena_.Free(off, len); }

  // Marks the mailbox closed with a reason code and wakes the app.
  void MarkClosed(Code reason);

  // Identity and ownership (filled by the engine).
  std::string token;
  std::string app_name;
  uint32_t pid = 0;
  uint32_t uid = 0;
  Clock::time_point created;
  bool closing = false;
  std::unordered_set<uint64_t> buffers;
  std::set<std::string> exports;
  std::unordered_set<uint64_t> services;
  std::unordered_map<uint64_t, RemoteHandle> handles;
  uint32_t inflight = 0;
  SessionCounters counters;
  // Set by the control service: ends the session's gRPC stream.
  std::function<void()> cancel_stream;

 private:
  Session(uint64_t id, const shm::MailboxGeometry& geo, ShmSegment segment);
  bool TryPost(bool inbox, const shm::EventDesc& event, std::span<const std::byte> payload);

  uint64_t id_;
  shm::MailboxGeometry geo_;
  ShmSegment segment_;
  shm::MailboxHeader* header_;
  shm::SubmitDesc* sq_;
  shm::EventDesc* cq_;
  shm::EventDesc* inbox_;
  std::byte* arena_;
  uint32_t sq_head_ = 0;
  uint32_t cq_tail_ = 0;
  uint32_t inbox_tail_ = 0;
  // A bad consumer index is counted once per episode, per ring.
  bool cq_fault_reported_ = false;
  bool inbox_fault_reported_ = false;
  ArenaAllocator daemon_arena_;
  std::deque<QueuedEvent> cq_backlog_;
  std::deque<QueuedEvent> inbox_backlog_;
  uint64_t backlog_bytes_ = 0;
};

}  // namespace mcdma::daemon
