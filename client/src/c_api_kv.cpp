// The C ABI of the KV-cache hand-off (mcdma.h, "the KV-cache hand-off"):
// thin handles over mcdma::kv (mcdma/kv.hpp).
#include <string>
#include <vector>

#include "c_api_internal.hpp"
#include "mcdma/kv.hpp"

struct mcdma_kv_export {
  std::unique_ptr<mcdma::kv::Export> exp;
};
struct mcdma_kv_import {
  std::unique_ptr<mcdma::kv::Import> imp;
  mcdma_client* owner;
};
struct mcdma_kv_pool {
  std::unique_ptr<mcdma::kv::BufferPool> pool;
  mcdma_client* owner;
};

namespace {
using mcdma::capi::Bad;
using mcdma::capi::Check;
using mcdma::capi::Fail;
using mcdma::capi::Guard;
using mcdma::capi::Ms;

// The hand-off's buffers must be the client's own.
mcdma_code Buffers(const char* fn, const mcdma_client* client, mcdma_buffer* const* in, uint32_t n,
                   std::vector<mcdma::Buffer>* out) {
  for (uint32_t i = 0; i < n; ++i) {
    if (in[i] == nullptr)
      return Bad(std::string(fn) + ": buffer " + std::to_string(i) + " is NULL");
    if (in[i]->owner != client) {
      return Bad(std::string(fn) + ": buffer " + std::to_string(i) + " belongs to another client");
    }
    out->push_back(in[i]->buffer);
  }
  return MCDMA_OK;
}

}  // namespace

extern "C" {

mcdma_code mcdma_kv_export_create(mcdma_client* client, const char* handoff_id,
                                  mcdma_buffer* const* layers, uint32_t n_layers,
                                  const char* manifest_json, const mcdma_kv_export_options* options,
                                  mcdma_kv_export** out) {
  static constexpr const char* kFn = "mcdma_kv_export_create";
  if (client == nullptr || handoff_id == nullptr || out == nullptr ||
      (layers == nullptr && n_layers))
    return Bad(std::string(kFn) + ": NULL argument");
  *out = nullptr;
  return Guard([&] {
    mcdma_kv_export_options o;
    if (mcdma_code c = mcdma::capi::ReadKvExportOptions(kFn, options, &o); c != MCDMA_OK) return c;
    std::vector<mcdma::Buffer> buffers;
    if (mcdma_code c = Buffers(kFn, client, layers, n_layers, &buffers); c != MCDMA_OK) return c;
    mcdma::kv::ExportOptions eo;
    for (uint32_t i = 0; i < o.allowed_peer_count; ++i)
      eo.allowed_peers.emplace_back(o.allowed_peers[i]);
    eo.checksum = o.checksum != 0;
    eo.ttl = std::chrono::milliseconds(o.ttl_ms);
    auto made = mcdma::kv::Export::Create(*client->client, handoff_id, std::move(buffers),
                                          manifest_json == nullptr ? "{}" : manifest_json, eo);
    if (!made.ok()) return Fail(made.status());
    *out = new mcdma_kv_export{std::move(*made)};
    return MCDMA_OK;
  });
}

mcdma_code mcdma_kv_export_publish(mcdma_kv_export* exp, uint32_t layer) {
  if (exp == nullptr) return Bad("mcdma_kv_export_publish: NULL argument");
  return Guard([&] { return Check(exp->exp->PublishLayer(layer)); });
}

mcdma_code mcdma_kv_export_publish_all(mcdma_kv_export* exp) {
  if (exp == nullptr) return Bad("mcdma_kv_export_publish_all: NULL argument");
  return Guard([&] { return Check(exp->exp->PublishAll()); });
}

mcdma_code mcdma_kv_export_wait_consumed(mcdma_kv_export* exp, uint32_t count,
                                         uint32_t timeout_ms) {
  if (exp == nullptr) return Bad("mcdma_kv_export_wait_consumed: NULL argument");
  return Guard([&] {
    auto r = exp->exp->WaitConsumed(count, Ms(timeout_ms));
    return r.ok() ? MCDMA_OK : Fail(r.status());
  });
}

mcdma_code mcdma_kv_export_revoke(mcdma_kv_export* exp, const char* reason) {
  if (exp == nullptr) return Bad("mcdma_kv_export_revoke: NULL argument");
  return Guard([&] {
    return Check(exp->exp->Revoke(reason == nullptr ? "revoked by the producer" : reason));
  });
}

const char* mcdma_kv_export_state(mcdma_kv_export* exp) {
  if (exp == nullptr) return "invalid";
  try {
    return mcdma::kv::StateName(exp->exp->state());
  } catch (...) {
    return "unknown";
  }
}

void mcdma_kv_export_close(mcdma_kv_export* exp) {
  if (exp == nullptr) return;
  (void)Guard([&] {
    exp->exp->Close();
    return MCDMA_OK;
  });
  delete exp;
}

mcdma_code mcdma_kv_pool_create(mcdma_client* client, uint64_t max_idle_bytes,
                                mcdma_kv_pool** out) {
  if (client == nullptr || out == nullptr) return Bad("mcdma_kv_pool_create: NULL argument");
  *out = nullptr;
  return Guard([&] {
    uint64_t idle = max_idle_bytes == 0 ? uint64_t{4} << 30 : max_idle_bytes;
    *out =
        new mcdma_kv_pool{std::make_unique<mcdma::kv::BufferPool>(*client->client, idle), client};
    return MCDMA_OK;
  });
}

void mcdma_kv_pool_free(mcdma_kv_pool* pool) { delete pool; }

mcdma_code mcdma_kv_import_open(mcdma_client* client, const char* peer, const char* handoff_id,
                                const mcdma_kv_import_options* options, mcdma_kv_import** out) {
  static constexpr const char* kFn = "mcdma_kv_import_open";
  if (client == nullptr || handoff_id == nullptr || out == nullptr)
    return Bad(std::string(kFn) + ": NULL argument");
  *out = nullptr;
  return Guard([&] {
    mcdma_kv_import_options o;
    if (mcdma_code c = mcdma::capi::ReadKvImportOptions(kFn, options, &o); c != MCDMA_OK) return c;
    mcdma::kv::ImportOptions io;
    if (o.expect_json != nullptr) io.expect_json = o.expect_json;
    if (o.token_digest != nullptr) io.token_digest = o.token_digest;
    io.deadline = Ms(o.deadline_ms);
    io.open_wait = Ms(o.open_wait_ms);
    io.verify = o.verify != 0;
    if (mcdma_code c = Buffers(kFn, client, o.buffers, o.buffer_count, &io.buffers); c != MCDMA_OK)
      return c;
    if (o.pool != nullptr) {
      if (o.pool->owner != client)
        return Bad(std::string(kFn) + ": the pool belongs to another client");
      io.pool = o.pool->pool.get();
    }
    auto opened =
        mcdma::kv::Import::Open(*client->client, peer == nullptr ? "" : peer, handoff_id, io);
    if (!opened.ok()) return Fail(opened.status());
    *out = new mcdma_kv_import{std::move(*opened), client};
    return MCDMA_OK;
  });
}

mcdma_code mcdma_kv_import_pull(mcdma_kv_import* imp, mcdma_kv_layer_done on_layer, void* user) {
  if (imp == nullptr) return Bad("mcdma_kv_import_pull: NULL argument");
  return Guard([&] {
    std::function<void(uint32_t)> cb;
    if (on_layer != nullptr) cb = [on_layer, user](uint32_t layer) { on_layer(user, layer); };
    return Check(imp->imp->Pull(cb));
  });
}

mcdma_code mcdma_kv_import_wait_layer(mcdma_kv_import* imp, uint32_t layer, uint32_t timeout_ms) {
  if (imp == nullptr) return Bad("mcdma_kv_import_wait_layer: NULL argument");
  return Guard([&] {
    auto r = imp->imp->WaitLayer(layer, Ms(timeout_ms));
    return r.ok() ? MCDMA_OK : Fail(r.status());
  });
}

uint32_t mcdma_kv_import_layer_count(const mcdma_kv_import* imp) {
  return imp == nullptr ? 0 : static_cast<uint32_t>(imp->imp->layer_nbytes().size());
}

uint64_t mcdma_kv_import_layer_nbytes(const mcdma_kv_import* imp, uint32_t layer) {
  if (imp == nullptr || layer >= imp->imp->layer_nbytes().size()) return 0;
  return imp->imp->layer_nbytes()[layer];
}

const char* mcdma_kv_import_manifest(const mcdma_kv_import* imp) {
  return imp == nullptr ? nullptr : imp->imp->manifest_json().c_str();
}

mcdma_code mcdma_kv_import_buffer(mcdma_kv_import* imp, uint32_t layer, mcdma_buffer** out) {
  if (imp == nullptr || out == nullptr) return Bad("mcdma_kv_import_buffer: NULL argument");
  *out = nullptr;
  if (layer >= imp->imp->buffers().size()) {
    return Fail(mcdma::Status(mcdma::Code::kOutOfRange,
                              "mcdma_kv_import_buffer: layer " + std::to_string(layer) + " of " +
                                  std::to_string(imp->imp->buffers().size())));
  }
  return Guard([&] {
    *out = new mcdma_buffer{imp->imp->buffers()[layer], imp->owner};
    return MCDMA_OK;
  });
}

void mcdma_kv_import_close(mcdma_kv_import* imp) {
  if (imp == nullptr) return;
  (void)Guard([&] {
    imp->imp->Close();
    return MCDMA_OK;
  });
  delete imp;
}

}  // extern "C"
