#include "service/control_service.hpp"

#include <spdlog/spdlog.h>

#include "mcdma_internal/mailbox_layout.hpp"
#include "mcdma_internal/thread_annotations.hpp"
#include "peer/link_manager.hpp"
#include "service/grpc_status.hpp"

namespace mcdma::daemon {
namespace {
const grpc::Status kStopping(grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE: the daemon is stopping");

// Lets the engine cancel a stream only while its handler still runs: the
// handler clears `ctx` before it returns, under the same lock.
struct CancelGuard {
  explicit CancelGuard(grpc::ServerContext* c) : ctx(c) {}
  Mutex mu;
  grpc::ServerContext* ctx MCDMA_GUARDED_BY(mu);
};
}  // namespace

template <typename F>
grpc::Status ControlService::WithSession(const v1::SessionRef& ref, F&& fn) {
  auto r = engine_.Run([&]() -> Status {
    MCDMA_RETURN_IF_ERROR(engine_.CheckToken(ref.session_id(), ref.token()));
    return fn();
  });
  if (!r) return kStopping;
  return ToGrpc(*r);
}

grpc::Status ControlService::OpenSession(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<v1::SessionEvent, v1::SessionRequest>* stream) {
  v1::SessionRequest req;
  if (!stream->Read(&req) || !req.has_hello()) {
    return ToGrpc(Status(Code::kInvalid, "the first message of a session must be Hello"));
  }
  const v1::Hello& h = req.hello();
  if (h.protocol_version() != shm::kProtocolVersion) {
    return ToGrpc(Status(Code::kInvalid, "protocol version " +
                                             std::to_string(h.protocol_version()) +
                                             " is not supported (daemon speaks " +
                                             std::to_string(shm::kProtocolVersion) + ")"));
  }
  HelloInfo hello{h.app_name(),           h.pid(),           h.uid(),        h.submission_entries(),
                  h.completion_entries(), h.inbox_entries(), h.arena_bytes()};
  // Who the app is comes from the kernel (the connection's credentials),
  // never from what Hello says: the per-user budgets and the segments'
  // owner rest on it.
  if (listener_ != nullptr) {
    std::optional<ConnectionSource> source = listener_->FindPeer(ctx->peer());
    if (!source || !source->credentials) {
      return ToGrpc(Status(Code::kUnavailable, "the session's connection (" + ctx->peer() +
                                                   ") is not one the daemon accepted"));
    }
    hello.uid = source->credentials->uid;
    hello.pid = source->credentials->pid;
  }
  auto guard = std::make_shared<CancelGuard>(ctx);
  auto opened = engine_.Run([&]() -> Result<OpenedInfo> {
    auto r = engine_.OpenSession(hello);
    if (r.ok()) {
      engine_.SetStreamCanceller(r->session_id, [guard] {
        MutexLock lock(guard->mu);
        if (guard->ctx != nullptr) guard->ctx->TryCancel();
      });
    }
    return r;
  });
  if (!opened) return kStopping;
  if (!opened->ok()) return ToGrpc(opened->status());
  const OpenedInfo& info = opened->value();
  uint64_t sid = info.session_id;

  v1::SessionEvent ev;
  auto* o = ev.mutable_opened();
  o->set_session_id(sid);
  o->set_token(info.token);
  o->set_mailbox_segment(info.mailbox_segment);
  o->set_mailbox_bytes(info.mailbox_bytes);
  o->set_daemon_version(MCDMA_VERSION_TEXT);
  o->set_host_id(engine_.options().host_id);
  bool ok = stream->Write(ev);
  // The session lives as long as the stream: read until the app closes it,
  // dies (the socket closes) or the engine cancels it.
  while (ok && stream->Read(&req)) {
    if (req.has_mapped()) {
      std::string name = req.mapped().segment();
      auto r = engine_.Run([&] { return engine_.Mapped(sid, name); });
      if (r && !r->ok()) spdlog::get("control")->warn("session {}: {}", sid, r->ToString());
    } else {
      spdlog::get("control")->warn(
          "session {}: unexpected message on the session stream; closing it", sid);
      break;
    }
  }
  {
    MutexLock lock(guard->mu);
    guard->ctx = nullptr;
  }
  (void)engine_.Run([&] {
    engine_.CloseSession(sid, Code::kCancelled);
    return 0;
  });
  return grpc::Status::OK;
}

grpc::Status ControlService::Alloc(grpc::ServerContext*, const v1::AllocRequest* req,
                                   v1::AllocReply* rep) {
  return WithSession(req->session(), [&]() -> Status {
    MCDMA_ASSIGN_OR_RETURN(AllocInfo info, engine_.Alloc(req->session().session_id(), req->size()));
    rep->set_buffer_id(info.buffer_id);
    rep->set_segment(info.segment);
    rep->set_size(info.size);
    return Status::Ok();
  });
}

grpc::Status ControlService::Free(grpc::ServerContext*, const v1::FreeRequest* req,
                                  v1::FreeReply*) {
  return WithSession(req->session(),
                     [&] { return engine_.Free(req->session().session_id(), req->buffer_id()); });
}

grpc::Status ControlService::Export(grpc::ServerContext*, const v1::ExportRequest* req,
                                    v1::ExportReply* rep) {
  ExportSpec spec{
      req->name(),
      req->buffer_id(),
      req->offset(),
      req->length(),
      req->ttl_ms(),
      req->allow_read(),
      req->allow_write(),
      std::vector<std::string>(req->allowed_peers().begin(), req->allowed_peers().end())};
  return WithSession(req->session(), [&]() -> Status {
    MCDMA_ASSIGN_OR_RETURN(uint64_t id, engine_.Export(req->session().session_id(), spec));
    rep->set_export_id(id);
    return Status::Ok();
  });
}

grpc::Status ControlService::Unexport(grpc::ServerContext*, const v1::UnexportRequest* req,
                                      v1::UnexportReply*) {
  return WithSession(req->session(),
                     [&] { return engine_.Unexport(req->session().session_id(), req->name()); });
}

bool ControlService::IsRemote(const std::string& peer) const {
  return !peer.empty() && peer != engine_.options().host_id;
}

grpc::Status ControlService::Resolve(grpc::ServerContext*, const v1::ResolveRequest* req,
                                     v1::ResolveReply* rep) {
  if (IsRemote(req->peer())) {
    // Checked on the engine first so a bad token never reaches a peer.
    grpc::Status check = WithSession(req->session(), [] { return Status::Ok(); });
    if (!check.ok()) return check;
    if (links_ == nullptr) {
      return ToGrpc(Status(Code::kNotFound, Reason::kNotLinked,
                           "peer '" + req->peer() +
                               "' is not linked to this daemon (peering is off: "
                               "no fabric_key)"));
    }
    auto info = links_->Resolve(req->session().session_id(), req->peer(), req->name());
    if (!info.ok()) return ToGrpc(info.status());
    rep->set_handle(info->handle);
    rep->set_length(info->length);
    rep->set_allow_read(info->allow_read);
    rep->set_allow_write(info->allow_write);
    return grpc::Status::OK;
  }
  return WithSession(req->session(), [&]() -> Status {
    MCDMA_ASSIGN_OR_RETURN(ResolveInfo info,
                           engine_.Resolve(req->session().session_id(), req->peer(), req->name()));
    rep->set_handle(info.handle);
    rep->set_length(info.length);
    rep->set_allow_read(info.allow_read);
    rep->set_allow_write(info.allow_write);
    return Status::Ok();
  });
}

grpc::Status ControlService::ReleaseRemote(grpc::ServerContext*,
                                           const v1::ReleaseRemoteRequest* req,
                                           v1::ReleaseRemoteReply*) {
  return WithSession(req->session(), [&] {
    return engine_.ReleaseHandle(req->session().session_id(), req->handle());
  });
}

grpc::Status ControlService::Serve(grpc::ServerContext*, const v1::ServeRequest* req,
                                   v1::ServeReply* rep) {
  return WithSession(req->session(), [&]() -> Status {
    MCDMA_ASSIGN_OR_RETURN(uint64_t id, engine_.Serve(req->session().session_id(), req->service()));
    rep->set_service_id(id);
    return Status::Ok();
  });
}

grpc::Status ControlService::Unserve(grpc::ServerContext*, const v1::UnserveRequest* req,
                                     v1::UnserveReply*) {
  return WithSession(req->session(), [&] {
    return engine_.Unserve(req->session().session_id(), req->service_id());
  });
}

grpc::Status ControlService::LookupService(grpc::ServerContext*,
                                           const v1::LookupServiceRequest* req,
                                           v1::LookupServiceReply* rep) {
  if (IsRemote(req->peer())) {
    grpc::Status check = WithSession(req->session(), [] { return Status::Ok(); });
    if (!check.ok()) return check;
    if (links_ == nullptr) {
      return ToGrpc(Status(Code::kNotFound, Reason::kNotLinked,
                           "peer '" + req->peer() +
                               "' is not linked to this daemon (peering is off: "
                               "no fabric_key)"));
    }
    auto id = links_->LookupService(req->session().session_id(), req->peer(), req->service());
    if (!id.ok()) return ToGrpc(id.status());
    rep->set_service_id(*id);
    return grpc::Status::OK;
  }
  return WithSession(req->session(), [&]() -> Status {
    MCDMA_ASSIGN_OR_RETURN(uint64_t id, engine_.LookupService(req->session().session_id(),
                                                              req->peer(), req->service()));
    rep->set_service_id(id);
    return Status::Ok();
  });
}

}  // namespace mcdma::daemon
