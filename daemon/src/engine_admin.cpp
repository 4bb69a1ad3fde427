// Snapshots for the Admin service (mcdmactl). Engine thread only.
#include <unistd.h>

#include "engine.hpp"

namespace mcdma::daemon {
namespace {
constexpr const char* kOpNames[] = {"nop", "call", "reply", "notify", "read", "write", "release"};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

void Engine::FillStatus(v1::StatusReply* out) const {
  out->set_version(MCDMA_VERSION_TEXT);
  out->set_host_id(options_.host_id);
  out->set_pid(static_cast<uint32_t>(getpid()));
  out->set_uptime_s(Seconds(Clock::now() - started_));
  out->set_state(draining_ ? "draining" : "serving");
  out->set_socket(options_.socket);
  out->set_sessions(static_cast<uint32_t>(sessions_.size()));
  uint64_t bytes = 0;
  for (const auto& [id, b] : buffers_) bytes += b->size();
  out->set_buffers(static_cast<uint32_t>(buffers_.size()));
  out->set_buffer_bytes(bytes);
  out->set_exports(static_cast<uint32_t>(exports_.size()));
  out->set_services(static_cast<uint32_t>(services_.size()));
  out->set_inflight(static_cast<uint32_t>(calls_.size() + transfers_.size()));
  for (size_t i = 0; i < op_stats_.size(); ++i) {
    auto* c = out->add_ops();
    c->set_op(kOpNames[i]);
    c->set_submitted(op_stats_[i].submitted);
    c->set_ok(op_stats_[i].ok);
    c->set_failed(op_stats_[i].failed);
    c->set_bytes(op_stats_[i].bytes);
  }
  out->set_invalid_descriptors(invalid_total_);
  uint64_t faults = ring_faults_closed_;
  for (const auto& [id, s] : sessions_) faults += s->counters.ring_faults;
  out->set_ring_faults(faults);
  out->set_sessions_reaped(sessions_reaped_);
  const driver::Caps& caps = device_->caps();
  auto* t = out->add_transports();
  t->set_name(caps.name);
  t->set_one_sided(caps.one_sided);
  t->set_max_outstanding(caps.max_outstanding);
  t->set_max_transfer_bytes(caps.max_transfer_bytes);
  t->set_max_registration_bytes(caps.max_registration_bytes);
  if (link_device_) {
    const driver::Caps& lc = link_device_->caps();
    auto* lt = out->add_transports();
    lt->set_name(lc.name);
    lt->set_one_sided(lc.one_sided);
    lt->set_max_outstanding(lc.max_outstanding);
    lt->set_max_transfer_bytes(lc.max_transfer_bytes);
    lt->set_max_registration_bytes(lc.max_registration_bytes);
  }
}

void Engine::FillSessions(v1::SessionsReply* out) const {
  auto now = Clock::now();
  for (const auto& [id, s] : sessions_) {
    auto* i = out->add_sessions();
    i->set_session_id(id);
    i->set_app_name(s->app_name);
    i->set_pid(s->pid);
    i->set_uid(s->uid);
    i->set_age_s(Seconds(now - s->created));
    i->set_mailbox_segment(s->segment().name());
    i->set_mailbox_linked(s->segment().linked());
    uint64_t bytes = 0;
    for (uint64_t bid : s->buffers) {
      if (auto b = buffers_.find(bid); b != buffers_.end()) bytes += b->second->size();
    }
    i->set_buffers(static_cast<uint32_t>(s->buffers.size()));
    i->set_buffer_bytes(bytes);
    i->set_exports(static_cast<uint32_t>(s->exports.size()));
    i->set_services(static_cast<uint32_t>(s->services.size()));
    i->set_remote_handles(static_cast<uint32_t>(s->handles.size()));
    i->set_inflight(s->inflight);
    i->set_submitted(s->counters.submitted);
    i->set_invalid_descriptors(s->counters.invalid);
    i->set_ring_faults(s->counters.ring_faults);
    i->set_backlog(static_cast<uint32_t>(s->backlog()));
  }
}

void Engine::FillExports(v1::ExportsReply* out) const {
  auto now = Clock::now();
  for (const auto& [name, e] : exports_) {
    auto* i = out->add_exports();
    i->set_export_id(e->id);
    i->set_name(name);
    i->set_owner_session(e->owner);
    i->set_buffer_id(e->buffer->id);
    i->set_offset(e->offset);
    i->set_length(e->length);
    i->set_allow_read(e->allow_read);
    i->set_allow_write(e->allow_write);
    for (const auto& p : e->allowed_peers) i->add_allowed_peers(p);
    i->set_expires_in_ms(
        e->expires
            ? std::chrono::duration_cast<std::chrono::milliseconds>(*e->expires - now).count()
            : -1);
    i->set_resolved_handles(e->handles);
  }
}

void Engine::FillBuffers(v1::BuffersReply* out) const {
  for (const auto& [id, b] : buffers_) {
    auto* i = out->add_buffers();
    i->set_buffer_id(id);
    i->set_owner_session(b->owner);
    i->set_size(b->size());
    i->set_segment(b->segment.name());
    i->set_segment_linked(b->segment.linked());
    i->set_registrations(static_cast<uint32_t>(b->local.pieces.size() + b->link.pieces.size()));
  }
}

}  // namespace mcdma::daemon
