#include "engine/transfer_table.hpp"

#include <algorithm>

namespace mcdma::daemon {

Piece NextPiece(const TransferOp& op, const Registration& local_reg, const driver::Caps& caps,
                uint64_t chunk_bytes, const std::vector<RemotePiece>* remote_keys) {
  return PieceAt(op, op.posted, op.length - op.posted, local_reg, caps, chunk_bytes, remote_keys);
}

Piece PieceAt(const TransferOp& op, uint64_t offset, uint64_t most, const Registration& local_reg,
              const driver::Caps& caps, uint64_t chunk_bytes,
              const std::vector<RemotePiece>* remote_keys) {
  uint64_t local_off = op.local_offset + offset;
  uint64_t n =
      std::min({most, chunk_bytes, op.is_read ? caps.max_read_bytes : caps.max_transfer_bytes,
                local_reg.PieceRemaining(local_off)});
  Piece p;
  if (op.peer) {
    uint64_t ro = op.remote_offset + offset;
    const PeerExport::Piece& piece = PeerExport::PieceAt(*remote_keys, ro);
    n = std::min(n, piece.offset + piece.length - ro);
    p.remote = {piece.addr + (ro - piece.offset), piece.rkey};
  } else {
    uint64_t remote_off = op.target->offset + op.remote_offset + offset;
    const Registration& remote_reg = op.target->buffer->reg(Transport::kLoop);
    n = std::min(n, remote_reg.PieceRemaining(remote_off));
    p.remote = remote_reg.Remote(remote_off);
  }
  p.local = local_reg.Slice(local_off, n);
  p.bytes = n;
  return p;
}

void TransferTable::Add(TransferOp op) {
  uint64_t id = op.id;
  ops_.emplace(id, std::move(op));
}

TransferOp* TransferTable::Find(uint64_t id) {
  auto it = ops_.find(id);
  return it == ops_.end() ? nullptr : &it->second;
}

bool TransferTable::AnyLocal() const {
  return std::any_of(ops_.begin(), ops_.end(), [](const auto& kv) { return kv.second.link == 0; });
}

uint32_t TransferTable::CountOnLink(uint64_t link) const {
  uint32_t n = 0;
  for (const auto& [id, op] : ops_) n += op.link == link ? 1 : 0;
  return n;
}

void TransferTable::LinkGone(uint64_t link, Code code, const std::string& why) {
  std::erase_if(acks_, [link](const auto& ack) { return ack.first == link; });
  for (auto& [id, op] : ops_) {
    if (op.link != link) continue;
    if (op.error == Code::kOk) {
      op.error = code;
      op.error_detail = why;
    }
    // The connection goes with the link: nothing it had posted completes.
    op.outstanding = 0;
    op.pieces.clear();
    op.redo.clear();
  }
}

uint64_t TransferTable::RailGone(uint64_t link, uint32_t rail) {
  uint64_t moved = 0;
  for (auto& [id, op] : ops_) {
    if (op.link != link) continue;
    for (auto it = op.pieces.begin(); it != op.pieces.end();) {
      if (it->rail != rail) {
        ++it;
        continue;
      }
      // A WRITE of the same bytes to the same place, or a READ of them
      // again, is harmless: the range is simply posted again.
      op.redo.emplace_back(it->offset, it->bytes);
      if (op.outstanding > 0) --op.outstanding;
      it = op.pieces.erase(it);
      ++moved;
    }
  }
  return moved;
}

void TransferTable::SessionGone(uint64_t session) {
  // The ops keep their buffers alive until their posted pieces are done.
  for (auto& [id, op] : ops_) {
    if (op.session != session) continue;
    op.completed = true;
    if (op.error == Code::kOk) op.error = Code::kCancelled;
  }
}

void TransferTable::ExpireDeadlines(Clock::time_point now) {
  for (auto& [id, op] : ops_) {
    if (!op.completed && op.deadline <= now && op.error == Code::kOk) {
      op.error = Code::kTimeout;
      op.error_detail = "transfer did not finish before the deadline";
    }
  }
}

bool TransferTable::FinishAndReap(const std::function<void(TransferOp&)>& finish) {
  bool did = false;
  for (auto it = ops_.begin(); it != ops_.end();) {
    TransferOp& op = it->second;
    bool finished = op.error != Code::kOk || op.done == op.length;
    // A deadline is reported at once; the pieces still posted drain after.
    if (!op.completed && finished && (op.outstanding == 0 || op.error == Code::kTimeout)) {
      op.completed = true;
      finish(op);
      did = true;
    }
    if (op.completed && op.outstanding == 0) {
      it = ops_.erase(it);
    } else {
      ++it;
    }
  }
  return did;
}

std::vector<std::pair<uint64_t, uint64_t>> TransferTable::TakeReadyRevokeAcks() {
  std::vector<std::pair<uint64_t, uint64_t>> ready;
  for (auto it = acks_.begin(); it != acks_.end();) {
    const uint64_t link = it->first;
    const uint64_t export_id = it->second;
    bool posted = std::any_of(ops_.begin(), ops_.end(), [&](const auto& kv) {
      const TransferOp& op = kv.second;
      return op.link == link && op.peer && op.peer->export_id == export_id && op.outstanding > 0;
    });
    if (posted) {
      ++it;
      continue;
    }
    ready.emplace_back(link, export_id);
    it = acks_.erase(it);
  }
  return ready;
}

}  // namespace mcdma::daemon
