// The peer plane's records on the engine, both ways. For apps here: what a
// peer answered them (AddPeerService: a peer's service under one local id;
// AddPeerHandle: a peer's export as a session's handle). For peers: what
// this host answers them (LookupForPeer: a service's id; ResolveForPeer: an
// export, registered with the link's device at first use and described
// piece by piece). RegisterPieces, the registration in pieces a device
// allows, is shared with Alloc and transfers. Calls across links are in
// engine_calls.cpp, their messages in engine_link.cpp. Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/engine.hpp"
#include "mcdma_internal/shm_segment.hpp"

namespace mcdma::daemon {

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

// ---- For apps here: what peers answered ------------------------------------

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

// ---- For peers: what this host answers -------------------------------------

Result<uint64_t> Engine::LookupForPeer(const std::string& service) const {
  std::optional<uint64_t> id = registry_.ServiceNamed(service);
  if (!id)
    return Status(Code::kNotFound,
                  "no service '" + service + "' on host '" + options_.host_id + "'");
  return *id;
}

Result<PeerGrant> Engine::ResolveForPeer(const std::string& peer_host, const std::string& name,
                                         Transport transport) {
  std::shared_ptr<ExportRecord> found = registry_.FindExport(name);
  if (!found || found->revoked)
    return Status(Code::kNotFound, "no export '" + name + "' on host '" + options_.host_id + "'");
  ExportRecord& e = *found;
  if (std::find(e.allowed_peers.begin(), e.allowed_peers.end(), peer_host) ==
      e.allowed_peers.end()) {
    return Status(Code::kPermissionDenied,
                  "export '" + name + "' is not granted to host '" + peer_host + "'");
  }
  if (device(Transport::kTcp) == nullptr) return Status(Code::kUnavailable, "peering is off");
  if (transport == Transport::kVerbs && device(Transport::kVerbs) == nullptr)
    return Status(Code::kUnavailable, "no verbs transport here: " + verbs_info_.reason);
  const uint32_t access = (e.allow_read ? driver::kAccessRemoteRead : 0) |
                          (e.allow_write ? driver::kAccessRemoteWrite : 0);
  PeerGrant grant{e.id, e.length, e.allow_read, e.allow_write, {}, std::nullopt, {}};
  // Registered with every link device, so that any rail can carry the
  // peer's accesses: tcp, then each RDMA port. Only the device the peer
  // asked for must succeed; a port whose budget is spent is left out.
  std::vector<std::pair<uint8_t, std::string>> slots = {{kTcpSlot, std::string(kTcpKeys)}};
  for (const LocalVerbsInfo& p : rdma_infos_) slots.emplace_back(p.slot, p.device);
  const uint8_t asked = SlotOf(transport);
  for (const auto& [slot, key] : slots) {
    Registration& reg = e.access_at(slot);
    if (reg.empty()) {
      auto made =
          RegisterPieces(*device_at(slot), e.buffer->segment.data() + e.offset, e.length, access);
      if (!made.ok()) {
        if (slot == asked) return made.status();
        spdlog::get("engine")->warn("export '{}' is not granted over {} to '{}': {}", name, key,
                                    peer_host, made.status().message());
        continue;
      }
      reg = std::move(made).value();
    }
    std::vector<PeerGrant::Piece>& pieces = grant.keys[key];
    for (size_t i = 0; i < reg.pieces.size(); ++i) {
      const auto& mr = reg.pieces[i];
      pieces.push_back({i * reg.piece_bytes, mr->length(), mr->RemoteAddr(0), mr->rkey()});
    }
    if (slot == asked) grant.pieces = pieces;
  }
  e.resolved_by.insert(peer_host);
  if (e.expires) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*e.expires - Clock::now());
    grant.expires_in_ms = static_cast<uint64_t>(std::max<int64_t>(left.count(), 1));
  }
  return grant;
}

}  // namespace mcdma::daemon
