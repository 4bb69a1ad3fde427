// One-sided READ/WRITE: validated against the session's own buffer and the
// resolved export, then cut into pieces (no larger than the transfer chunk,
// the device's limits or a registration piece) and pipelined on the
// transport. Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine.hpp"

namespace mcdma::daemon {
namespace {
// Pieces in flight per transfer: enough to pipeline, few enough that
// concurrent transfers share the queue.
constexpr uint32_t kPiecesInFlightPerOp = 8;
constexpr size_t kPollBatch = 16;
}  // namespace

void Engine::HandleTransfer(Session& s, const shm::SubmitDesc& d) {
  bool is_read = d.opcode == static_cast<uint8_t>(shm::Op::kRead);
  const char* verb = is_read ? "read" : "write";
  auto buf = buffers_.find(d.local_buffer);
  if (buf == buffers_.end() || buf->second->owner != s.id()) {
    Reject(s, d, Code::kNotFound,
           "buffer " + std::to_string(d.local_buffer) + " is not owned by this session");
    return;
  }
  if (d.length == 0) {
    Reject(s, d, Code::kInvalid, std::string("zero-length ") + verb);
    return;
  }
  uint64_t local_size = buf->second->size();
  if (d.local_offset > local_size || d.length > local_size - d.local_offset) {
    Reject(s, d, Code::kOutOfRange,
           "local range [" + std::to_string(d.local_offset) + ", +" + std::to_string(d.length) +
               ") is outside buffer " + std::to_string(d.local_buffer) + " (" +
               std::to_string(local_size) + " bytes)");
    return;
  }
  auto h = s.handles.find(d.target);
  if (h == s.handles.end()) {
    Reject(s, d, Code::kNotFound,
           "remote handle " + std::to_string(d.target) + " is unknown (resolve first)");
    return;
  }
  std::shared_ptr<ExportRecord> target = h->second.target.lock();
  if (!target || target->revoked) {
    Decline(s, d, Code::kRevoked, "the export was unexported, expired, or its owner exited");
    return;
  }
  if (is_read ? !target->allow_read : !target->allow_write) {
    Decline(s, d, Code::kPermissionDenied,
            "export '" + target->name + "' does not allow " + (is_read ? "reading" : "writing"));
    return;
  }
  if (d.remote_offset > target->length || d.length > target->length - d.remote_offset) {
    Reject(s, d, Code::kOutOfRange,
           "remote range [" + std::to_string(d.remote_offset) + ", +" + std::to_string(d.length) +
               ") runs past the end of export '" + target->name + "' (" +
               std::to_string(target->length) + " bytes)");
    return;
  }
  TransferOp op;
  op.id = next_id_++;
  op.session = s.id();
  op.tag = d.tag;
  op.is_read = is_read;
  op.local = buf->second;
  op.local_offset = d.local_offset;
  op.target = std::move(target);
  op.remote_offset = d.remote_offset;
  op.length = d.length;
  op.deadline = DeadlineFor(d);
  ++s.inflight;
  transfers_.emplace(op.id, std::move(op));
}

bool Engine::ProgressTransfers() {
  if (transfers_.empty()) return false;
  bool did = false;
  const driver::Caps& caps = local_->caps();
  for (auto& [id, op] : transfers_) {
    if (op.error == Code::kOk && op.target->revoked) {
      op.error = Code::kRevoked;
      op.error_detail = "export '" + op.target->name + "' was revoked during the transfer";
    }
    while (op.error == Code::kOk && op.posted < op.length &&
           op.outstanding < kPiecesInFlightPerOp && local_->outstanding() < caps.max_outstanding) {
      uint64_t local_off = op.local_offset + op.posted;
      uint64_t remote_off = op.target->offset + op.remote_offset + op.posted;
      const BufferRecord& remote_buf = *op.target->buffer;
      uint64_t n =
          std::min({op.length - op.posted, options_.transfer_chunk_bytes,
                    op.is_read ? caps.max_read_bytes : caps.max_transfer_bytes,
                    op.local->PieceRemaining(local_off), remote_buf.PieceRemaining(remote_off)});
      driver::LocalSlice local = op.local->Slice(local_off, n);
      driver::RemoteSlice remote = remote_buf.Remote(remote_off);
      Status st = op.is_read ? local_->PostRead(op.id, local, remote)
                             : local_->PostWrite(op.id, local, remote);
      if (st.code() == Code::kBusy) break;
      if (!st.ok()) {
        op.error = st.code();
        op.error_detail = st.message();
        break;
      }
      op.posted += n;
      ++op.outstanding;
      did = true;
    }
  }
  driver::WorkCompletion wcs[kPollBatch];
  size_t n = local_->Poll(wcs);
  for (size_t i = 0; i < n; ++i) {
    auto it = transfers_.find(wcs[i].wr_id);
    if (it == transfers_.end()) continue;
    TransferOp& op = it->second;
    --op.outstanding;
    if (wcs[i].code == Code::kOk) {
      op.done += wcs[i].byte_len;
    } else if (op.error == Code::kOk) {
      op.error = wcs[i].code;
      op.error_detail = wcs[i].detail;
    }
  }
  did |= n > 0;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    TransferOp& op = it->second;
    bool finished = op.error != Code::kOk || op.done == op.length;
    // A deadline is reported at once; the pieces still posted drain after.
    if (!op.completed && finished && (op.outstanding == 0 || op.error == Code::kTimeout)) {
      FinishTransfer(op);
      did = true;
    }
    if (op.completed && op.outstanding == 0) {
      it = transfers_.erase(it);
    } else {
      ++it;
    }
  }
  return did;
}

void Engine::FinishTransfer(TransferOp& op) {
  op.completed = true;
  Session* s = FindSession(op.session);
  if (s == nullptr || s->closing) return;
  --s->inflight;
  auto kind = op.is_read ? shm::Op::kRead : shm::Op::kWrite;
  Complete(*s, kind, op.tag, op.error, op.error_detail, op.error == Code::kOk ? op.done : 0);
}

}  // namespace mcdma::daemon
