// Snapshots for the Admin service (mcdmactl). Engine thread only.
#include <unistd.h>

#include "engine/engine.hpp"

namespace mcdma::daemon {
namespace {
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

StatusSnapshot Engine::StatusNow() const {
  StatusSnapshot out;
  out.host_id = options_.host_id;
  out.pid = static_cast<uint32_t>(getpid());
  out.uptime_s = Seconds(Clock::now() - started_);
  out.draining = draining_;
  out.socket = options_.socket;
  out.sessions = static_cast<uint32_t>(sessions_.size());
  for (const auto& [id, b] : registry_.buffers()) out.buffer_bytes += b->size();
  out.buffers = static_cast<uint32_t>(registry_.buffers().size());
  out.exports = static_cast<uint32_t>(registry_.exports().size());
  out.services = static_cast<uint32_t>(registry_.services());
  out.inflight = static_cast<uint32_t>(calls_.size() + transfers_.size());
  out.ops = op_stats_;
  out.invalid_descriptors = invalid_total_;
  out.ring_faults = sessions_.ring_faults();
  out.sessions_reaped = sessions_.reaped();
  out.segment_unlink_failures = segment_unlink_failures_;
  out.transports.push_back(device(Transport::kLoop)->caps());
  if (const driver::Device* link_device = device(Transport::kTcp))
    out.transports.push_back(link_device->caps());
  out.backlog_bytes = backlog_held_;
  out.users.assign(users_.users().begin(), users_.users().end());
  return out;
}

std::vector<SessionSnapshot> Engine::SessionsNow() const {
  auto now = Clock::now();
  std::vector<SessionSnapshot> out;
  for (const auto& [id, s] : sessions_) {
    SessionSnapshot i;
    i.session_id = id;
    i.app_name = s->app_name;
    i.pid = s->pid;
    i.uid = s->uid;
    i.age_s = Seconds(now - s->created);
    i.mailbox_segment = s->segment().name();
    i.mailbox_linked = s->segment().linked();
    for (uint64_t bid : s->buffers) {
      if (auto b = registry_.OwnedBuffer(bid, id)) i.buffer_bytes += b->size();
    }
    i.buffers = static_cast<uint32_t>(s->buffers.size());
    i.exports = static_cast<uint32_t>(s->exports.size());
    i.services = static_cast<uint32_t>(s->services.size());
    i.remote_handles = static_cast<uint32_t>(s->handles.size());
    i.inflight = s->inflight;
    i.submitted = s->counters.submitted;
    i.invalid_descriptors = s->counters.invalid;
    i.ring_faults = s->counters.ring_faults;
    i.backlog = static_cast<uint32_t>(s->backlog());
    out.push_back(std::move(i));
  }
  return out;
}

std::vector<ExportSnapshot> Engine::ExportsNow() const {
  auto now = Clock::now();
  std::vector<ExportSnapshot> out;
  for (const auto& [name, e] : registry_.exports()) {
    ExportSnapshot i;
    i.export_id = e->id;
    i.name = name;
    i.owner_session = e->owner;
    i.buffer_id = e->buffer->id;
    i.offset = e->offset;
    i.length = e->length;
    i.allow_read = e->allow_read;
    i.allow_write = e->allow_write;
    i.allowed_peers = e->allowed_peers;
    i.expires_in_ms =
        e->expires
            ? std::chrono::duration_cast<std::chrono::milliseconds>(*e->expires - now).count()
            : -1;
    i.resolved_handles = e->handles;
    out.push_back(std::move(i));
  }
  return out;
}

std::vector<BufferSnapshot> Engine::BuffersNow() const {
  std::vector<BufferSnapshot> out;
  for (const auto& [id, b] : registry_.buffers()) {
    out.push_back(BufferSnapshot{id, b->owner, b->size(), b->segment.name(), b->segment.linked(),
                                 static_cast<uint32_t>(b->reg(Transport::kLoop).pieces.size() +
                                                       b->reg(Transport::kTcp).pieces.size())});
  }
  return out;
}

}  // namespace mcdma::daemon
