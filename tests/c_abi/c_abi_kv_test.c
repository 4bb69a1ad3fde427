/* The KV-cache hand-off from C against a real daemon (MCDMA_SOCKET): a
 * producer client offers four layers, a consumer client on the same host
 * pulls them and checks every byte; the named errors of a mismatched
 * manifest, another prompt's digest, an unknown or revoked hand-off and a
 * corrupted layer; a pool's buffers reused by the next import; bad
 * arguments and option structs. Compiled as C11. Exits 0 only if every
 * check passed. */
#include <stdlib.h>
#include <string.h>

#include "c_abi_check.h"

enum { kLayers = 4 };
static const uint64_t kSizes[kLayers] = {65536, 65536, 4096, 200000};

static unsigned char pattern(uint64_t i, unsigned layer) {
  return (unsigned char)((i * 2654435761u) >> 7 ^ layer);
}

static void fill(mcdma_buffer* b, unsigned layer) {
  unsigned char* p = (unsigned char*)mcdma_buffer_data(b);
  for (uint64_t i = 0; i < mcdma_buffer_size(b); i++) p[i] = pattern(i, layer);
}

static int same(const mcdma_buffer* b, uint64_t n, unsigned layer) {
  const unsigned char* p = (const unsigned char*)mcdma_buffer_data(b);
  for (uint64_t i = 0; i < n; i++) {
    if (p[i] != pattern(i, layer)) return 0;
  }
  return 1;
}

static unsigned landed_mask = 0;
static void on_layer(void* user, uint32_t layer) {
  (void)user;
  landed_mask |= 1u << layer;
}

/* Opens `id` with the given expectation and digest; returns the code. */
static mcdma_code try_open(mcdma_client* c, const char* id, const char* expect,
                           const char* digest) {
  mcdma_kv_import_options o;
  mcdma_kv_import_options_init(&o);
  o.expect_json = expect;
  o.token_digest = digest;
  o.deadline_ms = 10000;
  mcdma_kv_import* imp = NULL;
  mcdma_code code = mcdma_kv_import_open(c, NULL, id, &o, &imp);
  if (imp != NULL) mcdma_kv_import_close(imp);
  return code;
}

int main(void) {
  mcdma_client* producer = NULL;
  mcdma_client* consumer = NULL;
  CHECK(mcdma_connect(NULL, "kv-c-producer", &producer) == MCDMA_OK, "connect producer");
  CHECK(mcdma_connect(NULL, "kv-c-consumer", &consumer) == MCDMA_OK, "connect consumer");
  if (producer == NULL || consumer == NULL) return FINISH("c_abi_kv_test");

  mcdma_buffer* layers[kLayers];
  for (unsigned i = 0; i < kLayers; i++) {
    layers[i] = NULL;
    CHECK(mcdma_alloc(producer, kSizes[i], &layers[i]) == MCDMA_OK, "alloc layer %u", i);
    if (layers[i] != NULL) fill(layers[i], i);
  }
  mcdma_kv_export* exp = NULL;
  mcdma_kv_export_options eo;
  mcdma_kv_export_options_init(&eo);
  CHECK(eo.checksum == 0 && eo.ttl_ms == 600000, "export option defaults");
  eo.checksum = 1; /* the corrupted-layer check below needs them */
  CHECK(mcdma_kv_export_create(producer, "c-abi.kv:1", layers, kLayers,
                               "{\"dtype\":\"uint8\",\"token_digest\":\"ab12\"}", &eo,
                               &exp) == MCDMA_OK,
        "export create");
  if (exp == NULL) return FINISH("c_abi_kv_test");
  CHECK(strcmp(mcdma_kv_export_state(exp), "open") == 0, "state %s", mcdma_kv_export_state(exp));
  CHECK(mcdma_kv_export_publish(exp, 0) == MCDMA_OK, "publish 0");
  CHECK(mcdma_kv_export_publish(exp, 0) == MCDMA_ALREADY_EXISTS, "publish 0 twice");
  CHECK(mcdma_kv_export_publish(exp, kLayers) == MCDMA_OUT_OF_RANGE, "publish past the end");
  CHECK(mcdma_kv_export_publish_all(exp) == MCDMA_OK, "publish all");

  /* The whole cache, byte-verified, into a pool's buffers. */
  mcdma_kv_pool* pool = NULL;
  CHECK(mcdma_kv_pool_create(consumer, 0, &pool) == MCDMA_OK, "pool");
  mcdma_kv_import_options o;
  mcdma_kv_import_options_init(&o);
  o.expect_json = "{\"dtype\":\"uint8\",\"n_layers\":4}";
  o.token_digest = "ab12";
  o.pool = pool;
  mcdma_kv_import* imp = NULL;
  CHECK(mcdma_kv_import_open(consumer, "", "c-abi.kv:1", &o, &imp) == MCDMA_OK, "import open");
  void* first_data[kLayers] = {0};
  if (imp != NULL) {
    CHECK(mcdma_kv_import_layer_count(imp) == kLayers, "layer count");
    CHECK(strstr(mcdma_kv_import_manifest(imp), "\"mcdma.kv/1\"") != NULL, "manifest %s",
          mcdma_kv_import_manifest(imp));
    CHECK(mcdma_kv_import_pull(imp, on_layer, NULL) == MCDMA_OK, "pull");
    CHECK(landed_mask == (1u << kLayers) - 1, "landed mask %x", landed_mask);
    CHECK(mcdma_kv_import_wait_layer(imp, 3, 1000) == MCDMA_OK, "wait_layer after pull");
    for (unsigned i = 0; i < kLayers; i++) {
      mcdma_buffer* b = NULL;
      CHECK(mcdma_kv_import_buffer(imp, i, &b) == MCDMA_OK, "buffer %u", i);
      if (b == NULL) continue;
      CHECK(mcdma_kv_import_layer_nbytes(imp, i) == mcdma_buffer_size(layers[i]), "layer %u size",
            i);
      CHECK(same(b, kSizes[i], i), "layer %u bytes differ", i);
      first_data[i] = mcdma_buffer_data(b);
      mcdma_buffer_free(b);
    }
    mcdma_buffer* none = NULL;
    CHECK(mcdma_kv_import_buffer(imp, kLayers, &none) == MCDMA_OUT_OF_RANGE, "buffer past end");
    mcdma_kv_import_close(imp);
  }
  CHECK(mcdma_kv_export_wait_consumed(exp, 1, 10000) == MCDMA_OK, "consumed");

  /* The next import from the same pool lands in the same buffers. */
  imp = NULL;
  CHECK(mcdma_kv_import_open(consumer, NULL, "c-abi.kv:1", &o, &imp) == MCDMA_OK, "reopen");
  if (imp != NULL) {
    CHECK(mcdma_kv_import_pull(imp, NULL, NULL) == MCDMA_OK, "second pull");
    for (unsigned i = 0; i < kLayers; i++) {
      mcdma_buffer* b = NULL;
      if (mcdma_kv_import_buffer(imp, i, &b) != MCDMA_OK) continue;
      CHECK(mcdma_buffer_data(b) == first_data[i], "layer %u: the pool gave a new buffer", i);
      CHECK(same(b, kSizes[i], i), "second pull: layer %u bytes differ", i);
      mcdma_buffer_free(b);
    }
    mcdma_kv_import_close(imp);
  }

  /* Named errors, each before any byte moved. */
  CHECK(try_open(consumer, "c-abi.kv:1", "{\"dtype\":\"float16\"}", NULL) == MCDMA_INVALID,
        "mismatched manifest");
  CHECK(mcdma_last_reason() == MCDMA_REASON_HANDOFF_MANIFEST, "reason %s",
        mcdma_reason_name(mcdma_last_reason()));
  CHECK(strstr(mcdma_last_error(), "dtype: producer 'uint8', expected 'float16'") != NULL,
        "message %s", mcdma_last_error());
  CHECK(try_open(consumer, "c-abi.kv:1", NULL, "cd34") == MCDMA_INVALID, "other digest");
  CHECK(mcdma_last_reason() == MCDMA_REASON_HANDOFF_DIGEST, "reason %s",
        mcdma_reason_name(mcdma_last_reason()));
  CHECK(try_open(consumer, "c-abi.kv:none", NULL, NULL) == MCDMA_PEER_GONE, "unknown id");
  CHECK(mcdma_last_reason() == MCDMA_REASON_HANDOFF_PRODUCER_GONE, "reason %s",
        mcdma_reason_name(mcdma_last_reason()));
  CHECK(try_open(consumer, "bad id!", NULL, NULL) == MCDMA_INVALID, "bad id");

  /* A layer changed after publication fails its checksum. */
  ((unsigned char*)mcdma_buffer_data(layers[1]))[100] ^= 0xFF;
  imp = NULL;
  CHECK(mcdma_kv_import_open(consumer, NULL, "c-abi.kv:1", NULL, &imp) == MCDMA_OK, "open 3");
  if (imp != NULL) {
    CHECK(mcdma_kv_import_pull(imp, NULL, NULL) == MCDMA_INTERNAL, "corrupted pull");
    CHECK(mcdma_last_reason() == MCDMA_REASON_HANDOFF_CHECKSUM, "reason %s",
          mcdma_reason_name(mcdma_last_reason()));
    CHECK(strstr(mcdma_last_error(), "layer 1 checksum") != NULL, "message %s", mcdma_last_error());
    mcdma_kv_import_close(imp);
  }

  /* Revoked: a late consumer learns why. */
  CHECK(mcdma_kv_export_revoke(exp, "the engine restarted") == MCDMA_OK, "revoke");
  CHECK(strcmp(mcdma_kv_export_state(exp), "revoked") == 0, "state %s", mcdma_kv_export_state(exp));
  CHECK(try_open(consumer, "c-abi.kv:1", NULL, NULL) == MCDMA_REVOKED, "open revoked");
  CHECK(mcdma_last_reason() == MCDMA_REASON_HANDOFF_REVOKED, "reason %s",
        mcdma_reason_name(mcdma_last_reason()));
  CHECK(strstr(mcdma_last_error(), "the engine restarted") != NULL, "message %s",
        mcdma_last_error());
  CHECK(mcdma_kv_export_publish(exp, 1) == MCDMA_INVALID, "publish after revoke");
  mcdma_kv_export_close(exp);

  /* Bad arguments and option structs. */
  mcdma_kv_export* none = NULL;
  CHECK(mcdma_kv_export_create(producer, "c-abi.kv:2", NULL, 0, NULL, NULL, &none) == MCDMA_INVALID,
        "no layers");
  CHECK(mcdma_kv_export_create(producer, "c-abi.kv:2", layers, 1, "[1, 2]", NULL, &none) ==
            MCDMA_INVALID,
        "manifest not an object");
  CHECK(
      mcdma_kv_export_create(consumer, "c-abi.kv:2", layers, 1, NULL, NULL, &none) == MCDMA_INVALID,
      "another client's buffer");
  mcdma_kv_import_options small;
  mcdma_kv_import_options_init(&small);
  small.struct_size = sizeof(size_t);
  CHECK(mcdma_kv_import_open(consumer, NULL, "c-abi.kv:2", &small, &imp) == MCDMA_INVALID,
        "struct_size too small");
  CHECK(strstr(mcdma_last_error(), "mcdma_kv_import_options") != NULL, "message %s",
        mcdma_last_error());
  CHECK(mcdma_kv_import_open(NULL, NULL, "x", NULL, &imp) == MCDMA_INVALID, "NULL client");

  mcdma_kv_pool_free(pool);
  for (unsigned i = 0; i < kLayers; i++) mcdma_buffer_free(layers[i]);
  mcdma_close(consumer);
  mcdma_close(producer);
  return FINISH("c_abi_kv_test");
}
