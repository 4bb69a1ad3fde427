#include "raw_session.hpp"

#include <unistd.h>

#include <cstring>
#include <thread>

#include "client_core.hpp"  // internal::FromGrpc
#include "mcdma_internal/wait.hpp"

namespace mcdma::itest {

std::unique_ptr<RawSession> RawSession::Open(const std::string& socket, std::string* error) {
  std::unique_ptr<RawSession> s(new RawSession());
  s->channel_ = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  if (!s->channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    *error = "cannot connect to " + socket;
    return nullptr;
  }
  s->stub_ = v1::Control::NewStub(s->channel_);
  s->stream_ = s->stub_->OpenSession(&s->stream_ctx_);
  v1::SessionRequest hello;
  auto* h = hello.mutable_hello();
  h->set_protocol_version(shm::kProtocolVersion);
  h->set_app_name("raw-session");
  h->set_pid(static_cast<uint32_t>(getpid()));
  h->set_uid(static_cast<uint32_t>(geteuid()));
  v1::SessionEvent ev;
  if (!s->stream_->Write(hello) || !s->stream_->Read(&ev) || !ev.has_opened()) {
    *error = "OpenSession: no SessionOpened: " + s->stream_->Finish().error_message();
    s->stream_.reset();
    return nullptr;
  }
  const v1::SessionOpened& o = ev.opened();
  s->session_id_ = o.session_id();
  s->token_ = o.token();
  auto seg = ShmSegment::Open(o.mailbox_segment(), o.mailbox_bytes());
  if (!seg.ok()) {
    *error = "map mailbox: " + seg.status().ToString();
    return nullptr;
  }
  s->mailbox_ = std::move(seg).value();
  v1::SessionRequest mapped;
  mapped.mutable_mapped()->set_segment(o.mailbox_segment());
  s->stream_->Write(mapped);
  s->header_ = reinterpret_cast<shm::MailboxHeader*>(s->mailbox_.data());
  s->geo_ = shm::MailboxGeometry{s->header_->sq_entries, s->header_->cq_entries,
                                 s->header_->inbox_entries, s->header_->app_arena_bytes,
                                 s->header_->daemon_arena_bytes};
  if (s->header_->magic != shm::kMailboxMagic || !s->geo_.Valid() ||
      s->geo_.total_bytes() > s->mailbox_.size()) {
    *error = "the mailbox header does not match the layout";
    return nullptr;
  }
  s->sq_ = reinterpret_cast<shm::SubmitDesc*>(s->mailbox_.data() + s->geo_.sq_offset());
  s->cq_ = reinterpret_cast<shm::EventDesc*>(s->mailbox_.data() + s->geo_.cq_offset());
  s->arena_ = s->mailbox_.data() + s->geo_.arena_offset();
  s->sq_tail_ = s->header_->sq_tail.value.load();
  s->cq_head_ = s->header_->cq_head.value.load();
  return s;
}

RawSession::~RawSession() {
  if (stream_) {
    stream_ctx_.TryCancel();
    (void)stream_->Finish();
  }
}

uint64_t RawSession::Submit(shm::SubmitDesc d) {
  if (d.tag == 0) d.tag = next_tag_++;
  std::memcpy(&sq_[sq_tail_ & (geo_.sq_entries - 1)], &d, sizeof(d));
  ++sq_tail_;
  header_->sq_tail.value.store(sq_tail_, std::memory_order_release);
  wait::Ring(header_->daemon_bell, /*shared=*/true);
  return d.tag;
}

void RawSession::PublishTail(uint32_t tail) {
  sq_tail_ = tail;
  header_->sq_tail.value.store(tail, std::memory_order_release);
  wait::Ring(header_->daemon_bell, /*shared=*/true);
}

std::optional<RawSession::Event> RawSession::NextEvent(Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (header_->cq_tail.value.load(std::memory_order_acquire) == cq_head_) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(Millis(1));
  }
  Event e;
  std::memcpy(&e.desc, &cq_[cq_head_ & (geo_.cq_entries - 1)], sizeof(e.desc));
  ++cq_head_;
  header_->cq_head.value.store(cq_head_, std::memory_order_release);
  if (e.desc.payload_len > 0) {
    uint64_t end = uint64_t{e.desc.payload_off} + e.desc.payload_len;
    if (e.desc.payload_off >= geo_.app_arena_bytes &&
        end <= geo_.app_arena_bytes + geo_.daemon_arena_bytes) {
      e.payload.assign(reinterpret_cast<const char*>(arena_ + e.desc.payload_off),
                       e.desc.payload_len);
      shm::SubmitDesc rel{};
      rel.opcode = static_cast<uint8_t>(shm::Op::kRelease);
      rel.flags = shm::kFlagNoCompletion;
      rel.payload_off = e.desc.payload_off;
      rel.payload_len = e.desc.payload_len;
      Submit(rel);
    } else {
      e.payload = "<payload outside the daemon half>";
    }
  }
  return e;
}

size_t RawSession::PendingEvents() const {
  return header_->cq_tail.value.load(std::memory_order_acquire) - cq_head_;
}

std::optional<RawSession::Event> RawSession::Call(uint64_t service_id, std::string_view request,
                                                  Millis timeout) {
  std::memcpy(arena_, request.data(), request.size());
  shm::SubmitDesc d{};
  d.opcode = static_cast<uint8_t>(shm::Op::kCall);
  d.target = service_id;
  d.payload_off = 0;
  d.payload_len = static_cast<uint32_t>(request.size());
  uint64_t tag = Submit(d);
  auto e = NextEvent(timeout);
  if (e && e->desc.tag != tag) return std::nullopt;
  return e;
}

v1::SessionRef RawSession::Ref() const {
  v1::SessionRef r;
  r.set_session_id(session_id_);
  r.set_token(token_);
  return r;
}

grpc::ClientContext* RawSession::Deadline(grpc::ClientContext& ctx) const {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return &ctx;
}

Result<uint64_t> RawSession::LookupService(const std::string& name) {
  v1::LookupServiceRequest req;
  *req.mutable_session() = Ref();
  req.set_service(name);
  v1::LookupServiceReply rep;
  grpc::ClientContext ctx;
  Status st = internal::FromGrpc(stub_->LookupService(Deadline(ctx), req, &rep));
  if (!st.ok()) return st;
  return rep.service_id();
}

Result<v1::ResolveReply> RawSession::Resolve(const std::string& name) {
  v1::ResolveRequest req;
  *req.mutable_session() = Ref();
  req.set_name(name);
  v1::ResolveReply rep;
  grpc::ClientContext ctx;
  Status st = internal::FromGrpc(stub_->Resolve(Deadline(ctx), req, &rep));
  if (!st.ok()) return st;
  return rep;
}

Result<RawSession::Buffer> RawSession::Alloc(uint64_t size) {
  v1::AllocRequest req;
  *req.mutable_session() = Ref();
  req.set_size(size);
  v1::AllocReply rep;
  grpc::ClientContext ctx;
  Status st = internal::FromGrpc(stub_->Alloc(Deadline(ctx), req, &rep));
  if (!st.ok()) return st;
  auto seg = ShmSegment::Open(rep.segment(), rep.size());
  if (!seg.ok()) return seg.status();
  v1::SessionRequest mapped;
  mapped.mutable_mapped()->set_segment(rep.segment());
  stream_->Write(mapped);
  Buffer b;
  b.id = rep.buffer_id();
  b.segment = std::move(seg).value();
  return b;
}

Result<std::string> RawSession::AllocUnmapped(uint64_t size) {
  v1::AllocRequest req;
  *req.mutable_session() = Ref();
  req.set_size(size);
  v1::AllocReply rep;
  grpc::ClientContext ctx;
  Status st = internal::FromGrpc(stub_->Alloc(Deadline(ctx), req, &rep));
  if (!st.ok()) return st;
  return rep.segment();
}

Status RawSession::Export(uint64_t buffer_id, const std::string& name) {
  v1::ExportRequest req;
  *req.mutable_session() = Ref();
  req.set_name(name);
  req.set_buffer_id(buffer_id);
  req.set_allow_read(true);
  v1::ExportReply rep;
  grpc::ClientContext ctx;
  return internal::FromGrpc(stub_->Export(Deadline(ctx), req, &rep));
}

}  // namespace mcdma::itest
