// The shared-memory mailbox: the one layout both the daemon and libmcdma read.
//
// A session's mailbox segment is laid out as
//
//   [MailboxHeader][SubmitDesc x sq_entries][EventDesc x cq_entries]
//   [EventDesc x inbox_entries][arena: app half | daemon half]
//
// * Submission ring (sq): the app produces, the daemon consumes.
// * Completion ring (cq): the daemon produces one EventDesc per completed
//   submission (kCompletion), or a kFault for a ring it could not read.
// * Inbox ring: the daemon produces incoming calls and notifications for
//   services the app serves.
// * Arena: eager payloads. The app allocates request/reply payloads in the
//   app half; the daemon writes delivered payloads (replies, incoming calls
//   and notifications) into the daemon half and the app hands those ranges
//   back with a RELEASE submission.
//
// Indices are free-running uint32 counters; entry counts are powers of two and
// an index maps to slot (index & (entries - 1)). Each index has exactly one
// writer (noted below). The daemon treats everything in this segment as
// untrusted: it copies a descriptor out before validating it, keeps its own
// private copies of its indices and of the geometry, and never follows a
// pointer or offset without checking it against the session's own segments.
//
// Wake-ups use a Bell per direction (see wait.hpp): the consumer announces it
// is going to sleep by setting `sleeping`; only the consumer ever clears it.
// The producer, after publishing with release ordering, reads `sleeping` and,
// if set, bumps `seq` and wakes the futex on it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace mcdma::shm {

inline constexpr uint64_t kMailboxMagic = 0x31584f424c49414dULL;  // "MAILBOX1"
inline constexpr uint32_t kMailboxVersion = 1;
inline constexpr uint32_t kProtocolVersion = 1;

// Submission opcodes (SubmitDesc::opcode).
enum class Op : uint8_t {
  kNop = 0,      // completes with OK; used to probe the ring
  kCall = 1,     // target = service id, payload = request
  kReply = 2,    // target = call id, payload = reply, status = app status
  kNotify = 3,   // target = service id, payload = message (one way)
  kRead = 4,     // remote handle -> local buffer
  kWrite = 5,    // local buffer -> remote handle
  kRelease = 6,  // hand a daemon-half payload range back (no completion)
  kMaxOp = kRelease,
};

// SubmitDesc::flags
inline constexpr uint8_t kFlagNoCompletion = 1;  // REPLY/NOTIFY/NOP: only errors complete
// CALL: time this call's stages (mcdmactl trace); local_offset holds the
// app's steady-clock nanoseconds as it wrote the submission.
inline constexpr uint8_t kFlagTrace = 2;

// One submission, written by the app. 64 bytes.
struct SubmitDesc {
  uint8_t opcode;          // Op
  uint8_t flags;           // kFlag*
  uint16_t status;         // REPLY: the handler's status code (mcdma::Code)
  uint32_t payload_len;    // CALL/REPLY/NOTIFY: payload bytes; RELEASE: range length
  uint32_t payload_off;    // arena-relative offset of the payload / released range
  uint32_t timeout_us;     // relative deadline; 0 = daemon default
  uint64_t tag;            // app cookie, echoed in the completion
  uint64_t target;         // service id, call id, or remote handle
  uint64_t local_buffer;   // READ/WRITE: buffer id owned by this session
  uint64_t local_offset;   // READ/WRITE: offset into the local buffer
  uint64_t remote_offset;  // READ/WRITE: offset into the remote export
  uint64_t length;         // READ/WRITE: bytes to move
};

enum class EventKind : uint8_t {
  kCompletion = 1,      // a submission finished (cq)
  kIncomingCall = 2,    // inbox: a call to serve; reply with call_id
  kIncomingNotify = 3,  // inbox: a one-way message
  kFault = 4,           // cq: the daemon rejected something it could not tie to a tag
};

// One event, written by the daemon. 64 bytes.
struct EventDesc {
  uint8_t kind;          // EventKind
  uint8_t op;            // completion: the Op that completed
  uint16_t status;       // mcdma::Code
  uint32_t payload_len;  // delivered payload bytes (daemon half), 0 if none
  uint32_t payload_off;  // arena-relative offset of the delivered payload
  uint32_t timeout_us;   // incoming call: time left before the caller gives up
  uint64_t tag;          // completion: the submission's tag
  uint64_t service_id;   // incoming: which service
  uint64_t call_id;      // incoming call: id to put in the REPLY's target
  uint64_t bytes;        // completion of READ/WRITE: bytes moved
  uint64_t source;       // incoming: caller's session id (informational)
  uint64_t detail;       // kFault: index of the submission at fault
};

struct alignas(64) SharedIndex {
  std::atomic<uint32_t> value;
};

struct alignas(64) Bell {
  std::atomic<uint32_t> seq;       // bumped by producers to wake the consumer
  std::atomic<uint32_t> sleeping;  // set/cleared by the consumer only
};

struct MailboxHeader {
  // Geometry: written once by the daemon before the app maps the segment.
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint32_t sq_entries;
  uint32_t cq_entries;
  uint32_t inbox_entries;
  uint32_t reserved0;
  uint64_t sq_offset;
  uint64_t cq_offset;
  uint64_t inbox_offset;
  uint64_t arena_offset;
  uint64_t app_arena_bytes;     // app half: [0, app_arena_bytes)
  uint64_t daemon_arena_bytes;  // daemon half follows the app half
  uint64_t session_id;
  uint64_t total_bytes;

  SharedIndex sq_tail;     // writer: app
  SharedIndex sq_head;     // writer: daemon (a hint for the app: ring space)
  SharedIndex cq_tail;     // writer: daemon
  SharedIndex cq_head;     // writer: app
  SharedIndex inbox_tail;  // writer: daemon
  SharedIndex inbox_head;  // writer: app
  Bell daemon_bell;        // app -> daemon: "the submission ring has work"
  Bell app_bell;           // daemon -> app: "cq or inbox has events"
  SharedIndex closed;      // writer: daemon; nonzero once the session is closed
};

static_assert(sizeof(SubmitDesc) == 64);
static_assert(sizeof(EventDesc) == 64);
static_assert(std::is_trivially_copyable_v<SubmitDesc>);
static_assert(std::is_trivially_copyable_v<EventDesc>);
static_assert(std::is_standard_layout_v<MailboxHeader>);
static_assert(alignof(MailboxHeader) == 64);
static_assert(sizeof(MailboxHeader) % 64 == 0);
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "futex words in shared memory must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Arena offsets are 32-bit: the arena is at most 2 GiB.
inline constexpr uint64_t kMaxArenaBytes = 1ULL << 31;
// Arena allocations are made in units of this many bytes.
inline constexpr uint32_t kArenaUnit = 256;
inline constexpr uint32_t kMaxRingEntries = 1u << 16;

inline constexpr bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Computes the layout for a geometry. The daemon uses it to create a
// segment; the app uses it to check the header it reads before trusting it.
struct MailboxGeometry {
  uint32_t sq_entries;
  uint32_t cq_entries;
  uint32_t inbox_entries;
  uint64_t app_arena_bytes;
  uint64_t daemon_arena_bytes;

  uint64_t sq_offset() const { return sizeof(MailboxHeader); }
  uint64_t cq_offset() const { return sq_offset() + uint64_t{sq_entries} * sizeof(SubmitDesc); }
  uint64_t inbox_offset() const { return cq_offset() + uint64_t{cq_entries} * sizeof(EventDesc); }
  uint64_t arena_offset() const {
    uint64_t end = inbox_offset() + uint64_t{inbox_entries} * sizeof(EventDesc);
    return (end + 4095) & ~uint64_t{4095};
  }
  uint64_t total_bytes() const { return arena_offset() + app_arena_bytes + daemon_arena_bytes; }
  bool Valid() const {
    return IsPowerOfTwo(sq_entries) && IsPowerOfTwo(cq_entries) && IsPowerOfTwo(inbox_entries) &&
           sq_entries <= kMaxRingEntries && cq_entries <= kMaxRingEntries &&
           inbox_entries <= kMaxRingEntries && app_arena_bytes % kArenaUnit == 0 &&
           daemon_arena_bytes % kArenaUnit == 0 && app_arena_bytes > 0 && daemon_arena_bytes > 0 &&
           app_arena_bytes <= kMaxArenaBytes &&
           daemon_arena_bytes <= kMaxArenaBytes - app_arena_bytes;
  }
};

}  // namespace mcdma::shm
