// The C ABI (mcdma.h): converts handles and Status at the boundary; no
// exception crosses it (allocation failure is reported as MCDMA_NO_MEMORY).
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "mcdma/client.hpp"
#include "mcdma/mcdma.h"

struct mcdma_client {
  std::unique_ptr<mcdma::Client> client;
};
struct mcdma_buffer {
  mcdma::Buffer buffer;
  mcdma_client* owner;
};
struct mcdma_remote {
  mcdma::RemoteBuffer remote;
  mcdma_client* owner;
};
struct mcdma_call {
  mcdma::ServerCall* call;
};

namespace {
thread_local std::string t_last_error;

mcdma_code Fail(const mcdma::Status& st) {
  t_last_error = st.ToString();
  return static_cast<mcdma_code>(st.code());
}

mcdma_code Check(const mcdma::Status& st) { return st.ok() ? MCDMA_OK : Fail(st); }

mcdma_code Bad(const char* what) { return Fail(mcdma::Status(mcdma::Code::kInvalid, what)); }

std::chrono::milliseconds Ms(uint32_t v) { return std::chrono::milliseconds(v); }

template <typename F>
mcdma_code Guard(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Fail(mcdma::Status(mcdma::Code::kNoMemory, "out of memory"));
  } catch (const std::exception& e) {
    return Fail(mcdma::Status(mcdma::Code::kInternal, e.what()));
  }
}

std::span<const std::byte> Bytes(const void* p, size_t n) {
  return {static_cast<const std::byte*>(p), n};
}
}  // namespace

extern "C" {

const char* mcdma_code_name(mcdma_code code) {
  return mcdma::CodeName(static_cast<mcdma::Code>(code));
}
const char* mcdma_last_error(void) { return t_last_error.c_str(); }

mcdma_code mcdma_connect(const char* socket, const char* app_name, mcdma_client** out) {
  if (out == nullptr) return Bad("mcdma_connect: out is NULL");
  return Guard([&] {
    mcdma::ClientOptions o;
    if (socket != nullptr) o.socket = socket;
    if (app_name != nullptr) o.app_name = app_name;
    auto r = mcdma::Client::Connect(o);
    if (!r.ok()) return Fail(r.status());
    *out = new mcdma_client{std::move(r).value()};
    return MCDMA_OK;
  });
}

void mcdma_close(mcdma_client* client) { delete client; }

mcdma_code mcdma_call_service(mcdma_client* client, const char* service, const void* request,
                              size_t request_len, uint32_t timeout_ms, void** reply,
                              size_t* reply_len) {
  if (client == nullptr || service == nullptr || reply == nullptr || reply_len == nullptr) {
    return Bad("mcdma_call_service: NULL argument");
  }
  if (request == nullptr && request_len != 0) return Bad("mcdma_call_service: request is NULL");
  return Guard([&] {
    auto r = client->client->Call(service, Bytes(request, request_len), Ms(timeout_ms));
    if (!r.ok()) return Fail(r.status());
    *reply_len = r->size();
    *reply = std::malloc(r->size() == 0 ? 1 : r->size());
    if (*reply == nullptr)
      return Fail(mcdma::Status(mcdma::Code::kNoMemory, "malloc of the reply failed"));
    if (r->size() > 0) std::memcpy(*reply, r->data(), r->size());
    return MCDMA_OK;
  });
}

void mcdma_free_reply(void* reply) { std::free(reply); }

mcdma_code mcdma_call_async(mcdma_client* client, const char* service, const void* request,
                            size_t request_len, uint32_t timeout_ms, mcdma_call_done done,
                            void* user) {
  if (client == nullptr || service == nullptr || done == nullptr)
    return Bad("mcdma_call_async: NULL argument");
  if (request == nullptr && request_len != 0) return Bad("mcdma_call_async: request is NULL");
  return Guard([&] {
    auto f = client->client->CallAsync(service, Bytes(request, request_len), Ms(timeout_ms));
    f.Then([done, user](mcdma::Result<mcdma::Message> r) {
      if (r.ok()) {
        done(user, MCDMA_OK, r->data(), r->size());
      } else {
        t_last_error = r.status().ToString();
        done(user, static_cast<mcdma_code>(r.status().code()), nullptr, 0);
      }
    });
    return MCDMA_OK;
  });
}

mcdma_code mcdma_notify(mcdma_client* client, const char* service, const void* message, size_t len,
                        uint32_t timeout_ms) {
  if (client == nullptr || service == nullptr || (message == nullptr && len != 0))
    return Bad("mcdma_notify: NULL argument");
  return Guard(
      [&] { return Check(client->client->Notify(service, Bytes(message, len), Ms(timeout_ms))); });
}

mcdma_code mcdma_serve(mcdma_client* client, const char* service, mcdma_handler handler, void* user,
                       uint64_t* service_id) {
  if (client == nullptr || service == nullptr || handler == nullptr)
    return Bad("mcdma_serve: NULL argument");
  return Guard([&] {
    auto r = client->client->Serve(service, [handler, user](mcdma::ServerCall& call) {
      mcdma_call c{&call};
      handler(user, &c);
    });
    if (!r.ok()) return Fail(r.status());
    if (service_id != nullptr) *service_id = *r;
    return MCDMA_OK;
  });
}

mcdma_code mcdma_unserve(mcdma_client* client, uint64_t service_id) {
  if (client == nullptr) return Bad("mcdma_unserve: NULL client");
  return Guard([&] { return Check(client->client->Unserve(service_id)); });
}

const void* mcdma_call_payload(const mcdma_call* call, size_t* len) {
  if (call == nullptr) return nullptr;
  if (len != nullptr) *len = call->call->payload().size();
  return call->call->payload().data();
}

int mcdma_call_one_way(const mcdma_call* call) {
  return call != nullptr && call->call->one_way() ? 1 : 0;
}

mcdma_code mcdma_reply(mcdma_call* call, const void* reply, size_t len) {
  if (call == nullptr || (reply == nullptr && len != 0)) return Bad("mcdma_reply: NULL argument");
  return Guard([&] { return Check(call->call->Reply(Bytes(reply, len))); });
}

mcdma_code mcdma_reply_error(mcdma_call* call, mcdma_code code, const char* message) {
  if (call == nullptr) return Bad("mcdma_reply_error: NULL call");
  return Guard([&] {
    return Check(call->call->ReplyError(
        mcdma::Status(static_cast<mcdma::Code>(code), message ? message : "")));
  });
}

mcdma_code mcdma_alloc(mcdma_client* client, uint64_t size, mcdma_buffer** out) {
  if (client == nullptr || out == nullptr) return Bad("mcdma_alloc: NULL argument");
  return Guard([&] {
    auto r = client->client->Alloc(size);
    if (!r.ok()) return Fail(r.status());
    *out = new mcdma_buffer{std::move(r).value(), client};
    return MCDMA_OK;
  });
}

void* mcdma_buffer_data(const mcdma_buffer* buffer) {
  return buffer ? buffer->buffer.data() : nullptr;
}
uint64_t mcdma_buffer_size(const mcdma_buffer* buffer) {
  return buffer ? buffer->buffer.size() : 0;
}
void mcdma_buffer_free(mcdma_buffer* buffer) { delete buffer; }

mcdma_code mcdma_export(mcdma_client* client, const mcdma_buffer* buffer, const char* name,
                        uint64_t offset, uint64_t length, uint64_t ttl_ms, uint32_t flags) {
  if (client == nullptr || buffer == nullptr || name == nullptr)
    return Bad("mcdma_export: NULL argument");
  if ((flags & ~(MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE)) != 0)
    return Bad("mcdma_export: unknown flags");
  return Guard([&] {
    mcdma::ExportOptions o;
    o.offset = offset;
    o.length = length;
    o.ttl = std::chrono::milliseconds(ttl_ms);
    o.allow_read = (flags & MCDMA_EXPORT_READ) != 0;
    o.allow_write = (flags & MCDMA_EXPORT_WRITE) != 0;
    return Check(client->client->Export(buffer->buffer, name, o));
  });
}

mcdma_code mcdma_unexport(mcdma_client* client, const char* name) {
  if (client == nullptr || name == nullptr) return Bad("mcdma_unexport: NULL argument");
  return Guard([&] { return Check(client->client->Unexport(name)); });
}

mcdma_code mcdma_resolve(mcdma_client* client, const char* peer, const char* name,
                         mcdma_remote** out) {
  if (client == nullptr || name == nullptr || out == nullptr)
    return Bad("mcdma_resolve: NULL argument");
  return Guard([&] {
    auto r = client->client->Resolve(name, peer ? peer : "");
    if (!r.ok()) return Fail(r.status());
    *out = new mcdma_remote{std::move(r).value(), client};
    return MCDMA_OK;
  });
}

uint64_t mcdma_remote_length(const mcdma_remote* remote) {
  return remote ? remote->remote.length : 0;
}

void mcdma_remote_free(mcdma_remote* remote) {
  if (remote == nullptr) return;
  (void)remote->owner->client->Release(remote->remote);
  delete remote;
}

mcdma_code mcdma_write(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                       const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                       uint32_t timeout_ms, uint64_t* moved) {
  if (client == nullptr || remote == nullptr || local == nullptr)
    return Bad("mcdma_write: NULL argument");
  return Guard([&] {
    auto r = client->client->Write(remote->remote, remote_offset, local->buffer, local_offset,
                                   length, Ms(timeout_ms));
    if (!r.ok()) return Fail(r.status());
    if (moved != nullptr) *moved = *r;
    return MCDMA_OK;
  });
}

mcdma_code mcdma_read(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                      const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                      uint32_t timeout_ms, uint64_t* moved) {
  if (client == nullptr || remote == nullptr || local == nullptr)
    return Bad("mcdma_read: NULL argument");
  return Guard([&] {
    auto r = client->client->Read(remote->remote, remote_offset, local->buffer, local_offset,
                                  length, Ms(timeout_ms));
    if (!r.ok()) return Fail(r.status());
    if (moved != nullptr) *moved = *r;
    return MCDMA_OK;
  });
}

}  // extern "C"
