// The Admin service's snapshots: the engine's plain structs
// (engine/snapshots.hpp) as admin.proto replies.
#include "service/admin_service.hpp"

#include "peer/peer_service.hpp"
#include "platform/process.hpp"
#include "platform/shm.hpp"

namespace mcdma::daemon {
namespace {
constexpr const char* kOpNames[] = {"nop", "call", "reply", "notify", "read", "write", "release"};
static_assert(std::size(kOpNames) == kOpCount, "a name for every shm::Op");

grpc::Status Stopping() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE: the daemon is stopping");
}

void ToListenerInfo(const std::string& name, const Listener& l, v1::ListenerInfo* out) {
  ListenerStats s = l.stats();
  out->set_name(name);
  out->set_open(s.open);
  out->set_max_connections(l.limits().max_connections);
  out->set_max_per_source(l.limits().max_per_source);
  out->set_accepted(s.accepted);
  out->set_refused_limit(s.refused_limit);
  out->set_refused_per_source(s.refused_per_source);
  out->set_shed_out_of_files(s.shed_out_of_files);
  out->set_accept_errors(s.accept_errors);
  out->set_busiest_source(s.busiest_source);
  out->set_busiest_source_open(s.busiest_source_open);
}
}  // namespace

grpc::Status AdminService::Status(grpc::ServerContext*, const v1::StatusRequest*,
                                  v1::StatusReply* out) {
  auto snap = engine_.Run([&] { return engine_.StatusNow(); });
  if (!snap) return Stopping();
  const StatusSnapshot& s = *snap;
  out->set_version(MCDMA_VERSION_TEXT);
  out->set_host_id(s.host_id);
  out->set_pid(s.pid);
  out->set_uptime_s(s.uptime_s);
  out->set_state(s.draining ? "draining" : "serving");
  out->set_socket(s.socket);
  out->set_sessions(s.sessions);
  out->set_buffers(s.buffers);
  out->set_buffer_bytes(s.buffer_bytes);
  out->set_exports(s.exports);
  out->set_services(s.services);
  out->set_inflight(s.inflight);
  for (size_t i = 0; i < s.ops.size(); ++i) {
    auto* c = out->add_ops();
    c->set_op(kOpNames[i]);
    c->set_submitted(s.ops[i].submitted);
    c->set_ok(s.ops[i].ok());
    c->set_failed(s.ops[i].failed());
    c->set_bytes(s.ops[i].bytes);
    for (size_t code = 0; code < s.ops[i].by_code.size(); ++code) {
      if (s.ops[i].by_code[code] == 0) continue;
      auto* row = c->add_by_code();
      row->set_code(CodeName(static_cast<Code>(code)));
      row->set_count(s.ops[i].by_code[code]);
    }
    const LatencyHistogram& h = s.ops[i].latency;
    v1::LatencyHistogram* lat = c->mutable_latency();
    for (double bound : kLatencyBounds) lat->add_bounds_s(bound);
    for (uint64_t n : h.counts) lat->add_counts(n);
    lat->set_sum_s(h.sum_s);
    lat->set_count(h.count);
  }
  out->set_invalid_descriptors(s.invalid_descriptors);
  out->set_ring_faults(s.ring_faults);
  out->set_sessions_reaped(s.sessions_reaped);
  out->set_segment_unlink_failures(s.segment_unlink_failures);
  for (const driver::Caps& caps : s.transports) {
    auto* t = out->add_transports();
    t->set_name(caps.name);
    t->set_one_sided(caps.one_sided);
    t->set_max_outstanding(caps.max_outstanding);
    t->set_max_transfer_bytes(caps.max_transfer_bytes);
    t->set_max_registration_bytes(caps.max_registration_bytes);
  }
  const Options& o = engine_.options();
  v1::Budgets* b = out->mutable_budgets();
  b->set_max_open_files(o.max_open_files);
  b->set_open_files(platform::OpenFileCount());
  if (control_listener_ != nullptr)
    ToListenerInfo("control", *control_listener_, b->add_listeners());
  if (peer_listener_ != nullptr) ToListenerInfo("peer", *peer_listener_, b->add_listeners());
  b->set_backlog_bytes(s.backlog_bytes);
  b->set_max_backlog_bytes(o.max_backlog_bytes);
  b->set_max_backlog_bytes_total(o.max_backlog_bytes_total);
  b->set_max_backlog(o.max_backlog);
  b->set_max_sessions(o.max_sessions);
  b->set_per_user_sessions(o.per_user_sessions);
  b->set_per_user_buffers(o.per_user_buffers);
  b->set_per_user_bytes(o.per_user_bytes);
  for (const auto& [uid, u] : s.users) {
    auto* row = b->add_users();
    row->set_uid(uid);
    row->set_sessions(u.sessions);
    row->set_buffers(u.buffers);
    row->set_bytes(u.bytes);
  }
  b->set_shm_capacity(platform::SharedMemoryCapacity());
  b->set_shm_free(platform::SharedMemoryFree());
  if (peer_service_ != nullptr) {
    AuthFigures a = peer_service_->auth_figures();
    b->set_auth_in_progress(a.in_progress);
    b->set_auth_refused(a.refused);
    b->set_auth_timed_out(a.timed_out);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::Sessions(grpc::ServerContext*, const v1::SessionsRequest*,
                                    v1::SessionsReply* out) {
  auto snaps = engine_.Run([&] { return engine_.SessionsNow(); });
  if (!snaps) return Stopping();
  for (const SessionSnapshot& s : *snaps) {
    auto* i = out->add_sessions();
    i->set_session_id(s.session_id);
    i->set_app_name(s.app_name);
    i->set_pid(s.pid);
    i->set_uid(s.uid);
    i->set_age_s(s.age_s);
    i->set_mailbox_segment(s.mailbox_segment);
    i->set_mailbox_linked(s.mailbox_linked);
    i->set_buffers(s.buffers);
    i->set_buffer_bytes(s.buffer_bytes);
    i->set_exports(s.exports);
    i->set_services(s.services);
    i->set_remote_handles(s.remote_handles);
    i->set_inflight(s.inflight);
    i->set_submitted(s.submitted);
    i->set_invalid_descriptors(s.invalid_descriptors);
    i->set_ring_faults(s.ring_faults);
    i->set_backlog(s.backlog);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::Exports(grpc::ServerContext*, const v1::ExportsRequest*,
                                   v1::ExportsReply* out) {
  auto snaps = engine_.Run([&] { return engine_.ExportsNow(); });
  if (!snaps) return Stopping();
  for (const ExportSnapshot& e : *snaps) {
    auto* i = out->add_exports();
    i->set_export_id(e.export_id);
    i->set_name(e.name);
    i->set_owner_session(e.owner_session);
    i->set_buffer_id(e.buffer_id);
    i->set_offset(e.offset);
    i->set_length(e.length);
    i->set_allow_read(e.allow_read);
    i->set_allow_write(e.allow_write);
    for (const auto& p : e.allowed_peers) i->add_allowed_peers(p);
    i->set_expires_in_ms(e.expires_in_ms);
    i->set_resolved_handles(e.resolved_handles);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::Buffers(grpc::ServerContext*, const v1::BuffersRequest*,
                                   v1::BuffersReply* out) {
  auto snaps = engine_.Run([&] { return engine_.BuffersNow(); });
  if (!snaps) return Stopping();
  for (const BufferSnapshot& b : *snaps) {
    auto* i = out->add_buffers();
    i->set_buffer_id(b.buffer_id);
    i->set_owner_session(b.owner_session);
    i->set_size(b.size);
    i->set_segment(b.segment);
    i->set_segment_linked(b.segment_linked);
    i->set_registrations(b.registrations);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::Trace(grpc::ServerContext*, const v1::TraceRequest* req,
                                 v1::TraceReply* out) {
  auto snap = engine_.Run([&] {
    uint64_t recorded = engine_.traces_recorded();
    return std::make_pair(engine_.TraceNow(req->session(), req->max(), req->clear()), recorded);
  });
  if (!snap) return Stopping();
  for (const TraceRecord& r : snap->first) {
    auto* c = out->add_calls();
    c->set_session(r.session);
    c->set_peer(r.peer);
    c->set_transport(r.transport);
    c->set_request_bytes(r.request_bytes);
    c->set_reply_bytes(r.reply_bytes);
    c->set_code(std::string(CodeName(r.code)));
    c->set_submit_ns(r.submit_ns);
    c->set_pickup_ns(r.pickup_ns);
    c->set_posted_ns(r.posted_ns);
    c->set_reply_ns(r.reply_ns);
    c->set_completed_ns(r.completed_ns);
    c->set_remote_timed(r.remote_timed);
    c->set_remote_ns(r.remote_ns);
    c->set_remote_app_ns(r.remote_app_ns);
  }
  out->set_recorded(snap->second);
  out->set_capacity(static_cast<uint32_t>(TraceLog::kCapacity));
  return grpc::Status::OK;
}

}  // namespace mcdma::daemon
