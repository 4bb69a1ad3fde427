// Internals of the loop transport, shared by its two source files; not part
// of the driver's interface (include loop_transport.hpp instead).
//
// Ownership: a LoopDevice, and every region, endpoint and connection created
// from it, hold one shared DeviceState. Children register themselves in it
// when built and remove themselves when destroyed, so the maps below name
// exactly the live objects. All of it belongs to the engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "driver/post_checks.hpp"
#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::loop {

class LoopConnection;

struct DeviceState {
  Caps caps;
  // Random per device, part of every endpoint name, so info from another
  // loop device never pairs with one of ours.
  std::string tag;
  std::mt19937 rng{std::random_device{}()};
  // Live registrations: checked by pointer before a caller's region is
  // dereferenced, and by key when a queued request executes.
  std::unordered_set<const MemoryRegion*> regions;
  std::unordered_map<uint32_t, MemoryRegion*> by_lkey;
  std::unordered_map<uint32_t, MemoryRegion*> by_rkey;
  // Live endpoint names: null while the endpoint awaits Connect, then the
  // connection it became, until that is destroyed.
  std::unordered_map<std::string, LoopConnection*> names;
  uint64_t next_endpoint = 1;

  // A nonzero key that no live registration uses as lkey or rkey.
  uint32_t NewKey();
};

// A queued work request. The local region is held by lkey (local_key), not
// pointer, and looked up again when the request executes, so a region
// destroyed while the request waited is detected rather than dereferenced.
using LoopRequest = PostedRequest;

// One side of a loopback pair. See loop_transport.hpp for the semantics.
class LoopConnection final : public CheckedConnection {
 public:
  // Binds `name` to this connection; `peer_name` is the endpoint it waits for.
  LoopConnection(std::shared_ptr<DeviceState> state, std::string name, std::string peer_name);
  // Unbinds the name; the peer, if paired, sees kGone.
  ~LoopConnection() override;
  LoopConnection(const LoopConnection&) = delete;
  LoopConnection& operator=(const LoopConnection&) = delete;

  const Caps& caps() const override { return state_->caps; }
  size_t Poll(std::span<WorkCompletion> out) override;

  // Pairing, for LoopEndpoint::Connect.
  bool waiting() const { return peer_state_ == PeerState::kWaiting; }
  const std::string& peer_name() const { return peer_name_; }
  static void Pair(LoopConnection& a, LoopConnection& b);

 private:
  enum class PeerState { kWaiting, kPaired, kGone };
  struct Access {
    Code code;
    std::byte* bytes;
    const char* detail;
  };

  // RECVs may be posted before the peer connects (the daemon pre-posts its
  // slots right after Connect), but not once the peer is gone: nothing
  // could ever complete them. Everything else needs the peer.
  Status CheckState(const char* op, WorkOp kind) const override;
  Result<uint64_t> CheckLocal(const char* op, const LocalSlice& slice) const override;
  void Enqueue(const PostedRequest& request) override;

  // Executes queued SEND/WRITE/READs in post order until a SEND finds no
  // RECV posted at the peer (receiver not ready) or the queue is empty.
  void Progress();
  // False when the SEND must wait for a RECV; otherwise it has completed.
  bool ExecuteSend(const LoopRequest& send);
  void ExecuteOneSided(const LoopRequest& request);
  // The request's local bytes, or null if its region is gone (or its lkey
  // now names a different, smaller region).
  std::byte* LocalBytes(const LoopRequest& request) const;
  Access ResolveRemote(const RemoteSlice& remote, uint64_t length, uint32_t need) const;
  void Complete(const LoopRequest& request, Code code, uint64_t bytes, std::string detail);

  std::shared_ptr<DeviceState> state_;
  std::string name_;
  std::string peer_name_;
  PeerState peer_state_ = PeerState::kWaiting;
  LoopConnection* peer_ = nullptr;          // non-null exactly while kPaired
  std::deque<LoopRequest> send_queue_;      // SEND/WRITE/READ, not yet executed
  std::deque<LoopRequest> recv_queue_;      // RECVs not yet consumed, oldest first
  std::deque<WorkCompletion> completions_;  // executed, not yet reaped
};

}  // namespace mcdma::driver::loop
