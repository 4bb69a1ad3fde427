// The C ABI: request/reply, notifications and serving.
#include <cstdlib>
#include <cstring>

#include "c_api_internal.hpp"

namespace {
using mcdma::capi::Bad;
using mcdma::capi::Bytes;
using mcdma::capi::Check;
using mcdma::capi::Fail;
using mcdma::capi::Guard;
using mcdma::capi::Ms;
}  // namespace

extern "C" {

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
        done(user, Fail(r.status()), nullptr, 0);
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

uint64_t mcdma_call_service_id(const mcdma_call* call) {
  return call != nullptr ? call->call->service_id() : 0;
}

uint64_t mcdma_call_time_left_us(const mcdma_call* call) {
  if (call == nullptr) return 0;
  auto left = call->call->time_left().count();
  return left > 0 ? static_cast<uint64_t>(left) : 0;
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

}  // extern "C"
