// Calls and exports across links: an app's call to a peer's service and the
// peer's reply; a peer's call to one of this host's services; resolution of
// exports for peers and of peers' exports for apps. Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine.hpp"
#include "mcdma_internal/shm_segment.hpp"

namespace mcdma::daemon {
namespace {
// What a peer needs to reach one registered piece: rkey (4 bytes) and
// remote address (8 bytes), little-endian.
std::string EncodeAccess(uint32_t rkey, uint64_t addr) {
  std::string out(12, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((rkey >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i) out[4 + i] = static_cast<char>((addr >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

Result<Registration> RegisterPieces(driver::Device& device, std::byte* addr, uint64_t length,
                                    uint32_t access) {
  Registration reg;
  const driver::Caps& caps = device.caps();
  uint64_t piece = std::min<uint64_t>(std::max<uint64_t>(length, PageSize()),
                                      caps.max_registration_bytes / PageSize() * PageSize());
  if (piece == 0) return Status(Code::kInternal, "device registration limit is below one page");
  reg.piece_bytes = piece;
  for (uint64_t off = 0; off < length; off += piece) {
    auto mr = device.Register(addr + off, std::min(piece, length - off), access);
    if (!mr.ok())
      return Status(mr.status().code(),
                    "registering with " + caps.name + ": " + mr.status().message());
    reg.pieces.push_back(std::move(mr).value());
  }
  return reg;
}

// ---- Caller side ---------------------------------------------------------

Result<uint64_t> Engine::AddPeerService(uint64_t session, PeerService service) {
  if (FindSession(session) == nullptr) return Status(Code::kNotFound, "no session");
  // Ids from the peer's earlier instances are stale: forget them (calls on
  // them fail NOT_FOUND and the client looks the name up again).
  for (auto it = peer_services_.begin(); it != peer_services_.end();) {
    if (it->second.peer == service.peer && it->second.peer_instance != service.peer_instance) {
      it = peer_services_.erase(it);
    } else {
      ++it;
    }
  }
  // One local id per (peer instance, remote id): every app shares it.
  for (const auto& [id, ps] : peer_services_) {
    if (ps.peer == service.peer && ps.peer_instance == service.peer_instance &&
        ps.remote_id == service.remote_id)
      return id;
  }
  uint64_t id = next_id_++;
  peer_services_.emplace(id, std::move(service));
  return id;
}

Result<ResolveInfo> Engine::AddPeerHandle(uint64_t session, PeerExport peer_export) {
  Session* s = FindSession(session);
  if (s == nullptr) return Status(Code::kNotFound, "no session");
  auto pe = std::make_shared<PeerExport>(std::move(peer_export));
  uint64_t handle = next_id_++;
  RemoteHandle h;
  h.export_id = pe->export_id;
  h.peer = pe;
  s->handles.emplace(handle, std::move(h));
  return ResolveInfo{handle, pe->length, pe->allow_read, pe->allow_write};
}

void Engine::HandlePeerCall(Session& s, const shm::SubmitDesc& d, bool one_way,
                            const PeerService& ps) {
  EngineLink* l = LinkTo(ps.peer);
  if (l == nullptr) {
    Decline(s, d, Code::kLinkDown, "no link to peer '" + ps.peer + "' is up");
    return;
  }
  if (l->spec.peer_instance != ps.peer_instance) {
    // Starts like a local stale id, so the client looks the name up again.
    Decline(s, d, Code::kNotFound,
            "no service with id " + std::to_string(d.target) + ": peer '" + ps.peer +
                "' restarted since '" + ps.name + "' was looked up");
    return;
  }
  if (d.payload_len > link_wire::kMaxMessageBytes) {
    Decline(s, d, Code::kNoMemory, "payload is larger than a link message may be");
    return;
  }
  ++l->stats->calls_out;
  auto deadline = DeadlineFor(d);
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  link_wire::Header h;
  h.type = one_way ? link_wire::MsgType::kNotify : link_wire::MsgType::kCall;
  h.target = ps.remote_id;
  h.timeout_us = static_cast<uint32_t>(std::clamp<int64_t>(left.count(), 1, UINT32_MAX));
  bool silent = one_way && (d.flags & shm::kFlagNoCompletion) != 0;
  if (!silent) {
    uint64_t call_id = next_id_++;
    h.id = call_id;
    calls_.emplace(
        call_id, PendingCall{s.id(), d.tag, 0, d.target, deadline, l->id, one_way, d.payload_len});
    call_deadlines_.emplace(deadline, call_id);
    ++s.inflight;
  } else {
    auto& stats = op_stats_[static_cast<size_t>(shm::Op::kNotify)];
    ++stats.ok;
    stats.bytes += d.payload_len;
  }
  SendMessage(*l, h, s.AppPayload(d.payload_off, d.payload_len));
}

void Engine::OnReply(EngineLink& l, const link_wire::Header& h,
                     std::span<const std::byte> payload) {
  auto it = calls_.find(h.id);
  if (it == calls_.end() || it->second.link != l.id || it->second.server != 0) return;  // late
  PendingCall call = it->second;
  calls_.erase(it);
  Session* caller = FindSession(call.caller);
  if (caller == nullptr || caller->closing) return;
  --caller->inflight;
  auto code = h.status <= static_cast<uint16_t>(Code::kSystem) ? static_cast<Code>(h.status)
                                                               : Code::kInternal;
  auto op = call.one_way ? shm::Op::kNotify : shm::Op::kCall;
  if (code != Code::kOk) ++l.stats->ops_failed;
  if (payload.size() > caller->geometry().daemon_arena_bytes) {
    Complete(
        *caller, op, call.caller_tag, Code::kNoMemory,
        "reply of " + std::to_string(payload.size()) + " bytes is larger than the caller's arena");
    return;
  }
  if (call.one_way) {
    Complete(*caller, op, call.caller_tag, code, AsText(payload),
             code == Code::kOk ? call.bytes : 0);
    return;
  }
  Complete(*caller, op, call.caller_tag, code, AsText(payload),
           code == Code::kOk ? payload.size() : 0, payload);
}

// ---- Callee side ---------------------------------------------------------

void Engine::OnIncomingCall(EngineLink& l, const link_wire::Header& h,
                            std::span<const std::byte> payload) {
  ++l.stats->calls_in;
  bool one_way = h.type == link_wire::MsgType::kNotify;
  auto refuse = [&](Code code, const std::string& why) {
    if (h.id != 0) SendReply(l.id, h.id, code, AsBytes(why));
  };
  if (draining_) return refuse(Code::kUnavailable, "the daemon is draining (shutting down)");
  auto svc = services_.find(h.target);
  if (svc == services_.end()) {
    return refuse(Code::kNotFound, "no service with id " + std::to_string(h.target) +
                                       " (unserved, or its app exited)");
  }
  Session* server = FindSession(svc->second.session);
  if (server == nullptr || server->closing)
    return refuse(Code::kPeerGone, "the app serving '" + svc->second.name + "' is gone");
  if (payload.size() > server->geometry().daemon_arena_bytes) {
    return refuse(Code::kNoMemory, "payload of " + std::to_string(payload.size()) +
                                       " bytes is larger than the arena of the app serving '" +
                                       svc->second.name + "'");
  }
  auto deadline = Clock::now() + std::chrono::microseconds(std::max<uint32_t>(h.timeout_us, 1));
  shm::EventDesc ev{};
  ev.kind = static_cast<uint8_t>(one_way ? shm::EventKind::kIncomingNotify
                                         : shm::EventKind::kIncomingCall);
  ev.service_id = svc->first;
  ev.source = 0;  // another host
  ev.timeout_us = std::max<uint32_t>(h.timeout_us, 1);
  uint64_t call_id = 0;
  if (!one_way) {
    call_id = next_id_++;
    ev.call_id = call_id;
  }
  if (!server->Post(/*inbox=*/true, ev, payload, options_.max_backlog))
    return refuse(Code::kBusy, "the inbox of '" + svc->second.name + "' is full");
  if (one_way) {
    if (h.id != 0) SendReply(l.id, h.id, Code::kOk, {});
    return;
  }
  calls_.emplace(call_id, PendingCall{0, h.id, server->id(), svc->first, deadline, l.id, false});
  call_deadlines_.emplace(deadline, call_id);
}

Result<uint64_t> Engine::LookupForPeer(const std::string& service) const {
  auto it = service_names_.find(service);
  if (it == service_names_.end())
    return Status(Code::kNotFound,
                  "no service '" + service + "' on host '" + options_.host_id + "'");
  return it->second;
}

Status Engine::ResolveForPeer(const std::string& peer_host, const std::string& name,
                              const std::string& transport, v1::PeerResolveExportReply* out) {
  auto it = exports_.find(name);
  if (it == exports_.end() || it->second->revoked)
    return Status(Code::kNotFound, "no export '" + name + "' on host '" + options_.host_id + "'");
  ExportRecord& e = *it->second;
  if (std::find(e.allowed_peers.begin(), e.allowed_peers.end(), peer_host) ==
      e.allowed_peers.end()) {
    return Status(Code::kPermissionDenied,
                  "export '" + name + "' is not granted to host '" + peer_host + "'");
  }
  if (!link_device_) return Status(Code::kUnavailable, "peering is off");
  const bool verbs = transport == "verbs";
  if (verbs && !verbs_device_)
    return Status(Code::kUnavailable, "no verbs transport here: " + verbs_info_.reason);
  driver::Device& device = verbs ? *verbs_device_ : *link_device_;
  Registration& reg = verbs ? e.peer_access_verbs : e.peer_access;
  if (reg.empty()) {
    uint32_t access = (e.allow_read ? driver::kAccessRemoteRead : 0) |
                      (e.allow_write ? driver::kAccessRemoteWrite : 0);
    MCDMA_ASSIGN_OR_RETURN(
        reg, RegisterPieces(device, e.buffer->segment.data() + e.offset, e.length, access));
  }
  e.resolved_by.insert(peer_host);
  out->set_export_id(e.id);
  out->set_length(e.length);
  out->set_allow_read(e.allow_read);
  out->set_allow_write(e.allow_write);
  for (size_t i = 0; i < reg.pieces.size(); ++i) {
    const auto& mr = reg.pieces[i];
    auto* p = out->add_pieces();
    p->set_offset(i * reg.piece_bytes);
    p->set_length(mr->length());
    p->set_access(EncodeAccess(mr->rkey(), mr->RemoteAddr(0)));
  }
  if (e.expires) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*e.expires - Clock::now());
    out->set_expires_in_ms(static_cast<uint64_t>(std::max<int64_t>(left.count(), 1)));
  }
  return Status::Ok();
}

}  // namespace mcdma::daemon
