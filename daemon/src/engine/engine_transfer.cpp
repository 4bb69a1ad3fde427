// One-sided READ/WRITE: validated against the session's own buffer and the
// resolved export, then cut into pieces (no larger than the transfer chunk,
// the device's limits or a registration piece) and pipelined on the
// transport. Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/engine.hpp"

namespace mcdma::daemon {
namespace {
// Pieces in flight per transfer: enough to pipeline, few enough that
// concurrent transfers share the queue.
constexpr uint32_t kPiecesInFlightPerOp = 8;
constexpr size_t kTransferPollBatch = 16;
}  // namespace

void Engine::HandleTransfer(Session& s, const shm::SubmitDesc& d) {
  bool is_read = d.opcode == static_cast<uint8_t>(shm::Op::kRead);
  const char* verb = is_read ? "read" : "write";
  std::shared_ptr<BufferRecord> buf = registry_.OwnedBuffer(d.local_buffer, s.id());
  if (!buf) {
    Reject(s, d, Code::kNotFound,
           "buffer " + std::to_string(d.local_buffer) + " is not owned by this session");
    return;
  }
  if (d.length == 0) {
    Reject(s, d, Code::kInvalid, std::string("zero-length ") + verb);
    return;
  }
  uint64_t local_size = buf->size();
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
  if (h->second.peer) {
    HandlePeerTransfer(s, d, buf, h->second.peer);
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
  op.local = buf;
  op.local_offset = d.local_offset;
  op.target = std::move(target);
  op.remote_offset = d.remote_offset;
  op.length = d.length;
  op.deadline = DeadlineFor(d);
  ++s.inflight;
  transfers_.Add(std::move(op));
}

void Engine::HandlePeerTransfer(Session& s, const shm::SubmitDesc& d,
                                const std::shared_ptr<BufferRecord>& buf,
                                const std::shared_ptr<PeerExport>& target) {
  bool is_read = d.opcode == static_cast<uint8_t>(shm::Op::kRead);
  if (!PeerExportAllows(s, d, *target)) return;
  EngineLink* l = LinkForPeerExport(s, d, *target);
  if (l == nullptr || (!l->routed && !ReadyForLink(s, d, *buf, *l))) return;
  TransferOp op;
  op.id = next_id_++;
  op.session = s.id();
  op.tag = d.tag;
  op.is_read = is_read;
  op.local = buf;
  op.local_offset = d.local_offset;
  op.peer = target;
  op.link = l->id;
  op.remote_offset = d.remote_offset;
  op.length = d.length;
  op.deadline = DeadlineFor(d);
  ++s.inflight;
  if (is_read) {
    ++l->stats->reads;
  } else {
    ++l->stats->writes;
  }
  transfers_.Add(std::move(op));
}

bool Engine::PeerExportAllows(Session& s, const shm::SubmitDesc& d, PeerExport& target) {
  bool is_read = d.opcode == static_cast<uint8_t>(shm::Op::kRead);
  if (target.expires && *target.expires <= Clock::now() && !target.revoked) {
    target.revoked = true;
    target.revoked_why = "export '" + target.name + "' on '" + target.peer + "' expired (TTL)";
  }
  if (target.revoked) {
    Decline(s, d, Code::kRevoked, target.revoked_why);
    return false;
  }
  if (is_read ? !target.allow_read : !target.allow_write) {
    Decline(s, d, Code::kPermissionDenied,
            "export '" + target.name + "' on '" + target.peer + "' does not allow " +
                (is_read ? "reading" : "writing"));
    return false;
  }
  if (d.remote_offset > target.length || d.length > target.length - d.remote_offset) {
    Reject(s, d, Code::kOutOfRange,
           "remote range [" + std::to_string(d.remote_offset) + ", +" + std::to_string(d.length) +
               ") runs past the end of export '" + target.name + "' on '" + target.peer + "' (" +
               std::to_string(target.length) + " bytes)");
    return false;
  }
  return true;
}

EngineLink* Engine::LinkForPeerExport(Session& s, const shm::SubmitDesc& d,
                                      const PeerExport& target) {
  // Over the link of its own while it is up (the export's keys are for
  // it); else, or when it was resolved over a route, as routed pieces.
  EngineLink* l = target.routed ? nullptr : DirectLinkTo(target.peer);
  if (l == nullptr) {
    auto route = routes_.find(target.peer);
    if (route != routes_.end() && !route->second.next_hop.empty())
      l = RoutedLinkTo(target.peer, route->second.instance);
  }
  if (l == nullptr) {
    Decline(s, d, Code::kLinkDown,
            "no link to peer '" + target.peer + "' is up, and no route to it");
    return nullptr;
  }
  if (l->spec.peer_instance != target.peer_instance) {
    Decline(s, d, Code::kPeerGone,
            "peer '" + target.peer + "' restarted since export '" + target.name +
                "' was resolved; resolve it again");
    return nullptr;
  }
  return l;
}

const Registration* Engine::LocalRegFor(BufferRecord& buf, const Rail& r, std::string* why) {
  Registration& reg = buf.reg_at(r.spec.slot);
  if (!reg.empty()) return &reg;
  driver::Device* dev = device_at(r.spec.slot);
  if (dev == nullptr) {
    *why = "no device for rail " + r.spec.local;
    return nullptr;
  }
  // Registered with an RDMA device at its first use there: a profile that
  // allows few registrations is not spent on buffers never sent.
  auto made = RegisterPieces(*dev, buf.segment.data(), buf.size(), driver::kAccessLocal);
  if (!made.ok()) {
    *why = "buffer " + std::to_string(buf.id) + ": " + made.status().message();
    return nullptr;
  }
  reg = std::move(made).value();
  return &reg;
}

bool Engine::ReadyForLink(Session& s, const shm::SubmitDesc& d, BufferRecord& buf, EngineLink& l) {
  // Registered with the device of every rail that may carry it; one rail
  // that can is enough (the others are left out of this transfer).
  // With no live rail (a wire cut the heartbeat has not yet called) the
  // link is down for this transfer: LINK_DOWN, as after the link is dropped.
  // NO_MEMORY is for a live rail whose device refused the registration.
  std::string why;
  bool live = false;
  bool any = false;
  for (const auto& r : l.rails) {
    if (r == nullptr || !r->live()) continue;
    live = true;
    if (LocalRegFor(buf, *r, &why) != nullptr) any = true;
  }
  if (any) return true;
  if (!live) {
    Decline(s, d, Code::kLinkDown, "no rail of the link to '" + l.spec.peer + "' is up");
    return false;
  }
  Decline(s, d, Code::kNoMemory, why);
  return false;
}

// Posts what the op may post now; true if anything was posted.
bool Engine::PostTransferPieces(TransferOp& op) {
  if (op.link != 0) {
    EngineLink* link = FindLink(op.link);
    if (link == nullptr || link->failed) return false;  // DropLink fails the op
    return link->routed ? PostRoutedPieces(op, *link) : PostLinkPieces(op, *link);
  }
  driver::Connection* conn = local_.get();
  const driver::Caps& caps = conn->caps();
  const Registration& local_reg = op.local->reg(Transport::kLoop);
  bool did = false;
  while (op.error == Code::kOk && op.posted < op.length && op.outstanding < kPiecesInFlightPerOp &&
         conn->outstanding() < caps.max_outstanding) {
    Piece piece = NextPiece(op, local_reg, caps, options_.transfer_chunk_bytes);
    Status st = op.is_read ? conn->PostRead(op.id, piece.local, piece.remote)
                           : conn->PostWrite(op.id, piece.local, piece.remote);
    if (st.code() == Code::kBusy) break;
    if (!st.ok()) {
      op.error = st.code();
      op.error_detail = st.message();
      break;
    }
    op.posted += piece.bytes;
    ++op.outstanding;
    did = true;
  }
  return did;
}

bool Engine::PostLinkPieces(TransferOp& op, EngineLink& link) {
  // A rail that came up since the op started gets the buffer registered
  // now (once: a device that refused is not asked again for this op).
  for (const auto& r : link.rails) {
    if (r == nullptr || !r->up() || !op.local->reg_at(r->spec.slot).empty()) continue;
    const uint32_t bit = 1u << r->spec.slot;
    if ((op.refused_slots & bit) != 0) continue;
    std::string why;
    if (LocalRegFor(*op.local, *r, &why) == nullptr) {
      op.refused_slots |= bit;
      spdlog::get("engine")->warn("link {} to '{}': rail {} left out of a transfer: {}", link.id,
                                  link.spec.peer, r->spec.index, why);
    }
  }
  // Large transfers go in slices over every rail; small ones in chunks on one.
  const bool striped = op.length >= options_.stripe_min_bytes;
  const uint64_t chunk = striped ? options_.slice_bytes : options_.transfer_chunk_bytes;
  uint32_t rails_up = 0;
  for (const auto& r : link.rails) rails_up += r != nullptr && r->up() ? 1 : 0;
  const uint32_t most_pieces = kPiecesInFlightPerOp * std::max(1u, rails_up);
  bool did = false;
  while (op.error == Code::kOk && (!op.redo.empty() || op.posted < op.length) &&
         op.outstanding < most_pieces) {
    uint64_t offset = op.redo.empty() ? op.posted : op.redo.front().first;
    uint64_t most = op.redo.empty() ? op.length - op.posted : op.redo.front().second;
    Rail* rail = PickRail(link, op, std::min(most, chunk));
    if (rail == nullptr) break;
    Piece piece = PieceAt(op, offset, most, op.local->reg_at(rail->spec.slot), rail->conn->caps(),
                          chunk, op.peer ? op.peer->KeysFor(rail->spec.peer_device) : nullptr);
    NoteRailBusy(*rail);
    Status st = op.is_read ? rail->conn->PostRead(op.id, piece.local, piece.remote)
                           : rail->conn->PostWrite(op.id, piece.local, piece.remote);
    if (st.code() == Code::kBusy) break;
    if (!st.ok()) {
      if (st.code() == Code::kLinkDown) {
        // The rail is gone, not the transfer: the slice goes elsewhere.
        rail->Fail(st.code(), st.message());
        break;
      }
      op.error = st.code();
      op.error_detail = st.message();
      break;
    }
    if (op.redo.empty()) {
      op.posted += piece.bytes;
    } else if (piece.bytes == op.redo.front().second) {
      op.redo.pop_front();
    } else {
      op.redo.front().first += piece.bytes;
      op.redo.front().second -= piece.bytes;
    }
    op.pieces.push_back({rail->spec.index, offset, piece.bytes});
    ++op.outstanding;
    ++rail->transfers;
    rail->inflight_bytes += piece.bytes;
    rail->stats.bytes_sent += piece.bytes;
    if (striped) rail->striped_bytes += piece.bytes;
    did = true;
  }
  return did;
}

void Engine::OnTransferCompletion(const driver::WorkCompletion& wc, EngineLink* link, Rail* rail) {
  TransferOp* found = transfers_.Find(wc.wr_id);
  if (rail != nullptr && rail->transfers > 0) --rail->transfers;
  if (found == nullptr) return;
  TransferOp& op = *found;
  if (rail != nullptr) {
    // The rail's oldest piece of this op: a rail completes in post order.
    auto it = std::find_if(op.pieces.begin(), op.pieces.end(),
                           [&](const TransferOp::Posted& p) { return p.rail == rail->spec.index; });
    if (it == op.pieces.end()) return;  // reissued when its rail failed
    TransferOp::Posted piece = *it;
    op.pieces.erase(it);
    rail->inflight_bytes -= std::min(rail->inflight_bytes, piece.bytes);
    if (wc.code == Code::kLinkDown && link != nullptr) {
      // The rail failed under it: posted again on another rail.
      op.redo.emplace_back(piece.offset, piece.bytes);
      if (op.outstanding > 0) --op.outstanding;
      ++rail->stats.slices_reissued;
      rail->Fail(wc.code, LinkFailureText(wc.code, wc.detail));
      return;
    }
    if (wc.code == Code::kOk) {
      ++rail->stats.slices;
      NoteSliceDone(*rail, piece.bytes);
    }
  }
  if (op.outstanding > 0) --op.outstanding;
  if (wc.code == Code::kOk) {
    op.done += wc.byte_len;
  } else if (op.error == Code::kOk) {
    op.error = wc.code;
    op.error_detail = wc.detail;
    // We checked the grant before posting, so a peer that refuses access
    // has revoked it (its kRevoke message may still be on its way) — unless
    // its NIC refused an RDMA access: that also takes the queue pair down,
    // and a peer daemon being killed (its registrations go before its QP)
    // looks the same, so the honest answer is the link's.
    if (rail != nullptr && wc.code == Code::kPermissionDenied && op.peer) {
      if (rail->spec.transport == Transport::kVerbs && rail->conn->caps().one_sided) {
        op.error = Code::kLinkDown;
        op.error_detail = "the NIC of '" + op.peer->peer + "' refused the access to export '" +
                          op.peer->name +
                          "' and the link failed: the peer is going away, or the export was "
                          "revoked meanwhile (resolve it again)";
      } else {
        op.error = Code::kRevoked;
        op.error_detail = "export '" + op.peer->name + "' on '" + op.peer->peer +
                          "' refused access: it was unexported, expired or its owner exited";
      }
    }
  }
}

bool Engine::SendRevokeAcks() {
  bool did = false;
  for (auto [link_id, export_id] : transfers_.TakeReadyRevokeAcks()) {
    if (EngineLink* l = FindLink(link_id)) {
      link_wire::Header h;
      h.type = link_wire::MsgType::kRevokeAck;
      h.target = export_id;
      SendMessage(*l, h, {});
    }
    did = true;
  }
  return did;
}

bool Engine::ProgressTransfers() {
  bool did = transfers_.owes_revoke_acks() && SendRevokeAcks();
  if (transfers_.empty()) return did;
  for (auto& [id, op] : transfers_) {
    bool revoked = op.peer ? op.peer->revoked : op.target->revoked;
    if (op.error == Code::kOk && revoked) {
      op.error = Code::kRevoked;
      op.error_detail = op.peer
                            ? op.peer->revoked_why
                            : "export '" + op.target->name + "' was revoked during the transfer";
    }
    did |= PostTransferPieces(op);
  }
  driver::WorkCompletion wcs[kTransferPollBatch];
  size_t n = local_->Poll(wcs);
  for (size_t i = 0; i < n; ++i) OnTransferCompletion(wcs[i], nullptr, nullptr);
  did |= n > 0;
  did |= transfers_.FinishAndReap([this](TransferOp& op) { FinishTransfer(op); });
  return did;
}

void Engine::FinishTransfer(TransferOp& op) {
  if (op.link != 0) {
    if (EngineLink* l = FindLink(op.link)) {
      if (op.error != Code::kOk) {
        ++l->stats->ops_failed;
      } else {
        (op.is_read ? l->stats->read_bytes : l->stats->write_bytes) += op.done;
      }
    }
  }
  Session* s = FindSession(op.session);
  if (s == nullptr || s->closing) return;
  --s->inflight;
  auto kind = op.is_read ? shm::Op::kRead : shm::Op::kWrite;
  Complete(*s, kind, op.tag, op.error, op.error_detail, op.error == Code::kOk ? op.done : 0, {},
           Reason::kNone, op.started);
}

}  // namespace mcdma::daemon
