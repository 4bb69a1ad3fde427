// The control plane of libmcdma: gRPC calls for buffers, exports, handles.
#include "client_core.hpp"

namespace mcdma::internal {

v1::SessionRef ClientCore::Ref() const {
  v1::SessionRef r;
  r.set_session_id(info_.session_id);
  r.set_token(token_);
  return r;
}

grpc::ClientContext* ClientCore::NewContext(grpc::ClientContext& ctx) const {
  ctx.set_deadline(std::chrono::system_clock::now() + options_.connect_timeout);
  return &ctx;
}

Status ClientCore::MarkMapped(const std::string& segment) {
  v1::SessionRequest req;
  req.mutable_mapped()->set_segment(segment);
  MutexLock lock(stream_write_mu_);
  if (!stream_->Write(req)) return Status(Code::kUnavailable, "the session stream is closed");
  return Status::Ok();
}

BufferState::~BufferState() {
  if (auto c = core.lock(); c && !c->closed()) (void)c->FreeBuffer(id);
}

Result<Buffer> ClientCore::Alloc(uint64_t size) {
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  v1::AllocRequest req;
  *req.mutable_session() = Ref();
  req.set_size(size);
  v1::AllocReply rep;
  grpc::ClientContext ctx;
  MCDMA_RETURN_IF_ERROR(FromGrpc(stub_->Alloc(NewContext(ctx), req, &rep)));
  auto state = std::make_shared<BufferState>();
  state->id = rep.buffer_id();
  auto seg = ShmSegment::Open(rep.segment(), rep.size());
  if (!seg.ok()) {
    (void)FreeBuffer(rep.buffer_id());
    return seg.status();
  }
  state->segment = std::move(seg).value();
  (void)MarkMapped(rep.segment());
  state->core = weak_from_this();
  Buffer b;
  b.state_ = std::move(state);
  return b;
}

Status ClientCore::FreeBuffer(uint64_t id) {
  v1::FreeRequest req;
  *req.mutable_session() = Ref();
  req.set_buffer_id(id);
  v1::FreeReply rep;
  grpc::ClientContext ctx;
  return FromGrpc(stub_->Free(NewContext(ctx), req, &rep));
}

Status ClientCore::Export(const Buffer& b, std::string_view name, const ExportOptions& o) {
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  if (!b.valid()) return Status(Code::kInvalid, "export of an empty Buffer");
  v1::ExportRequest req;
  *req.mutable_session() = Ref();
  req.set_name(std::string(name));
  req.set_buffer_id(b.id());
  req.set_offset(o.offset);
  req.set_length(o.length);
  req.set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, o.ttl.count())));
  req.set_allow_read(o.allow_read);
  req.set_allow_write(o.allow_write);
  for (const auto& p : o.allowed_peers) req.add_allowed_peers(p);
  v1::ExportReply rep;
  grpc::ClientContext ctx;
  return FromGrpc(stub_->Export(NewContext(ctx), req, &rep));
}

Status ClientCore::Unexport(std::string_view name) {
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  v1::UnexportRequest req;
  *req.mutable_session() = Ref();
  req.set_name(std::string(name));
  v1::UnexportReply rep;
  grpc::ClientContext ctx;
  return FromGrpc(stub_->Unexport(NewContext(ctx), req, &rep));
}

Result<RemoteBuffer> ClientCore::Resolve(std::string_view name, std::string_view peer) {
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  v1::ResolveRequest req;
  *req.mutable_session() = Ref();
  req.set_name(std::string(name));
  req.set_peer(std::string(peer));
  v1::ResolveReply rep;
  grpc::ClientContext ctx;
  MCDMA_RETURN_IF_ERROR(FromGrpc(stub_->Resolve(NewContext(ctx), req, &rep)));
  RemoteBuffer r;
  r.handle = rep.handle();
  r.length = rep.length();
  r.readable = rep.allow_read();
  r.writable = rep.allow_write();
  r.peer = std::string(peer);
  r.name = std::string(name);
  return r;
}

Status ClientCore::Release(const RemoteBuffer& r) {
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  v1::ReleaseRemoteRequest req;
  *req.mutable_session() = Ref();
  req.set_handle(r.handle);
  v1::ReleaseRemoteReply rep;
  grpc::ClientContext ctx;
  return FromGrpc(stub_->ReleaseRemote(NewContext(ctx), req, &rep));
}

}  // namespace mcdma::internal
