// What sessions own in the daemon: buffers, exports, services, remote
// handles, in-flight calls. Plain records; the Engine owns all of them and
// only the engine thread touches them.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driver/transport.hpp"
#include "engine/link.hpp"
#include "mcdma_internal/shm_segment.hpp"

namespace mcdma::daemon {

using Clock = std::chrono::steady_clock;

// When something with a TTL of `ttl_ms` from `now` expires. A TTL the clock
// cannot reach (UINT64_MAX, meant as "never") is no expiry at all, rather
// than an overflow into the past.
inline std::optional<Clock::time_point> ExpiryAfter(uint64_t ttl_ms,
                                                    Clock::time_point now = Clock::now()) {
  auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
  if (ttl_ms >= static_cast<uint64_t>(room.count())) return std::nullopt;
  return now + std::chrono::milliseconds(ttl_ms);
}

// Views of the same bytes as text or as bytes (payloads, messages).
inline std::span<const std::byte> AsBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
inline std::string_view AsText(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Memory registered with one transport device in pieces of at most the
// device's registration limit.
struct Registration {
  uint64_t piece_bytes = 0;
  std::vector<std::unique_ptr<driver::MemoryRegion>> pieces;

  bool empty() const { return pieces.empty(); }
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

// Registers [addr, addr + length) with `device` in pieces.
Result<Registration> RegisterPieces(driver::Device& device, std::byte* addr, uint64_t length,
                                    uint32_t access);

// A bulk buffer: a shared-memory segment registered with the loop device
// (local transfers), the tcp device when peering is on, and the verbs
// device at its first transfer over a verbs link. In-flight
// transfers hold a shared_ptr, so the registrations and the mapping outlive
// the owner's session until the last request on them has completed.
struct BufferRecord {
  uint64_t id = 0;
  uint64_t owner = 0;  // session id
  ShmSegment segment;
  // By device slot (link.hpp). Declared after segment: deregistered before
  // it is unmapped.
  std::array<Registration, kDeviceSlots> regs;
  Clock::time_point created;

  uint64_t size() const { return segment.size(); }
  Registration& reg(Transport t) { return regs[SlotOf(t)]; }
  const Registration& reg(Transport t) const { return regs[SlotOf(t)]; }
  Registration& reg_at(uint8_t slot) { return regs[slot]; }
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
  // The exported range registered with each link device (tcp and every
  // RDMA port) with the export's rights, made at the first resolution by a
  // peer. Revocation destroys them, so peers' accesses fail at once,
  // whatever they hold. By device slot; the loop one is unused.
  std::array<Registration, kDeviceSlots> peer_access;
  Registration& access(Transport t) { return peer_access[SlotOf(t)]; }
  Registration& access_at(uint8_t slot) { return peer_access[slot]; }
  // Peers that resolved it (told when it is revoked).
  std::set<std::string> resolved_by;
};

// One registered piece of an export as a peer addresses it: `length` bytes
// from `offset` into the export, at `addr` under `rkey`. What this daemon
// grants a peer (PeerGrant) and what a peer granted it (PeerExport) alike.
struct RemotePiece {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

// An export on a peer host, as its daemon's ResolveExport described it.
struct PeerExport {
  std::string peer;
  std::string peer_instance;  // the peer daemon instance that granted it
  std::string name;
  uint64_t export_id = 0;  // the peer's id
  uint64_t length = 0;
  bool allow_read = false;
  bool allow_write = false;
  using Piece = RemotePiece;
  // The pieces as each of the peer's link devices reaches them: "tcp" and
  // the peer's RDMA device names (kTcpKeys, RailSpec::peer_device); each
  // list in offset order, covering [0, length).
  std::map<std::string, std::vector<Piece>, std::less<>> keys;
  std::optional<Clock::time_point> expires;
  bool revoked = false;
  std::string revoked_why;
  // Resolved over a route (no link of its own to the peer): `keys` is
  // empty and every access goes as routed pieces (engine_routed_transfer).
  bool routed = false;

  // The pieces the peer's device `device` reaches; null when the grant
  // has none for it (its budget was spent).
  const std::vector<Piece>* KeysFor(std::string_view device) const {
    auto it = keys.find(device);
    return it == keys.end() ? nullptr : &it->second;
  }
  // The piece of `list` holding `offset` (< length).
  static const Piece& PieceAt(const std::vector<Piece>& list, uint64_t offset) {
    auto it = std::upper_bound(list.begin(), list.end(), offset,
                               [](uint64_t off, const Piece& p) { return off < p.offset; });
    return *(it - 1);
  }
};

// A service on a peer host, as LookupService found it.
struct PeerService {
  std::string peer;
  std::string peer_instance;
  std::string name;
  uint64_t remote_id = 0;
};

// A session's view of someone's export. Weak: the export's end (unexport,
// TTL, owner gone) revokes the handle without waiting for the resolver.
struct RemoteHandle {
  std::weak_ptr<ExportRecord> target;
  uint64_t export_id = 0;
  // Set instead of `target` for an export on a peer host.
  std::shared_ptr<PeerExport> peer;
};

struct ServiceRecord {
  uint64_t id = 0;
  std::string name;
  uint64_t session = 0;
};

// A one-sided transfer in progress, cut into pieces posted on the transport.
struct TransferOp {
  uint64_t id = 0;
  uint64_t session = 0;
  uint64_t tag = 0;
  bool is_read = false;
  std::shared_ptr<BufferRecord> local;
  uint64_t local_offset = 0;
  std::shared_ptr<ExportRecord> target;  // held only while the op runs (local)
  std::shared_ptr<PeerExport> peer;      // or: the export on a peer host
  uint64_t link = 0;                     // with `peer`: the engine link it runs on
  uint64_t remote_offset = 0;            // relative to the export's start
  uint64_t length = 0;
  uint64_t posted = 0;  // bytes posted so far
  uint64_t done = 0;    // bytes completed OK
  uint32_t outstanding = 0;
  // Over a link: the pieces posted and not completed, oldest first (a
  // rail completes its pieces in post order), and the ranges of pieces
  // whose rail failed, to post again elsewhere ({offset in op, bytes}).
  struct Posted {
    uint32_t rail = 0;
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  std::deque<Posted> pieces;
  std::deque<std::pair<uint64_t, uint64_t>> redo;
  // Device slots whose registration of `local` failed: their rails are
  // left out of this op.
  uint32_t refused_slots = 0;
  Code error = Code::kOk;
  std::string error_detail;
  bool completed = false;  // the app has been told
  Clock::time_point deadline;
  Clock::time_point started = Clock::now();  // for the latency histogram
};

}  // namespace mcdma::daemon
