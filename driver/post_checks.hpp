// The checks every transport makes the same way, in one place: a range to
// register and the room for one more registration; at post time the local
// slice, whether the operation is available, the request's length and the
// room in its queue; and the count of requests posted and not yet reaped
// that those limits are measured against (PostLedger). The messages match
// across transports, so code (and tests) written against one sees the same
// errors from another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <span>
#include <string>

#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver {

// WorkCompletion::byte_len is 32-bit: no single request may move more,
// whatever the caps say.
inline constexpr uint64_t kMaxRequestBytes = std::numeric_limits<uint32_t>::max();

// The access bits Register knows.
inline constexpr uint32_t kKnownAccess = kAccessRemoteRead | kAccessRemoteWrite;

// "PostSend: ..." style messages.
inline std::string PostMessage(const char* op, const std::string& what) {
  return std::string(op) + ": " + what;
}

// The name of the Post* call that posts `kind`.
constexpr const char* PostOpName(WorkOp kind) {
  constexpr const char* kNames[] = {"PostSend", "PostRecv", "PostWrite", "PostRead"};
  static_assert(static_cast<int>(WorkOp::kSend) == 0 && static_cast<int>(WorkOp::kRecv) == 1 &&
                static_cast<int>(WorkOp::kWrite) == 2 && static_cast<int>(WorkOp::kRead) == 3);
  return kNames[static_cast<size_t>(kind)];
}

// [offset, offset + length) lies within [0, size), without overflow.
constexpr bool RangeWithin(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// Caps forced onto a device that some work could pass: a profile name and
// nonzero queue, transfer and registration limits (kInvalid, as `who`).
inline Status CheckDeviceCaps(const char* who, const Caps& caps) {
  if (caps.profile.empty())
    return Status(Code::kInvalid, std::string(who) + ": caps.profile is empty");
  if (caps.max_outstanding == 0 || caps.max_registration_bytes == 0 ||
      caps.max_transfer_bytes == 0) {
    return Status(Code::kInvalid, std::string(who) +
                                      ": max_outstanding, max_registration_bytes and "
                                      "max_transfer_bytes must be nonzero");
  }
  return Status::Ok();
}

// Register(addr, length, access): a nonempty range that does not wrap, known
// access bits, at most caps.max_registration_bytes.
inline Status CheckRegisterRange(const std::byte* addr, uint64_t length, uint32_t access,
                                 uint32_t known_access, const Caps& caps) {
  if (addr == nullptr || length == 0) {
    return Status(Code::kInvalid, "Register: empty range (null address or zero length)");
  }
  if ((access & ~known_access) != 0) return Status(Code::kInvalid, "Register: unknown access bits");
  if (length > std::numeric_limits<uintptr_t>::max() - reinterpret_cast<uintptr_t>(addr)) {
    return Status(Code::kInvalid, "Register: range wraps the address space");
  }
  if (length > caps.max_registration_bytes) {
    return Status(Code::kInvalid, "Register: " + std::to_string(length) +
                                      " bytes exceeds max_registration_bytes (" +
                                      std::to_string(caps.max_registration_bytes) +
                                      "); split the buffer");
  }
  return Status::Ok();
}

// Room for one more registration on a device that holds `held` (kNoMemory
// at max_registrations; 0 is no limit).
inline Status CheckRegistrationRoom(size_t held, uint32_t max_registrations) {
  if (max_registrations != 0 && held >= max_registrations) {
    return Status(Code::kNoMemory, "Register: device holds max_registrations (" +
                                       std::to_string(max_registrations) + ") regions");
  }
  return Status::Ok();
}

// A local slice, given what the transport found for its region:
// `region_length` of the live registration of this device it is, or nullopt
// when it is none (look the pointer up before dereferencing it).
inline Status CheckLocalSlice(const char* op, const LocalSlice& slice,
                              std::optional<uint64_t> region_length) {
  if (slice.region == nullptr) {
    return Status(Code::kInvalid, PostMessage(op, "local slice has no region"));
  }
  if (!region_length) {
    return Status(Code::kInvalid, PostMessage(op, "local region is not registered on this device"));
  }
  if (!RangeWithin(slice.offset, slice.length, *region_length)) {
    return Status(Code::kOutOfRange,
                  PostMessage(op, "local slice [" + std::to_string(slice.offset) + ", +" +
                                      std::to_string(slice.length) + ") outside its region of " +
                                      std::to_string(*region_length) + " bytes"));
  }
  return Status::Ok();
}

// A request of `length` bytes against a caps limit (kInvalid beyond it).
inline Status CheckPostLength(const char* op, uint64_t length, uint64_t limit,
                              const char* limit_name) {
  if (length > limit || length > kMaxRequestBytes) {
    return Status(Code::kInvalid,
                  PostMessage(op, std::to_string(length) + " bytes exceeds " + limit_name + " (" +
                                      std::to_string(limit) + ")"));
  }
  return Status::Ok();
}

// Room in a queue that holds `queued` requests (kBusy when full).
inline Status CheckPostRoom(const char* op, uint32_t queued, uint32_t max_outstanding) {
  if (queued >= max_outstanding) {
    return Status(Code::kBusy, PostMessage(op, "queue holds max_outstanding (" +
                                                   std::to_string(max_outstanding) +
                                                   ") requests; reap completions first"));
  }
  return Status::Ok();
}

// WRITE and READ need one-sided operations, READ also READs in flight
// (kInvalid for a profile without them). Checked before the local slice.
inline Status CheckPostOp(WorkOp kind, const Caps& caps) {
  if (kind == WorkOp::kWrite && !caps.one_sided) {
    return Status(Code::kInvalid,
                  PostMessage(PostOpName(kind),
                              "profile '" + caps.profile + "' has no one-sided operations"));
  }
  if (kind == WorkOp::kRead && (!caps.one_sided || caps.max_outstanding_reads == 0)) {
    return Status(Code::kInvalid, PostMessage(PostOpName(kind), "profile '" + caps.profile +
                                                                    "' allows no RDMA READ"));
  }
  return Status::Ok();
}

// Requests of one connection posted and not yet reaped: what Caps limits
// count, as the daemon would (a request executed but not reaped still holds
// its slot). SEND, WRITE and READ share the send queue, RECVs have a queue
// of their own. Owned by the connection's thread.
class PostLedger {
 public:
  // After the local slice: the length against its limit (a RECV's against
  // the 32-bit length), room in its queue, and READs in flight.
  Status CheckRoom(WorkOp kind, uint64_t length, const Caps& caps) const {
    const char* op = PostOpName(kind);
    switch (kind) {
      case WorkOp::kRecv:
        MCDMA_RETURN_IF_ERROR(CheckPostLength(op, length, kMaxRequestBytes, "the 32-bit length"));
        return CheckPostRoom(op, recv_, caps.max_outstanding);
      case WorkOp::kRead:
        MCDMA_RETURN_IF_ERROR(CheckPostLength(op, length, caps.max_read_bytes, "max_read_bytes"));
        MCDMA_RETURN_IF_ERROR(CheckPostRoom(op, send_, caps.max_outstanding));
        if (reads_ >= caps.max_outstanding_reads) {
          return Status(Code::kBusy,
                        PostMessage(op, "max_outstanding_reads (" +
                                            std::to_string(caps.max_outstanding_reads) +
                                            ") READs in flight; reap completions first"));
        }
        return Status::Ok();
      case WorkOp::kSend:
      case WorkOp::kWrite:
        break;
    }
    MCDMA_RETURN_IF_ERROR(
        CheckPostLength(op, length, caps.max_transfer_bytes, "max_transfer_bytes"));
    return CheckPostRoom(op, send_, caps.max_outstanding);
  }

  // A request of `kind` was queued.
  void Posted(WorkOp kind) {
    if (kind == WorkOp::kRecv) {
      ++recv_;
      return;
    }
    ++send_;
    if (kind == WorkOp::kRead) ++reads_;
  }

  // Moves up to out.size() completions from the front of `from` into `out`,
  // freeing their slots; returns how many.
  size_t Reap(std::deque<WorkCompletion>& from, std::span<WorkCompletion> out) {
    size_t reaped = 0;
    while (reaped < out.size() && !from.empty()) {
      WorkCompletion& wc = from.front();
      if (wc.op == WorkOp::kRecv) {
        --recv_;
      } else {
        --send_;
        if (wc.op == WorkOp::kRead) --reads_;
      }
      out[reaped++] = std::move(wc);
      from.pop_front();
    }
    return reaped;
  }

  uint32_t outstanding() const { return send_ + recv_; }

 private:
  uint32_t send_ = 0;   // SEND, WRITE, READ
  uint32_t recv_ = 0;   // RECV
  uint32_t reads_ = 0;  // READ
};

// A request as a transport queues it once its checks passed, its local
// memory named by `local_key` (what the transport looks the region up by
// when the request runs: loop's lkey, tcp's registration id).
struct PostedRequest {
  uint64_t wr_id = 0;
  WorkOp op = WorkOp::kSend;
  uint64_t local_key = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  RemoteSlice remote;  // WRITE/READ only
};

// A Connection whose four Post* calls are one, making the checks in the
// order every transport makes them: the connection's state (CheckState:
// kLinkDown), the operation (CheckPostOp), the local slice (CheckLocal),
// the length and room (PostLedger::CheckRoom); then Enqueue. The transport
// reaps through Reap, so outstanding() is the ledger's.
class CheckedConnection : public Connection {
 public:
  Status PostSend(uint64_t wr_id, const LocalSlice& src) final {
    return Post(WorkOp::kSend, wr_id, src, {});
  }
  Status PostRecv(uint64_t wr_id, const LocalSlice& dst) final {
    return Post(WorkOp::kRecv, wr_id, dst, {});
  }
  Status PostWrite(uint64_t wr_id, const LocalSlice& src, const RemoteSlice& dst) final {
    return Post(WorkOp::kWrite, wr_id, src, dst);
  }
  Status PostRead(uint64_t wr_id, const LocalSlice& dst, const RemoteSlice& src) final {
    return Post(WorkOp::kRead, wr_id, dst, src);
  }
  uint32_t outstanding() const final { return ledger_.outstanding(); }

 protected:
  // Whether a request of `kind` may be posted in the connection's state.
  virtual Status CheckState(const char* op, WorkOp kind) const = 0;
  // The slice's region is a live registration of this device and holds it
  // (CheckLocalSlice); returns the request's local_key.
  virtual Result<uint64_t> CheckLocal(const char* op, const LocalSlice& slice) const = 0;
  // Queues a checked request; it completes exactly once.
  virtual void Enqueue(const PostedRequest& request) = 0;
  // Moves completions into `out`, freeing their slots (PostLedger::Reap).
  size_t Reap(std::deque<WorkCompletion>& from, std::span<WorkCompletion> out) {
    return ledger_.Reap(from, out);
  }

 private:
  Status Post(WorkOp kind, uint64_t wr_id, const LocalSlice& local, const RemoteSlice& remote) {
    const char* op = PostOpName(kind);
    MCDMA_RETURN_IF_ERROR(CheckState(op, kind));
    MCDMA_RETURN_IF_ERROR(CheckPostOp(kind, caps()));
    MCDMA_ASSIGN_OR_RETURN(uint64_t key, CheckLocal(op, local));
    MCDMA_RETURN_IF_ERROR(ledger_.CheckRoom(kind, local.length, caps()));
    Enqueue({.wr_id = wr_id,
             .op = kind,
             .local_key = key,
             .offset = local.offset,
             .length = local.length,
             .remote = remote});
    ledger_.Posted(kind);
    return Status::Ok();
  }

  PostLedger ledger_;
};

}  // namespace mcdma::driver
