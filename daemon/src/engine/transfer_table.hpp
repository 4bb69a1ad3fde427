// One-sided transfers in progress, how they are cut into pieces, and the
// kRevokeAcks owed to peers.
//
// Owner: the Engine, which holds one TransferTable; engine thread only. The
// engine posts the pieces and reports completions (engine_transfer.cpp);
// the table books the ops and their state. Invariants: an op is erased only
// once the app has been told (completed) and nothing of it is posted; an
// ack for (link, export) is released only when no op on that link to that
// export has a piece posted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/resources.hpp"

namespace mcdma::daemon {

// The next piece of `op` to post: no larger than the transfer chunk, the
// device's limit for the direction, or what is left of the local or remote
// registration piece it starts in.
struct Piece {
  driver::LocalSlice local;
  driver::RemoteSlice remote;
  uint64_t bytes = 0;
};
Piece NextPiece(const TransferOp& op, const Registration& local_reg, const driver::Caps& caps,
                uint64_t chunk_bytes, const std::vector<RemotePiece>* remote_keys = nullptr);
// The piece at `offset` of `op` (relative to its start), at most `most`
// bytes, under the same limits. An op on a peer's export names the peer's
// pieces as the rail's remote device reaches them (`remote_keys`, not null).
Piece PieceAt(const TransferOp& op, uint64_t offset, uint64_t most, const Registration& local_reg,
              const driver::Caps& caps, uint64_t chunk_bytes,
              const std::vector<RemotePiece>* remote_keys = nullptr);

class TransferTable {
 public:
  using Ops = std::map<uint64_t, TransferOp>;

  void Add(TransferOp op);
  TransferOp* Find(uint64_t id);
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  Ops::iterator begin() { return ops_.begin(); }
  Ops::iterator end() { return ops_.end(); }

  // Whether an op runs on the loop channel (which progresses only when
  // polled: the engine must not sleep).
  bool AnyLocal() const;
  uint32_t CountOnLink(uint64_t link) const;
  // `link` is gone with its connection: its ops fail with `code` (unless
  // already failed) and nothing they posted will complete; acks owed on it
  // are dropped.
  void LinkGone(uint64_t link, Code code, const std::string& why);
  // Rail `rail` of `link` is gone with its connection: the pieces it had
  // posted will not complete; their ranges are posted again on other rails.
  // Returns how many pieces.
  uint64_t RailGone(uint64_t link, uint32_t rail);
  // `session` is gone: its ops are done (CANCELLED) without telling it.
  void SessionGone(uint64_t session);
  // Ops past their deadline fail TIMEOUT.
  void ExpireDeadlines(Clock::time_point now);
  // Calls `finish` for each op that has just finished (all done, or failed
  // with nothing posted, or timed out) and erases the ops finished with
  // nothing posted. Returns whether `finish` ran.
  bool FinishAndReap(const std::function<void(TransferOp&)>& finish);

  // A kRevokeAck owed to `link` for its export `export_id`.
  void OweRevokeAck(uint64_t link, uint64_t export_id) { acks_.emplace(link, export_id); }
  bool owes_revoke_acks() const { return !acks_.empty(); }
  // Takes the acks that may go now: (link, export id).
  std::vector<std::pair<uint64_t, uint64_t>> TakeReadyRevokeAcks();

 private:
  Ops ops_;
  std::set<std::pair<uint64_t, uint64_t>> acks_;
};

}  // namespace mcdma::daemon
