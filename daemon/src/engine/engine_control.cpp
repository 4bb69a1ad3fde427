// Control-plane operations the gRPC handlers run on the engine thread:
// sessions, buffers, exports, services. Engine thread only.
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "engine/engine.hpp"
#include "mcdma_internal/sys.hpp"

namespace mcdma::daemon {
namespace {

// The longest a removed export's verbs registration waits for its peers'
// kRevokeAcks (a peer that never answers would pin the memory forever).
constexpr auto kRevokeDrainLimit = std::chrono::seconds(60);

Status ValidName(const std::string& name, const char* what) {
  if (name.empty() || name.size() > 128) {
    return Status(Code::kInvalid, std::string(what) + " name must be 1..128 characters");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    if (!ok) {
      return Status(Code::kInvalid, std::string(what) + " name '" + name +
                                        "' has a character outside [A-Za-z0-9._:/-]");
    }
  }
  return Status::Ok();
}

// 0 asks for the configured size, which is also the maximum.
Result<uint32_t> RingSize(uint32_t requested, uint32_t configured, const char* field) {
  if (requested == 0) return configured;
  if (!shm::IsPowerOfTwo(requested) || requested < 8 || requested > shm::kMaxRingEntries) {
    return Status(Code::kInvalid, std::string(field) +
                                      " must be a power of two in [8, 65536], got " +
                                      std::to_string(requested));
  }
  return std::min(requested, configured);
}

}  // namespace

// A name reserved for another user is refused (options.hpp, NameReservation).
Status Engine::CheckNameOwner(const Session& s, const std::string& name, const char* what) const {
  std::optional<uint32_t> owner = ReservedFor(options_.reservations, name);
  if (!owner || *owner == s.uid) return Status::Ok();
  return Status(Code::kPermissionDenied, Reason::kNameReserved,
                std::string(what) + " name '" + name + "' is reserved for uid " +
                    std::to_string(*owner) + " (this session is uid " + std::to_string(s.uid) +
                    ")");
}

Result<OpenedInfo> Engine::OpenSession(const HelloInfo& hello) {
  if (draining_) return Status(Code::kUnavailable, "the daemon is draining (shutting down)");
  if (sessions_.size() >= options_.max_sessions) {
    return Status(Code::kBusy, "session limit reached (limits.max_sessions = " +
                                   std::to_string(options_.max_sessions) + ")");
  }
  shm::MailboxGeometry geo{};
  MCDMA_ASSIGN_OR_RETURN(
      geo.sq_entries,
      RingSize(hello.submission_entries, options_.submission_entries, "submission_entries"));
  MCDMA_ASSIGN_OR_RETURN(
      geo.cq_entries,
      RingSize(hello.completion_entries, options_.completion_entries, "completion_entries"));
  MCDMA_ASSIGN_OR_RETURN(geo.inbox_entries,
                         RingSize(hello.inbox_entries, options_.inbox_entries, "inbox_entries"));
  uint64_t arena = hello.arena_bytes == 0 ? options_.arena_bytes : hello.arena_bytes;
  if (arena < uint64_t{64} * 1024 || arena > options_.max_arena_bytes) {
    return Status(Code::kInvalid, "arena_bytes must be in [65536, " +
                                      std::to_string(options_.max_arena_bytes) + "], got " +
                                      std::to_string(arena));
  }
  geo.app_arena_bytes = arena / 2 / shm::kArenaUnit * shm::kArenaUnit;
  geo.daemon_arena_bytes = geo.app_arena_bytes;
  uint64_t mailbox_bytes = RoundUpToPage(geo.total_bytes());
  MCDMA_RETURN_IF_ERROR(users_.ChargeSession(hello.uid, mailbox_bytes));
  uint64_t id = next_id_++;
  auto created = Session::Create(id, geo, hello.uid, segment_tag_);
  if (!created.ok()) {
    users_.RefundSession(hello.uid, mailbox_bytes);
    return created.status();
  }
  std::unique_ptr<Session> s = std::move(created).value();
  s->token = RandomHex(16);
  s->app_name = hello.app_name.substr(0, 128);
  s->pid = hello.pid;
  s->uid = hello.uid;
  s->created = Clock::now();
  OpenedInfo info{id, s->token, s->segment().name(), s->segment().size()};
  registry_.TrackUnmapped(info.mailbox_segment, {id, 0, s->created});
  spdlog::get("engine")->info(
      "session {} opened: app '{}' pid {} uid {} (sq {}, cq {}, inbox {}, arena {} KiB)", id,
      s->app_name, s->pid, s->uid, geo.sq_entries, geo.cq_entries, geo.inbox_entries, arena / 1024);
  sessions_.Add(std::move(s));
  return info;
}

void Engine::SetStreamCanceller(uint64_t session, std::function<void()> cancel) {
  if (Session* s = FindSession(session)) s->cancel_stream = std::move(cancel);
}

Status Engine::CheckToken(uint64_t session, const std::string& token) const {
  const Session* s = sessions_.Find(session);
  if (s == nullptr) return Status(Code::kNotFound, "no session " + std::to_string(session));
  const std::string& want = s->token;
  if (token.size() != want.size() || CRYPTO_memcmp(token.data(), want.data(), want.size()) != 0) {
    return Status(Code::kPermissionDenied, "bad token for session " + std::to_string(session));
  }
  if (s->closing) return Status(Code::kUnavailable, "session is closing");
  return Status::Ok();
}

void Engine::UnlinkOrCount(ShmSegment& segment) {
  Status st = segment.Unlink();
  if (st.ok()) return;
  ++segment_unlink_failures_;
  spdlog::get("engine")->warn("cannot unlink segment {}: {}", segment.name(), st.ToString());
}

void Engine::UnlinkSegment(const std::string& name) {
  const Registry::Unmapped* u = registry_.FindUnmapped(name);
  if (u == nullptr) return;
  if (u->buffer_id == 0) {
    if (Session* s = FindSession(u->session)) UnlinkOrCount(s->segment());
  } else if (auto b = registry_.OwnedBuffer(u->buffer_id, u->session)) {
    UnlinkOrCount(b->segment);
  }
  registry_.ForgetUnmapped(name);
}

Status Engine::Mapped(uint64_t session, const std::string& segment) {
  const Registry::Unmapped* u = registry_.FindUnmapped(segment);
  if (u == nullptr || u->session != session) {
    return Status(Code::kNotFound,
                  "segment " + segment + " is not an unmapped segment of this session");
  }
  UnlinkSegment(segment);
  return Status::Ok();
}

void Engine::CloseSession(uint64_t id, Code reason) {
  Session* s = FindSession(id);
  if (s == nullptr) return;
  // An evicted session already carries its reason; keep it.
  if (!s->closing) s->MarkClosed(reason);
  s->closing = true;
  // Calls this session serves fail for their callers; its own calls vanish.
  // Counted before they are reclaimed (removing an export erases it from
  // s->exports).
  size_t buffers = s->buffers.size();
  size_t exports = s->exports.size();
  size_t services = s->services.size();
  std::vector<uint64_t> served = calls_.ServedBy(id);
  calls_.DropCalledBy(id);
  for (uint64_t call : served) FailCall(call, Code::kPeerGone, "the serving app's session ended");
  for (uint64_t sid : s->services) registry_.RemoveService(sid);
  for (const std::string& name : std::vector<std::string>(s->exports.begin(), s->exports.end())) {
    RemoveExport(name, Code::kPeerGone);
  }
  for (auto& [h, handle] : s->handles) {
    if (auto e = handle.target.lock()) --e->handles;
  }
  transfers_.SessionGone(id);
  for (uint64_t bid : s->buffers) {
    std::shared_ptr<BufferRecord> b = registry_.RemoveBuffer(bid);
    if (!b) continue;
    users_.RefundBuffer(s->uid, b->size());
    registry_.ForgetUnmapped(b->segment.name());
    UnlinkOrCount(b->segment);
  }
  users_.RefundSession(s->uid, s->segment().size());
  registry_.ForgetUnmapped(s->segment().name());
  UnlinkOrCount(s->segment());
  spdlog::get("engine")->info(
      "session {} ('{}', pid {}) closed ({}): {} buffers, {} exports, {} services reclaimed", id,
      s->app_name, s->pid, CodeName(reason), buffers, exports, services);
  backlog_held_ -= s->backlog_bytes();  // its backlog goes with it
  sessions_.Reap(id);
}

void Engine::CloseAllSessions(Code reason) {
  for (uint64_t id : sessions_.Ids()) {
    if (Session* s = FindSession(id); s != nullptr && s->cancel_stream) s->cancel_stream();
    CloseSession(id, reason);
  }
}

Result<AllocInfo> Engine::Alloc(uint64_t session, uint64_t size) {
  Session* s = FindSession(session);
  if (s == nullptr) return Status(Code::kNotFound, "no session");
  if (size == 0) return Status(Code::kInvalid, "buffer size must be > 0");
  if (size > options_.max_buffer_bytes) {
    return Status(Code::kNoMemory, "buffer of " + std::to_string(size) +
                                       " bytes exceeds limits.max_buffer_bytes (" +
                                       std::to_string(options_.max_buffer_bytes) + ")");
  }
  if (s->buffers.size() >= options_.max_buffers_per_session) {
    return Status(Code::kNoMemory, "session has limits.max_buffers_per_session (" +
                                       std::to_string(options_.max_buffers_per_session) +
                                       ") buffers");
  }
  MCDMA_RETURN_IF_ERROR(users_.ChargeBuffer(s->uid, RoundUpToPage(size)));
  auto created = ShmSegment::Create(ShmSegment::NewName('b', segment_tag_), size, s->uid);
  if (!created.ok()) {
    users_.RefundBuffer(s->uid, RoundUpToPage(size));
    return created.status();
  }
  ShmSegment seg = std::move(created).value();
  auto rec = std::make_shared<BufferRecord>();
  rec->id = next_id_++;
  rec->owner = session;
  rec->created = Clock::now();
  rec->segment = std::move(seg);
  MCDMA_ASSIGN_OR_RETURN(rec->reg(Transport::kLoop),
                         RegisterPieces(*device(Transport::kLoop), rec->segment.data(), rec->size(),
                                        driver::kAccessRemoteRead | driver::kAccessRemoteWrite));
  // The link device reaches a buffer only as the local side of a transfer;
  // peers reach exported ranges through the export's own registration.
  if (driver::Device* link_device = device(Transport::kTcp)) {
    MCDMA_ASSIGN_OR_RETURN(
        rec->reg(Transport::kTcp),
        RegisterPieces(*link_device, rec->segment.data(), rec->size(), driver::kAccessLocal));
  }
  AllocInfo info{rec->id, rec->segment.name(), rec->size()};
  registry_.TrackUnmapped(info.segment, {session, rec->id, rec->created});
  s->buffers.insert(rec->id);
  registry_.AddBuffer(std::move(rec));
  return info;
}

Status Engine::Free(uint64_t session, uint64_t buffer_id) {
  Session* s = FindSession(session);
  std::shared_ptr<BufferRecord> b = registry_.OwnedBuffer(buffer_id, session);
  if (s == nullptr || !b) {
    return Status(Code::kNotFound,
                  "buffer " + std::to_string(buffer_id) + " is not owned by this session");
  }
  std::vector<std::string> revoke;
  for (const std::string& name : s->exports) {
    if (registry_.FindExport(name)->buffer->id == buffer_id) revoke.push_back(name);
  }
  for (const auto& name : revoke) RemoveExport(name, Code::kRevoked);
  registry_.ForgetUnmapped(b->segment.name());
  UnlinkOrCount(b->segment);
  users_.RefundBuffer(s->uid, b->size());
  registry_.RemoveBuffer(buffer_id);
  s->buffers.erase(buffer_id);
  return Status::Ok();
}

Result<uint64_t> Engine::Export(uint64_t session, const ExportSpec& spec) {
  MCDMA_RETURN_IF_ERROR(ValidName(spec.name, "export"));
  Session* s = FindSession(session);
  if (s == nullptr) return Status(Code::kNotFound, "no session");
  MCDMA_RETURN_IF_ERROR(CheckNameOwner(*s, spec.name, "export"));
  if (registry_.FindExport(spec.name))
    return Status(Code::kAlreadyExists, "export '" + spec.name + "' exists");
  std::shared_ptr<BufferRecord> b = registry_.OwnedBuffer(spec.buffer_id, session);
  if (!b) {
    return Status(Code::kNotFound,
                  "buffer " + std::to_string(spec.buffer_id) + " is not owned by this session");
  }
  uint64_t size = b->size();
  if (spec.offset > size)
    return Status(Code::kOutOfRange, "export offset is past the buffer's end");
  uint64_t length = spec.length == 0 ? size - spec.offset : spec.length;
  if (length > size - spec.offset || length == 0) {
    return Status(Code::kOutOfRange, "export range [" + std::to_string(spec.offset) + ", +" +
                                         std::to_string(length) + ") is outside the buffer (" +
                                         std::to_string(size) + " bytes)");
  }
  for (const auto& peer : spec.allowed_peers) MCDMA_RETURN_IF_ERROR(ValidName(peer, "peer"));
  auto e = std::make_shared<ExportRecord>();
  e->id = next_id_++;
  e->name = spec.name;
  e->owner = session;
  e->buffer = b;
  e->offset = spec.offset;
  e->length = length;
  e->allow_read = spec.allow_read;
  e->allow_write = spec.allow_write;
  e->allowed_peers = spec.allowed_peers;
  if (spec.ttl_ms > 0) e->expires = ExpiryAfter(spec.ttl_ms);
  uint64_t id = e->id;
  registry_.AddExport(std::move(e));
  s->exports.insert(spec.name);
  return id;
}

void Engine::RemoveExport(const std::string& name, Code reason) {
  std::shared_ptr<ExportRecord> removed = registry_.TakeExport(name);
  if (!removed) return;
  ExportRecord& e = *removed;
  e.revoked = true;
  // Peers lose access now: their next access fails at our end, and they are
  // told so their in-flight transfers stop.
  e.access(Transport::kTcp).pieces.clear();
  Registry::DrainingRegistration drain;
  for (const std::string& peer : e.resolved_by) {
    if (EngineLink* l = LinkTo(peer)) {
      link_wire::Header h;
      h.type = link_wire::MsgType::kRevoke;
      h.target = e.id;
      SendMessage(*l, h, {});
      if (l->has_rdma()) drain.waiting.insert(l->id);
    }
  }
  // The RDMA registrations wait for the peers' acks: a NIC access that
  // finds them gone would fail the peer's queue pair, not just the access.
  for (uint8_t slot = kFirstRdmaSlot; slot < kDeviceSlots; ++slot) {
    Registration& reg = e.access_at(slot);
    if (reg.empty()) continue;
    // Taken out of the record either way: kept by the drain, or gone now.
    Registration taken = std::exchange(reg, Registration{});
    if (!drain.waiting.empty()) drain.registrations.push_back(std::move(taken));
  }
  if (!drain.registrations.empty()) {
    drain.buffer = e.buffer;
    drain.deadline = Clock::now() + kRevokeDrainLimit;
    registry_.AddDrain(e.id, std::move(drain));
  }
  if (Session* owner = FindSession(e.owner)) owner->exports.erase(name);
  spdlog::get("engine")->debug("export '{}' removed ({})", name, CodeName(reason));
}

Status Engine::Unexport(uint64_t session, const std::string& name) {
  std::shared_ptr<ExportRecord> e = registry_.FindExport(name);
  if (!e) return Status(Code::kNotFound, "no export '" + name + "'");
  if (e->owner != session)
    return Status(Code::kPermissionDenied, "export '" + name + "' belongs to another session");
  RemoveExport(name, Code::kRevoked);
  return Status::Ok();
}

Result<ResolveInfo> Engine::Resolve(uint64_t session, const std::string& peer,
                                    const std::string& name) {
  Session* s = FindSession(session);
  if (s == nullptr) return Status(Code::kNotFound, "no session");
  if (!peer.empty() && peer != options_.host_id) {
    return Status(Code::kNotFound, Reason::kNotLinked,
                  "peer '" + peer + "' is not linked to this daemon");
  }
  std::shared_ptr<ExportRecord> e = registry_.FindExport(name);
  if (!e || e->revoked) return Status(Code::kNotFound, "no export '" + name + "'");
  uint64_t handle = next_id_++;
  s->handles.emplace(handle, RemoteHandle{e, e->id, nullptr});
  ++e->handles;
  return ResolveInfo{handle, e->length, e->allow_read, e->allow_write};
}

Status Engine::ReleaseHandle(uint64_t session, uint64_t handle) {
  Session* s = FindSession(session);
  if (s == nullptr) return Status(Code::kNotFound, "no session");
  auto it = s->handles.find(handle);
  if (it == s->handles.end())
    return Status(Code::kNotFound, "no remote handle " + std::to_string(handle));
  if (auto e = it->second.target.lock()) --e->handles;
  s->handles.erase(it);
  return Status::Ok();
}

Result<uint64_t> Engine::Serve(uint64_t session, const std::string& service) {
  MCDMA_RETURN_IF_ERROR(ValidName(service, "service"));
  Session* s = FindSession(session);
  if (s == nullptr) return Status(Code::kNotFound, "no session");
  MCDMA_RETURN_IF_ERROR(CheckNameOwner(*s, service, "service"));
  if (registry_.ServiceNameTaken(service)) {
    return Status(Code::kAlreadyExists, "service '" + service + "' is already served on this host");
  }
  uint64_t id = next_id_++;
  registry_.AddService(ServiceRecord{id, service, session});
  s->services.insert(id);
  return id;
}

Status Engine::Unserve(uint64_t session, uint64_t service_id) {
  const ServiceRecord* svc = registry_.FindService(service_id);
  if (svc == nullptr || svc->session != session) {
    return Status(Code::kNotFound,
                  "service " + std::to_string(service_id) + " is not served by this session");
  }
  if (Session* s = FindSession(session)) s->services.erase(service_id);
  registry_.RemoveService(service_id);
  return Status::Ok();
}

Result<uint64_t> Engine::LookupService(uint64_t session, const std::string& peer,
                                       const std::string& service) {
  if (!peer.empty() && peer != options_.host_id) {
    return Status(Code::kNotFound, Reason::kNotLinked,
                  "peer '" + peer + "' is not linked to this daemon");
  }
  std::optional<uint64_t> id = registry_.ServiceNamed(service);
  if (!id) return Status(Code::kNotFound, "no service '" + service + "' on this host");
  return *id;
}

}  // namespace mcdma::daemon
