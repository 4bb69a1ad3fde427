// READ/WRITE with a host this daemon has no link of its own to
// (docs/architecture.md §23.1). There is no RDMA between the two ends, and
// the relays between them hold no registration: an access goes as routed
// messages, in pieces of at most route_wire::kMaxPieceBytes. The origin
// sends kPiece messages (a WRITE's bytes, or a READ's range) on the routed
// link; the export's host checks each against the export (granted to the
// origin host, its rights, its range, not revoked or expired), applies it
// and answers a kPieceReply (a READ's bytes). The routed link delivers
// each message once and in order, and sends again what a broken route
// lost, so a transfer survives a route change with nothing lost or
// applied twice. Relays forward each piece as soon as it is whole.
//
// Bounds: an op has at most kRoutedOpWindow bytes of pieces unanswered,
// a routed link kRoutedLinkWindow over all its ops; the export's host
// answers BUSY to a READ when more than kReplyBudgetBytes of answers wait
// on the routed link back (an origin that ignores its window). Engine
// thread only.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "engine/engine.hpp"
#include "engine/route_wire.hpp"

namespace mcdma::daemon {
namespace {

constexpr uint64_t kRoutedOpWindow = 8ULL << 20;
constexpr uint64_t kRoutedLinkWindow = 16ULL << 20;
constexpr uint64_t kReplyBudgetBytes = 32ULL << 20;
// Routed resolutions waiting for their answer, at most.
constexpr size_t kMaxRoutedResolves = 1024;
// A peer's TTL is saturated here (ten years).
constexpr uint64_t kMaxExpiresMs = 10ULL * 365 * 24 * 3600 * 1000;

std::string PieceWhat(const route_wire::PieceHead& p) {
  return std::string(p.kind == route_wire::PieceKind::kRead ? "read" : "write") + " of [" +
         std::to_string(p.offset) + ", +" + std::to_string(p.length) + ")";
}

}  // namespace

// ---- Resolving an export over a route --------------------------------------

Status Engine::StartRoutedResolve(const std::string& peer, const std::string& name,
                                  std::function<void(Result<PeerExport>)> done) {
  MCDMA_ASSIGN_OR_RETURN(EngineLink * l, RouteTo(peer));
  if (!l->routed) return Status(Code::kInvalid, "'" + peer + "' has a link of its own");
  if (l->next_hop.empty() || DirectLinkTo(l->next_hop) == nullptr)
    return Status(Code::kLinkDown, "no route to '" + peer + "' is up");
  if (resolves_.size() >= kMaxRoutedResolves)
    return Status(Code::kBusy, "too many routed resolutions in progress");
  uint64_t id = next_id_++;
  link_wire::Header h;
  h.type = link_wire::MsgType::kResolve;
  h.id = id;
  resolves_.emplace(id, ResolveWaiter{l->id, name, std::move(done)});
  SendMessage(*l, h, AsBytes(name));
  return Status::Ok();
}

void Engine::OnResolve(EngineLink& l, const link_wire::Header& h,
                       std::span<const std::byte> payload) {
  if (!l.routed) {
    FailLink(l, Code::kLinkDown, "protocol error: a resolution on a link of its own");
    return;
  }
  link_wire::Header r;
  r.type = link_wire::MsgType::kResolveReply;
  r.id = h.id;
  auto refuse = [&](Code code, const std::string& why) {
    r.status = static_cast<uint16_t>(code);
    SendMessage(l, r, AsBytes(why));
  };
  const std::string name(AsText(payload));
  std::shared_ptr<ExportRecord> found = registry_.FindExport(name);
  if (!found || found->revoked)
    return refuse(Code::kNotFound, "no export '" + name + "' on host '" + options_.host_id + "'");
  ExportRecord& e = *found;
  // The origin host is the one the export must be granted to, whichever
  // daemons carried the request.
  if (std::find(e.allowed_peers.begin(), e.allowed_peers.end(), l.spec.peer) ==
      e.allowed_peers.end())
    return refuse(Code::kPermissionDenied,
                  "export '" + name + "' is not granted to host '" + l.spec.peer + "'");
  route_wire::ExportAnswer a;
  a.length = e.length;
  a.allow_read = e.allow_read;
  a.allow_write = e.allow_write;
  if (e.expires) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*e.expires - Clock::now());
    a.expires_in_ms = static_cast<uint64_t>(std::max<int64_t>(left.count(), 1));
  }
  a.instance = instance_;
  e.resolved_by.insert(l.spec.peer);
  r.target = e.id;
  SendMessage(l, r, AsBytes(route_wire::EncodeExportAnswer(a)));
}

void Engine::OnResolveReply(EngineLink& l, const link_wire::Header& h,
                            std::span<const std::byte> payload) {
  auto it = resolves_.find(h.id);
  if (it == resolves_.end() || it->second.link != l.id) return;  // late
  ResolveWaiter w = std::move(it->second);
  resolves_.erase(it);
  Code code = CodeFromWire(h.status);
  if (code != Code::kOk) {
    w.done(Status(code, ReasonFromWire(h.reason), std::string(AsText(payload))));
    return;
  }
  std::string why;
  auto a = route_wire::DecodeExportAnswer(payload, &why);
  if (!a) {
    w.done(Status(Code::kInternal,
                  "peer '" + l.spec.peer + "' described export '" + w.name + "' with " + why));
    return;
  }
  PeerExport pe;
  pe.peer = l.spec.peer;
  pe.peer_instance = a->instance;
  pe.name = w.name;
  pe.export_id = h.target;
  pe.length = a->length;
  pe.allow_read = a->allow_read;
  pe.allow_write = a->allow_write;
  pe.routed = true;
  if (a->expires_in_ms != 0)
    pe.expires =
        Clock::now() + std::chrono::milliseconds(std::min(a->expires_in_ms, kMaxExpiresMs));
  w.done(std::move(pe));
}

// ---- The origin: pieces out, answers in --------------------------------------

bool Engine::PostRoutedPieces(TransferOp& op, EngineLink& link) {
  bool did = false;
  while (op.error == Code::kOk && op.posted < op.length) {
    const uint64_t bytes = std::min(route_wire::kMaxPieceBytes, op.length - op.posted);
    uint64_t op_inflight = 0;
    for (const auto& p : op.pieces) op_inflight += p.bytes;
    if (op_inflight != 0 && op_inflight + bytes > kRoutedOpWindow) break;
    if (link.piece_bytes != 0 && link.piece_bytes + bytes > kRoutedLinkWindow) break;
    const uint64_t offset = op.posted;
    route_wire::PieceHead head;
    head.kind = op.is_read ? route_wire::PieceKind::kRead : route_wire::PieceKind::kWrite;
    head.offset = op.remote_offset + offset;
    head.length = bytes;
    std::string payload(route_wire::kPieceHeadBytes + (op.is_read ? 0 : bytes), '\0');
    route_wire::EncodePieceHead(head, reinterpret_cast<std::byte*>(payload.data()));
    if (!op.is_read)
      std::memcpy(payload.data() + route_wire::kPieceHeadBytes,
                  op.local->segment.data() + op.local_offset + offset, bytes);
    link_wire::Header h;
    h.type = link_wire::MsgType::kPiece;
    h.id = op.id;
    h.target = op.peer->export_id;
    SendMessage(link, h, AsBytes(payload));
    if (link.failed) break;  // DropLink fails the op
    op.posted += bytes;
    op.pieces.push_back({0, offset, bytes});
    ++op.outstanding;
    link.piece_bytes += bytes;
    did = true;
  }
  return did;
}

void Engine::OnPieceReply(EngineLink& l, const link_wire::Header& h,
                          std::span<const std::byte> payload) {
  std::string why;
  auto head = route_wire::DecodePieceHead(payload, &why);
  if (!head) {
    FailLink(l, Code::kLinkDown, "protocol error: " + why);
    return;
  }
  TransferOp* found = transfers_.Find(h.id);
  if (found == nullptr || found->link != l.id) return;  // the op is gone (deadline, session)
  TransferOp& op = *found;
  const uint64_t offset = head->offset - op.remote_offset;
  auto it = std::find_if(op.pieces.begin(), op.pieces.end(), [&](const TransferOp::Posted& p) {
    return p.offset == offset && p.bytes == head->length;
  });
  if (it == op.pieces.end() || head->offset < op.remote_offset) {
    FailLink(l, Code::kLinkDown,
             "protocol error: an answer to a " + PieceWhat(*head) + " that was not asked");
    return;
  }
  op.pieces.erase(it);
  if (op.outstanding > 0) --op.outstanding;
  l.piece_bytes -= std::min(l.piece_bytes, head->length);
  const auto data = payload.subspan(route_wire::kPieceHeadBytes);
  const Code code = CodeFromWire(h.status);
  if (code != Code::kOk) {
    if (op.error == Code::kOk) {
      op.error = code;
      op.error_detail = std::string(AsText(data));
      if (code == Code::kRevoked && op.peer && !op.peer->revoked) {
        op.peer->revoked = true;
        op.peer->revoked_why = op.error_detail;
      }
    }
    return;
  }
  const uint64_t expected = op.is_read ? head->length : 0;
  if (data.size() != expected) {
    FailLink(
        l, Code::kLinkDown,
        "protocol error: " + std::to_string(data.size()) + " bytes answered a " + PieceWhat(*head));
    return;
  }
  if (op.is_read && !op.completed)
    std::memcpy(op.local->segment.data() + op.local_offset + offset, data.data(), data.size());
  op.done += head->length;
}

// ---- The export's host: pieces in, answers out -------------------------------

Result<ExportRecord*> Engine::ExportForPiece(const std::string& origin, uint64_t export_id,
                                             const route_wire::PieceHead& piece) {
  std::shared_ptr<ExportRecord> found = registry_.FindExportById(export_id);
  if (!found || found->revoked)
    return Status(Code::kRevoked, "export " + std::to_string(export_id) + " on '" +
                                      options_.host_id +
                                      "' was unexported, expired or its owner exited");
  ExportRecord& e = *found;
  if (e.expires && *e.expires <= Clock::now())
    return Status(Code::kRevoked, "export '" + e.name + "' on '" + options_.host_id + "' expired");
  // Granted to the origin host: a relay's own grants count for nothing.
  if (std::find(e.allowed_peers.begin(), e.allowed_peers.end(), origin) == e.allowed_peers.end())
    return Status(Code::kPermissionDenied,
                  "export '" + e.name + "' is not granted to host '" + origin + "'");
  const bool read = piece.kind == route_wire::PieceKind::kRead;
  if (read ? !e.allow_read : !e.allow_write)
    return Status(Code::kPermissionDenied,
                  "export '" + e.name + "' does not allow " + (read ? "reading" : "writing"));
  if (piece.offset > e.length || piece.length > e.length - piece.offset)
    return Status(Code::kOutOfRange, "a " + PieceWhat(piece) + " runs past the end of export '" +
                                         e.name + "' (" + std::to_string(e.length) + " bytes)");
  return found.get();
}

void Engine::OnPiece(EngineLink& l, const link_wire::Header& h,
                     std::span<const std::byte> payload) {
  if (!l.routed) {
    FailLink(l, Code::kLinkDown, "protocol error: a transfer piece on a link of its own");
    return;
  }
  std::string why;
  auto head = route_wire::DecodePieceHead(payload, &why);
  const size_t body = payload.size() - std::min(payload.size(), route_wire::kPieceHeadBytes);
  if (head && body != (head->kind == route_wire::PieceKind::kWrite ? head->length : 0)) {
    why = std::to_string(body) + " bytes with a " + PieceWhat(*head);
    head.reset();
  }
  if (!head) {
    FailLink(l, Code::kLinkDown, "protocol error: " + why);
    return;
  }
  link_wire::Header r;
  r.type = link_wire::MsgType::kPieceReply;
  r.id = h.id;
  std::string answer(route_wire::kPieceHeadBytes, '\0');
  route_wire::EncodePieceHead(*head, reinterpret_cast<std::byte*>(answer.data()));
  auto refuse = [&](Code code, const std::string& text) {
    r.status = static_cast<uint16_t>(code);
    answer += text;
    SendMessage(l, r, AsBytes(answer));
  };
  auto e = ExportForPiece(l.spec.peer, h.target, *head);
  if (!e.ok()) return refuse(e.status().code(), e.status().message());
  std::byte* at = (*e)->buffer->segment.data() + (*e)->offset + head->offset;
  if (head->kind == route_wire::PieceKind::kWrite) {
    std::memcpy(at, payload.data() + route_wire::kPieceHeadBytes, head->length);
    SendMessage(l, r, AsBytes(answer));
    return;
  }
  if (l.backlog_bytes + head->length > kReplyBudgetBytes)
    return refuse(Code::kBusy, "more than " + std::to_string(kReplyBudgetBytes >> 20) +
                                   " MiB of answers wait for '" + l.spec.peer + "'");
  answer.resize(route_wire::kPieceHeadBytes + head->length);
  std::memcpy(answer.data() + route_wire::kPieceHeadBytes, at, head->length);
  SendMessage(l, r, AsBytes(answer));
}

}  // namespace mcdma::daemon
