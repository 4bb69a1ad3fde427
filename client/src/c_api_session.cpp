// The C ABI: connecting (mcdma_connect, mcdma_connect_ex), closing and the
// session info.
#include <new>

#include "c_api_internal.hpp"
#include "client_core.hpp"

namespace {
using mcdma::capi::Bad;
using mcdma::capi::Fail;
using mcdma::capi::Guard;
using mcdma::capi::ReadConnectOptions;

mcdma::ClientOptions ToClientOptions(const mcdma_connect_options& o) {
  mcdma::ClientOptions c;
  if (o.socket != nullptr) c.socket = o.socket;
  if (o.app_name != nullptr) c.app_name = o.app_name;
  c.submission_entries = o.submission_entries;
  c.completion_entries = o.completion_entries;
  c.inbox_entries = o.inbox_entries;
  c.arena_bytes = o.arena_bytes;
  c.handler_threads = static_cast<int>(o.handler_threads);
  c.spin_budget = std::chrono::microseconds(o.spin_budget_us);
  if (o.default_timeout_ms != 0)
    c.default_timeout = std::chrono::milliseconds(o.default_timeout_ms);
  if (o.connect_timeout_ms != 0)
    c.connect_timeout = std::chrono::milliseconds(o.connect_timeout_ms);
  return c;
}

mcdma_code Open(const mcdma::ClientOptions& options, mcdma_client** out) {
  auto r = mcdma::Client::Connect(options);
  if (!r.ok()) return Fail(r.status());
  auto handle = std::make_unique<mcdma_client>();
  handle->client = std::move(r).value();
  mcdma::internal::ClientCore* core = handle->client->core();
  handle->info = core->info();
  handle->app_name = core->options().app_name;  // the name the daemon was sent
  // The geometry the daemon wrote into the mailbox header before the
  // library mapped it; fixed for the session (mailbox_layout.hpp).
  const auto* header =
      reinterpret_cast<const mcdma::shm::MailboxHeader*>(core->mailbox_for_testing().data());
  handle->geometry.submission_entries = header->sq_entries;
  handle->geometry.completion_entries = header->cq_entries;
  handle->geometry.inbox_entries = header->inbox_entries;
  handle->geometry.app_arena_bytes = header->app_arena_bytes;
  handle->geometry.daemon_arena_bytes = header->daemon_arena_bytes;
  handle->geometry.mailbox_bytes = header->total_bytes;
  *out = handle.release();
  return MCDMA_OK;
}
}  // namespace

extern "C" {

mcdma_code mcdma_connect(const char* socket, const char* app_name, mcdma_client** out) {
  if (out == nullptr) return Bad("mcdma_connect: out is NULL");
  return Guard([&] {
    mcdma::ClientOptions o;
    if (socket != nullptr) o.socket = socket;
    if (app_name != nullptr) o.app_name = app_name;
    return Open(o, out);
  });
}

mcdma_code mcdma_connect_ex(const mcdma_connect_options* options, mcdma_client** out) {
  if (out == nullptr) return Bad("mcdma_connect_ex: out is NULL");
  return Guard([&] {
    mcdma_connect_options o;
    mcdma_code c = ReadConnectOptions("mcdma_connect_ex", options, &o);
    if (c != MCDMA_OK) return c;
    return Open(ToClientOptions(o), out);
  });
}

void mcdma_close(mcdma_client* client) { delete client; }

mcdma_code mcdma_session_info_get(const mcdma_client* client, mcdma_session_info* info) {
  if (client == nullptr) return Bad("mcdma_session_info_get: client is NULL");
  return Guard([&] {
    mcdma_session_info full = client->geometry;
    full.struct_size = sizeof(full);
    full.session_id = client->info.session_id;
    full.app_name = client->app_name.c_str();
    full.host_id = client->info.host_id.c_str();
    full.daemon_version = client->info.daemon_version.c_str();
    full.socket = client->info.socket.c_str();
    return mcdma::capi::WriteSessionInfo("mcdma_session_info_get", full, info);
  });
}

}  // extern "C"
