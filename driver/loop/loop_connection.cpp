// LoopConnection: queues, limits and the memcpy "wire" of the loop transport.
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "driver/loop/loop_state.hpp"
#include "driver/post_checks.hpp"

namespace mcdma::driver::loop {

LoopConnection::LoopConnection(std::shared_ptr<DeviceState> state, std::string name,
                               std::string peer_name)
    : state_(std::move(state)), name_(std::move(name)), peer_name_(std::move(peer_name)) {
  state_->names[name_] = this;
}

LoopConnection::~LoopConnection() {
  // Nothing is flushed to the peer: its SENDs fail when it next progresses.
  if (peer_ != nullptr) {
    peer_->peer_ = nullptr;
    peer_->peer_state_ = PeerState::kGone;
  }
  state_->names.erase(name_);
}

void LoopConnection::Pair(LoopConnection& a, LoopConnection& b) {
  a.peer_ = &b;
  b.peer_ = &a;
  a.peer_state_ = PeerState::kPaired;
  b.peer_state_ = PeerState::kPaired;
}

Status LoopConnection::CheckState(const char* op, WorkOp kind) const {
  if (peer_state_ == PeerState::kPaired) return Status::Ok();
  if (peer_state_ == PeerState::kWaiting && kind == WorkOp::kRecv) return Status::Ok();
  return Status(Code::kLinkDown, PostMessage(op, peer_state_ == PeerState::kWaiting
                                                     ? "the peer has not connected yet"
                                                     : "the peer connection was destroyed"));
}

Result<uint64_t> LoopConnection::CheckLocal(const char* op, const LocalSlice& slice) const {
  // Membership first: a foreign or destroyed region must not be dereferenced.
  const bool live = slice.region != nullptr && state_->regions.contains(slice.region);
  MCDMA_RETURN_IF_ERROR(CheckLocalSlice(
      op, slice, live ? std::optional<uint64_t>(slice.region->length()) : std::nullopt));
  return uint64_t{slice.region->lkey()};
}

void LoopConnection::Enqueue(const PostedRequest& request) {
  (request.op == WorkOp::kRecv ? recv_queue_ : send_queue_).push_back(request);
}

size_t LoopConnection::Poll(std::span<WorkCompletion> out) {
  // Either side's Poll moves both queues, as a NIC progresses without being
  // asked: a SEND waiting for a RECV completes once the receiver posts and
  // polls, even if the sender is not polling.
  Progress();
  if (peer_ != nullptr) peer_->Progress();
  return Reap(completions_, out);
}

void LoopConnection::Progress() {
  while (!send_queue_.empty()) {
    const LoopRequest& request = send_queue_.front();
    if (request.op == WorkOp::kSend) {
      if (!ExecuteSend(request)) return;
    } else {
      ExecuteOneSided(request);
    }
    send_queue_.pop_front();
  }
}

bool LoopConnection::ExecuteSend(const LoopRequest& send) {
  if (peer_ == nullptr) {
    Complete(send, Code::kLinkDown, 0, "the peer connection was destroyed");
    return true;
  }
  std::byte* src = LocalBytes(send);
  if (src == nullptr) {
    // Fails at the sender, before anything reaches the peer's RECV.
    Complete(send, Code::kPermissionDenied, 0, "source region deregistered before the SEND ran");
    return true;
  }
  if (peer_->recv_queue_.empty()) return false;
  LoopRequest recv = peer_->recv_queue_.front();
  peer_->recv_queue_.pop_front();
  if (send.length > recv.length) {
    Complete(send, Code::kOutOfRange, 0, "SEND larger than the peer's oldest posted RECV");
    peer_->Complete(recv, Code::kOutOfRange, 0, "incoming SEND larger than this RECV");
    return true;
  }
  std::byte* dst = peer_->LocalBytes(recv);
  if (dst == nullptr) {
    Complete(send, Code::kPermissionDenied, 0, "the peer's RECV region was deregistered");
    peer_->Complete(recv, Code::kPermissionDenied, 0, "RECV region deregistered before a SEND");
    return true;
  }
  if (send.length > 0) std::memmove(dst, src, send.length);
  Complete(send, Code::kOk, send.length, {});
  peer_->Complete(recv, Code::kOk, send.length, {});
  return true;
}

void LoopConnection::ExecuteOneSided(const LoopRequest& request) {
  const bool write = request.op == WorkOp::kWrite;
  std::byte* local = LocalBytes(request);
  if (local == nullptr) {
    Complete(request, Code::kPermissionDenied, 0, "local region deregistered before it ran");
    return;
  }
  Access remote =
      ResolveRemote(request.remote, request.length, write ? kAccessRemoteWrite : kAccessRemoteRead);
  if (remote.code != Code::kOk) {
    Complete(request, remote.code, 0, remote.detail);
    return;
  }
  // memmove: both ends may lie in one registration, overlapping.
  if (request.length > 0) {
    if (write) {
      std::memmove(remote.bytes, local, request.length);
    } else {
      std::memmove(local, remote.bytes, request.length);
    }
  }
  Complete(request, Code::kOk, request.length, {});
}

std::byte* LoopConnection::LocalBytes(const LoopRequest& request) const {
  auto it = state_->by_lkey.find(static_cast<uint32_t>(request.local_key));
  if (it == state_->by_lkey.end()) return nullptr;
  const MemoryRegion* region = it->second;
  if (!RangeWithin(request.offset, request.length, region->length())) return nullptr;
  return region->addr() + request.offset;
}

LoopConnection::Access LoopConnection::ResolveRemote(const RemoteSlice& remote, uint64_t length,
                                                     uint32_t need) const {
  // The responder's checks, in a NIC's order. Details never carry the key or
  // address: completions get logged.
  auto it = state_->by_rkey.find(remote.rkey);
  if (it == state_->by_rkey.end()) {
    return {Code::kPermissionDenied, nullptr, "rkey names no live registration"};
  }
  const MemoryRegion* region = it->second;
  if ((region->access() & need) != need) {
    return {Code::kPermissionDenied, nullptr,
            need == kAccessRemoteWrite ? "remote region does not allow remote writes"
                                       : "remote region does not allow remote reads"};
  }
  if (!RangeWithin(remote.addr, length, region->length())) {
    return {Code::kOutOfRange, nullptr, "remote range outside the registered region"};
  }
  return {Code::kOk, region->addr() + remote.addr, ""};
}

void LoopConnection::Complete(const LoopRequest& request, Code code, uint64_t bytes,
                              std::string detail) {
  completions_.push_back(WorkCompletion{
      .wr_id = request.wr_id,
      .op = request.op,
      .code = code,
      .byte_len = code == Code::kOk ? static_cast<uint32_t>(bytes) : 0,
      .detail = std::move(detail),
  });
}

}  // namespace mcdma::driver::loop
