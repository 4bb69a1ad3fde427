// The data-link transport interface: one contract for every way the daemon
// moves bytes — `loop` (same host, memcpy), `tcp` (sockets, one-sided ops
// applied by the peer daemon) and `verbs` (libibverbs: rdma-core on Linux,
// the MCDMA provider on macOS).
//
// The shape follows verbs because verbs is the strictest: memory must be
// registered before it is used, work requests are posted and later reaped as
// completions, one-sided operations name remote memory by (addr, rkey), and a
// queue holds at most Caps::max_outstanding requests. A transport that could
// do more (loop) still enforces the same rules, so code that works over loop
// does not break over verbs.
//
// Threading: a Device and everything created from it (regions, endpoints,
// connections) are owned by one thread — the daemon's engine thread. None of
// these classes is thread-safe. Children never outlive their Device. One
// exception, which every transport must allow: an Endpoint, once created,
// may be used and destroyed on another thread (LocalInfo, Connect, which
// may block until the peer shows up, and the destructor), and the
// Connection that Connect returns is handed to the owning thread before it
// is used. The daemon's link manager sets links up that way.
//
// Failure: Post* returns a Status only for requests that could not be queued
// (bad local slice, queue full: kBusy, connection down: kLinkDown). A request
// that was queued always produces exactly one WorkCompletion, whose status
// says whether it succeeded (e.g. kPermissionDenied / kOutOfRange for a remote
// access the target's registration does not allow, kLinkDown when flushed).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "mcdma/status.hpp"

namespace mcdma::driver {

// What a transport can do, and the limits a device or its driver imposes.
// Device profiles (linux-rc, mcdma-cx5, apple-tb5) are expressed as Caps.
struct Caps {
  std::string name;                     // "loop", "tcp", "verbs"
  std::string profile;                  // device profile name
  bool one_sided = false;               // RDMA READ/WRITE available
  uint32_t max_outstanding = 0;         // work requests in flight per queue
  uint32_t max_outstanding_reads = 0;   // READs in flight per connection
  uint64_t max_read_bytes = 0;          // one READ
  uint64_t max_transfer_bytes = 0;      // one WRITE or SEND
  uint64_t max_registration_bytes = 0;  // one memory registration
  uint32_t max_registrations = 0;       // 0 = no limit
  uint32_t max_queue_pairs = 0;         // 0 = no limit of the profile (verbs: the device's)
  uint32_t max_inline_bytes = 0;        // SENDs up to this size need no registration
  uint64_t max_message_bytes = 0;       // one SEND the peer can take; 0 = its RECV's size
  // Connection::Poll reaps completions from the device itself (a verbs CQ):
  // a caller that polls finds them without a thread's wake-up. Where a
  // transport thread hands completions over (tcp, loop) polling saves
  // nothing that is worth the CPU it takes.
  bool polled_completions = false;
  // The "NIC" is this host's CPUs (Soft-RoCE, siw): polling for its
  // completions takes the CPU its own work needs.
  bool software = false;
};

// Access rights of a registration.
inline constexpr uint32_t kAccessLocal = 0;
inline constexpr uint32_t kAccessRemoteRead = 1u << 0;
inline constexpr uint32_t kAccessRemoteWrite = 1u << 1;

// A registered memory range. Destroying it deregisters; the caller must not
// destroy a region while a posted request still uses it (the daemon keeps
// regions alive until their requests have completed or been flushed).
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual std::byte* addr() const = 0;
  virtual uint64_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
  virtual uint32_t access() const = 0;
  // The address a peer names in a RemoteSlice to reach byte `offset` of this
  // region (a virtual address for verbs, an offset for loop and tcp).
  virtual uint64_t RemoteAddr(uint64_t offset) const = 0;
};

// Local memory for a request: [offset, offset + length) of a region.
struct LocalSlice {
  const MemoryRegion* region = nullptr;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Remote memory for a one-sided request, as the owner advertised it.
struct RemoteSlice {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

enum class WorkOp : uint8_t { kSend, kRecv, kWrite, kRead };

struct WorkCompletion {
  uint64_t wr_id = 0;
  WorkOp op = WorkOp::kSend;
  Code code = Code::kOk;  // kOk, or why the request failed
  uint32_t byte_len = 0;  // RECV: bytes received; others: bytes moved
  std::string detail;     // non-empty on failure: what the transport saw
};

// One established channel to a peer (a QP, a socket, a loopback pair).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual const Caps& caps() const = 0;
  // Two-sided messaging: a SEND consumes the peer's oldest posted RECV.
  virtual Status PostSend(uint64_t wr_id, const LocalSlice& src) = 0;
  virtual Status PostRecv(uint64_t wr_id, const LocalSlice& dst) = 0;
  // One-sided: move src -> remote dst / remote src -> dst without the peer
  // app's involvement. Requires caps().one_sided.
  virtual Status PostWrite(uint64_t wr_id, const LocalSlice& src, const RemoteSlice& dst) = 0;
  virtual Status PostRead(uint64_t wr_id, const LocalSlice& dst, const RemoteSlice& src) = 0;
  // Non-blocking: reaps up to out.size() completions into `out`, returns how
  // many. May do work (the loop transport copies here).
  virtual size_t Poll(std::span<WorkCompletion> out) = 0;
  // Requests posted and not yet reaped.
  virtual uint32_t outstanding() const = 0;
  // Before the owner sleeps: makes sure the device's notifier will be
  // called for the next completion or message of this connection, then
  // looks once more. Returns false when something is already here (the
  // owner must Poll() instead of sleeping): what arrived between the last
  // Poll() and the arming is never left unannounced. Transports that notify
  // for everything anyway (tcp) or do all their work in Poll() (loop)
  // return true. Verbs arms the completion queue only here, so a busy
  // owner that keeps polling takes no interrupt and no thread wake-up per
  // completion.
  virtual bool ArmWakeup() { return true; }
  // The connection is being dropped because its path failed (a rail taken
  // out): discard what is still queued rather than flushing it to the peer
  // later (tcp: the socket is reset, SO_LINGER 0, so bytes stuck behind a
  // cut cable never reach the peer after the operations were reissued
  // elsewhere). Posted requests then complete kLinkDown or are dropped with
  // the connection as on any failure. Idempotent; the caller destroys the
  // connection next.
  virtual void Abandon() {}
};

// The local half of a connection being set up: its description travels to
// the peer (through the authenticated peer protocol), the peer's comes back.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // Opaque bytes that describe this endpoint to the peer.
  virtual std::string LocalInfo() const = 0;
  // Completes the connection with the peer's LocalInfo(). Consumes the
  // endpoint whether or not it succeeds.
  virtual Result<std::unique_ptr<Connection>> Connect(std::string_view remote_info) = 0;
};

// One transport instance (a NIC, or the loop/tcp engine): owns registrations.
class Device {
 public:
  virtual ~Device() = default;
  virtual const Caps& caps() const = 0;
  // Registers [addr, addr + length). Fails with kNoMemory when the device's
  // registration limits are exceeded, kInvalid for a range larger than
  // caps().max_registration_bytes (callers split larger buffers).
  virtual Result<std::unique_ptr<MemoryRegion>> Register(std::byte* addr, uint64_t length,
                                                         uint32_t access) = 0;
  virtual Result<std::unique_ptr<Endpoint>> CreateEndpoint() = 0;
  // Transports that make progress on threads of their own (tcp: socket I/O;
  // verbs: the completion channel) call `notify` from those threads whenever
  // a connection has something for Poll() (a completion, or a received
  // message; verbs: only after Connection::ArmWakeup), so the owning thread
  // may sleep in between. Set before any
  // connection exists; `notify` must be cheap and thread-safe. Transports
  // that do all their work inside Poll() (loop) never call it.
  // By value: implementations keep it (move it into place).
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  virtual void SetNotifier(std::function<void()> notify) { (void)notify; }
};

}  // namespace mcdma::driver
