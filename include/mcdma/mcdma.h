/* libmcdma C ABI: opaque handles over the C++ API (mcdma/client.hpp).
 * Its rules (versioning, option structs, ownership, threads, errors) are in
 * docs/c_api.md.
 *
 * Every function returns an mcdma_code (0 = MCDMA_OK) unless noted; on error,
 * mcdma_last_error() returns this thread's message for the last failed call
 * (valid until the next failing call on this thread). Handles are created by
 * mcdma_*_new/connect/alloc/resolve functions and destroyed only by their
 * matching *_free/close function. All functions are thread-safe unless a
 * comment says otherwise. Nothing here ever aborts or throws. */
#ifndef MCDMA_MCDMA_H_
#define MCDMA_MCDMA_H_

#include <stddef.h>
#include <stdint.h>

#include "mcdma/codes.h"
#include "mcdma/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Same numbers as mcdma::Code (status.hpp) and the mailbox protocol; both
 * are made from the one list in mcdma/codes.h. */
/* The list pastes names, not expressions: */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
/* clang-format off */
typedef enum mcdma_code {
#define MCDMA_C_CODE_(name, value, cpp, meaning) MCDMA_##name = value,
  MCDMA_CODE_LIST(MCDMA_C_CODE_)
#undef MCDMA_C_CODE_
  MCDMA_MAX_CODE = MCDMA_SYSTEM /* the highest code; every value up to it is named */
} mcdma_code;

/* What a program decides on when a code alone is not enough (see codes.h). */
typedef enum mcdma_reason {
#define MCDMA_C_REASON_(name, value, cpp, meaning) MCDMA_REASON_##name = value,
  MCDMA_REASON_LIST(MCDMA_C_REASON_)
#undef MCDMA_C_REASON_
  MCDMA_MAX_REASON = MCDMA_REASON_RAIL_END_DOWN /* the highest reason */
} mcdma_reason;
/* clang-format on */
/* NOLINTEND(bugprone-macro-parentheses) */

typedef struct mcdma_client mcdma_client; /* a session */
typedef struct mcdma_buffer mcdma_buffer; /* a shared-memory buffer */
typedef struct mcdma_remote mcdma_remote; /* a resolved export */
typedef struct mcdma_call mcdma_call;     /* an incoming call (handler argument) */

/* "TIMEOUT", "OUT_OF_RANGE", ... */
const char* mcdma_code_name(mcdma_code code);
const char* mcdma_last_error(void);
/* This thread's last failure's reason (MCDMA_REASON_NONE when it had none):
 * what a program decides on; the text of mcdma_last_error() is for people. */
mcdma_reason mcdma_last_reason(void);
/* "NO_SUCH_SERVICE", ...; "UNKNOWN" for other values. */
const char* mcdma_reason_name(mcdma_reason reason);

/* The library's MCDMA_VERSION and MCDMA_ABI_VERSION. A program built against
 * this header runs with any library of the same MCDMA_ABI_VERSION; functions
 * newer than the library's mcdma_version() are absent from it. */
uint32_t mcdma_version(void);
uint32_t mcdma_abi_version(void);

/* ---- size-carrying option structs (docs/c_api.md, "Option structs") ----
 * Each begins with struct_size, which the caller sets to sizeof the struct
 * its header declares; the *_init functions below do that and fill the
 * defaults. Fields are only ever appended. The library reads the fields that
 * lie wholly inside struct_size and uses the defaults for the rest (an older
 * caller); bytes past the fields this library knows must be zero (a newer
 * caller that leaves its new fields at their zero default). MCDMA_INVALID,
 * naming the struct, when struct_size does not reach past the first field,
 * ends inside a field, or covers an unknown nonzero byte. A NULL options
 * pointer means every default. */

/* Connecting. Defaults are those of mcdma::ClientOptions (client.hpp). */
typedef struct mcdma_connect_options {
  size_t struct_size;
  const char* socket;          /* NULL: $MCDMA_SOCKET, else the default path */
  const char* app_name;        /* NULL: the program name */
  uint32_t submission_entries; /* mailbox geometry; 0: the daemon's default */
  uint32_t completion_entries;
  uint32_t inbox_entries;
  uint32_t handler_threads;    /* 0: handlers run on the progress thread */
  uint32_t spin_budget_us;     /* a waiting thread spins this long, then sleeps (50) */
  uint32_t default_timeout_ms; /* for operations called with timeout 0 (30000; 0: 30000) */
  uint32_t connect_timeout_ms; /* connecting and control requests (10000; 0: 10000) */
  uint64_t arena_bytes;        /* mailbox arena; 0: the daemon's default */
} mcdma_connect_options;

#define MCDMA_CONNECT_OPTIONS_INIT \
  { sizeof(mcdma_connect_options), NULL, NULL, 0, 0, 0, 0, 50, 30000, 10000, 0 }

/* Inline, so it fills the struct this caller's header declares; it zeroes
 * every byte (padding included) before setting the defaults. */
static inline void mcdma_connect_options_init(mcdma_connect_options* o) {
  size_t i;
  for (i = 0; i < sizeof(*o); i++) ((unsigned char*)o)[i] = 0;
  o->struct_size = sizeof(*o);
  o->spin_budget_us = 50;
  o->default_timeout_ms = 30000;
  o->connect_timeout_ms = 10000;
}

/* Per-operation options (asynchronous and batched transfers). */
typedef struct mcdma_op_options {
  size_t struct_size;
  uint32_t timeout_ms; /* 0: the client's default_timeout_ms */
  uint32_t flags;      /* none defined in ABI 1: must be 0 */
} mcdma_op_options;

#define MCDMA_OP_OPTIONS_INIT \
  { sizeof(mcdma_op_options), 0, 0 }

static inline void mcdma_op_options_init(mcdma_op_options* o) {
  size_t i;
  for (i = 0; i < sizeof(*o); i++) ((unsigned char*)o)[i] = 0;
  o->struct_size = sizeof(*o);
}

/* socket may be NULL (default path); app_name may be NULL. */
mcdma_code mcdma_connect(const char* socket, const char* app_name, mcdma_client** out);
/* The same with every ClientOptions field. */
mcdma_code mcdma_connect_ex(const mcdma_connect_options* options, mcdma_client** out);
/* Ends the session: operations in flight complete with MCDMA_CANCELLED.
 * Buffers and remotes of the client must be freed before it. */
void mcdma_close(mcdma_client* client);

/* What the session is. Filled by the library: the caller sets struct_size
 * (mcdma_session_info_init); the library writes the fields that fit in it
 * and zeroes the bytes past those it knows. Strings stay valid until
 * mcdma_close. */
typedef struct mcdma_session_info {
  size_t struct_size;
  uint64_t session_id;
  const char* app_name;        /* the name sent to the daemon (mcdmactl sessions) */
  const char* host_id;         /* the daemon's host */
  const char* daemon_version;  /* e.g. "0.1.0" */
  const char* socket;          /* the control socket connected to */
  uint32_t submission_entries; /* the mailbox as the daemon made it */
  uint32_t completion_entries;
  uint32_t inbox_entries;
  uint64_t app_arena_bytes;    /* the arena half this library writes requests to */
  uint64_t daemon_arena_bytes; /* the half the daemon delivers replies to */
  uint64_t mailbox_bytes;      /* the whole mapped mailbox */
} mcdma_session_info;

static inline void mcdma_session_info_init(mcdma_session_info* info) {
  size_t i;
  for (i = 0; i < sizeof(*info); i++) ((unsigned char*)info)[i] = 0;
  info->struct_size = sizeof(*info);
}

mcdma_code mcdma_session_info_get(const mcdma_client* client, mcdma_session_info* info);

/* ---- request/reply and notifications ----
 * Request/reply. timeout_ms 0 = the client's default. The reply is copied
 * into a malloc'd block the caller frees with mcdma_free_reply. */
mcdma_code mcdma_call_service(mcdma_client* client, const char* service, const void* request,
                              size_t request_len, uint32_t timeout_ms, void** reply,
                              size_t* reply_len);
void mcdma_free_reply(void* reply);
/* Asynchronous call: `done` runs exactly once with the result — on the
 * library's progress thread, on an app thread that is waiting on another
 * operation of this client, or immediately on the calling thread if the call
 * could not be submitted. It must not block. The reply pointer is valid only
 * during the callback. When the function itself returns an error (a bad
 * argument), `done` never runs. Inside `done`, mcdma_last_error() says why
 * an operation failed. */
typedef void (*mcdma_call_done)(void* user, mcdma_code code, const void* reply, size_t reply_len);
mcdma_code mcdma_call_async(mcdma_client* client, const char* service, const void* request,
                            size_t request_len, uint32_t timeout_ms, mcdma_call_done done,
                            void* user);
/* One-way message: OK once it is in the server's inbox. The server's handler
 * receives it with mcdma_call_one_way() == 1. */
mcdma_code mcdma_notify(mcdma_client* client, const char* service, const void* message, size_t len,
                        uint32_t timeout_ms);

/* Serving: the handler runs on the library's progress thread (or a handler
 * thread, see handler_threads) and must reply (mcdma_reply /
 * mcdma_reply_error) before returning, unless the call is one-way
 * (mcdma_call_one_way): a notification. */
typedef void (*mcdma_handler)(void* user, mcdma_call* call);
mcdma_code mcdma_serve(mcdma_client* client, const char* service, mcdma_handler handler, void* user,
                       uint64_t* service_id);
mcdma_code mcdma_unserve(mcdma_client* client, uint64_t service_id);
const void* mcdma_call_payload(const mcdma_call* call, size_t* len);
int mcdma_call_one_way(const mcdma_call* call);
/* The service id the call came in on (mcdma_serve's *service_id). */
uint64_t mcdma_call_service_id(const mcdma_call* call);
/* Microseconds left before the caller's deadline. */
uint64_t mcdma_call_time_left_us(const mcdma_call* call);
mcdma_code mcdma_reply(mcdma_call* call, const void* reply, size_t len);
mcdma_code mcdma_reply_error(mcdma_call* call, mcdma_code code, const char* message);

/* ---- buffers and exports ----
 * Buffers: page-aligned shared memory owned by the session. */
mcdma_code mcdma_alloc(mcdma_client* client, uint64_t size, mcdma_buffer** out);
void* mcdma_buffer_data(const mcdma_buffer* buffer);
uint64_t mcdma_buffer_size(const mcdma_buffer* buffer);
void mcdma_buffer_free(mcdma_buffer* buffer);

/* Exports: flags are MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE. length 0 = to
 * the end; ttl_ms 0 = no expiry. */
#define MCDMA_EXPORT_READ 1u
#define MCDMA_EXPORT_WRITE 2u
mcdma_code mcdma_export(mcdma_client* client, const mcdma_buffer* buffer, const char* name,
                        uint64_t offset, uint64_t length, uint64_t ttl_ms, uint32_t flags);

/* The same with every ExportOptions field (client.hpp). */
typedef struct mcdma_export_options {
  size_t struct_size;
  const char* const* allowed_peers; /* remote hosts that may resolve it (NULL: none) */
  uint32_t allowed_peer_count;
  uint32_t flags;  /* MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE (MCDMA_EXPORT_READ) */
  uint64_t offset; /* exposed range inside the buffer (0) */
  uint64_t length; /* 0: to the end of the buffer */
  uint64_t ttl_ms; /* 0: until unexported or the session ends */
} mcdma_export_options;

#define MCDMA_EXPORT_OPTIONS_INIT \
  { sizeof(mcdma_export_options), NULL, 0, MCDMA_EXPORT_READ, 0, 0, 0 }

static inline void mcdma_export_options_init(mcdma_export_options* o) {
  size_t i;
  for (i = 0; i < sizeof(*o); i++) ((unsigned char*)o)[i] = 0;
  o->struct_size = sizeof(*o);
  o->flags = MCDMA_EXPORT_READ;
}

mcdma_code mcdma_export_ex(mcdma_client* client, const mcdma_buffer* buffer, const char* name,
                           const mcdma_export_options* options);
mcdma_code mcdma_unexport(mcdma_client* client, const char* name);
/* peer NULL or "" = this host. */
mcdma_code mcdma_resolve(mcdma_client* client, const char* peer, const char* name,
                         mcdma_remote** out);
uint64_t mcdma_remote_length(const mcdma_remote* remote);
/* What the exporter allows: MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE. */
uint32_t mcdma_remote_flags(const mcdma_remote* remote);
void mcdma_remote_free(mcdma_remote* remote);

/* ---- one-sided transfers ----
 * The remote and the local buffer must belong to `client` (MCDMA_INVALID
 * otherwise) and stay alive until the transfer completes.
 * Synchronous: *moved (may be NULL) receives the bytes moved. */
mcdma_code mcdma_write(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                       const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                       uint32_t timeout_ms, uint64_t* moved);
mcdma_code mcdma_read(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                      const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                      uint32_t timeout_ms, uint64_t* moved);

/* Asynchronous: `done` runs exactly once, under mcdma_call_async's contract,
 * with the bytes moved. options may be NULL. */
typedef void (*mcdma_transfer_done)(void* user, mcdma_code code, uint64_t moved);
mcdma_code mcdma_write_async(mcdma_client* client, const mcdma_remote* remote,
                             uint64_t remote_offset, const mcdma_buffer* local,
                             uint64_t local_offset, uint64_t length,
                             const mcdma_op_options* options, mcdma_transfer_done done, void* user);
mcdma_code mcdma_read_async(mcdma_client* client, const mcdma_remote* remote,
                            uint64_t remote_offset, const mcdma_buffer* local,
                            uint64_t local_offset, uint64_t length, const mcdma_op_options* options,
                            mcdma_transfer_done done, void* user);

/* Batches: every piece is submitted together (one wake-up of the daemon);
 * the call returns when all have completed, with the first error by piece
 * order, and *moved (may be NULL) the total bytes moved. This struct's
 * layout is fixed for ABI 1 (it is an array element, so it carries no size). */
typedef struct mcdma_transfer {
  const mcdma_remote* remote;
  uint64_t remote_offset;
  const mcdma_buffer* local;
  uint64_t local_offset;
  uint64_t length;
} mcdma_transfer;

mcdma_code mcdma_write_batch(mcdma_client* client, const mcdma_transfer* pieces, size_t count,
                             const mcdma_op_options* options, uint64_t* moved);
mcdma_code mcdma_read_batch(mcdma_client* client, const mcdma_transfer* pieces, size_t count,
                            const mcdma_op_options* options, uint64_t* moved);

/* ---- the KV-cache hand-off (mcdma/kv.hpp; docs/protocol.md §18) ----
 * A producer offers a request's KV cache layer by layer; a consumer on
 * another host (or this one) pulls each layer once it is published. The
 * same protocol as C++'s mcdma::kv and Python's mcdma.kv: the three speak
 * to each other. Failures set mcdma_last_error() and, for the hand-off's
 * own, mcdma_last_reason(): MCDMA_REASON_HANDOFF_MANIFEST / _DIGEST
 * (MCDMA_INVALID, before any byte moved), _EXPIRED / _REVOKED
 * (MCDMA_REVOKED), _PRODUCER_GONE (MCDMA_PEER_GONE), _CHECKSUM
 * (MCDMA_INTERNAL); a dropped link is MCDMA_LINK_DOWN, the consumer's
 * deadline MCDMA_TIMEOUT. */
typedef struct mcdma_kv_export mcdma_kv_export; /* a hand-off offered */
typedef struct mcdma_kv_import mcdma_kv_import; /* a hand-off being pulled */
typedef struct mcdma_kv_pool mcdma_kv_pool;     /* buffers reused across imports */

typedef struct mcdma_kv_export_options {
  size_t struct_size;
  const char* const* allowed_peers; /* hosts whose apps may pull it (NULL: none) */
  uint32_t allowed_peer_count;
  uint32_t checksum; /* nonzero: publish each layer's XXH3-64 (0) */
  uint64_t ttl_ms;   /* until it expires; 0: until closed (600000) */
} mcdma_kv_export_options;

static inline void mcdma_kv_export_options_init(mcdma_kv_export_options* o) {
  size_t i;
  for (i = 0; i < sizeof(*o); i++) ((unsigned char*)o)[i] = 0;
  o->struct_size = sizeof(*o);
  o->ttl_ms = 600000;
}

/* Offers `layers` (buffers of `client`, exported zero-copy) as hand-off
 * `handoff_id` (1 to 64 of [A-Za-z0-9._:-]). manifest_json: a JSON object of
 * the producer's facts (NULL: {}). options may be NULL. Close it with
 * mcdma_kv_export_close. */
mcdma_code mcdma_kv_export_create(mcdma_client* client, const char* handoff_id,
                                  mcdma_buffer* const* layers, uint32_t n_layers,
                                  const char* manifest_json, const mcdma_kv_export_options* options,
                                  mcdma_kv_export** out);
/* Layer `layer` is final: checksummed (with options.checksum), every consumer told. */
mcdma_code mcdma_kv_export_publish(mcdma_kv_export* exp, uint32_t layer);
mcdma_code mcdma_kv_export_publish_all(mcdma_kv_export* exp);
/* Waits until `count` consumers have every layer (MCDMA_TIMEOUT otherwise). */
mcdma_code mcdma_kv_export_wait_consumed(mcdma_kv_export* exp, uint32_t count, uint32_t timeout_ms);
mcdma_code mcdma_kv_export_revoke(mcdma_kv_export* exp, const char* reason);
/* "open", "closed", "revoked" or "expired" (a static string). */
const char* mcdma_kv_export_state(mcdma_kv_export* exp);
/* Withdraws it (consumers told "closed") and frees the handle. */
void mcdma_kv_export_close(mcdma_kv_export* exp);

/* A pool keeps at most max_idle_bytes of free buffers (0: 4 GiB); a buffer
 * an import took is free again once every handle to it is freed. Free the
 * pool before the client. */
mcdma_code mcdma_kv_pool_create(mcdma_client* client, uint64_t max_idle_bytes, mcdma_kv_pool** out);
void mcdma_kv_pool_free(mcdma_kv_pool* pool);

typedef struct mcdma_kv_import_options {
  size_t struct_size;
  const char* expect_json;  /* JSON object of keys the manifest must equal (NULL: none) */
  const char* token_digest; /* the manifest's token_digest must be this (NULL: unchecked) */
  uint32_t deadline_ms;     /* every layer landed by then, from open (60000) */
  uint32_t open_wait_ms;    /* retry the open while nothing serves it yet (0) */
  uint32_t verify;          /* nonzero: check each published checksum (1) */
  uint32_t buffer_count;    /* layers land in `buffers` when nonzero (one per layer) */
  mcdma_buffer* const* buffers;
  mcdma_kv_pool* pool; /* else buffers from this pool; else fresh ones */
} mcdma_kv_import_options;

static inline void mcdma_kv_import_options_init(mcdma_kv_import_options* o) {
  size_t i;
  for (i = 0; i < sizeof(*o); i++) ((unsigned char*)o)[i] = 0;
  o->struct_size = sizeof(*o);
  o->deadline_ms = 60000;
  o->verify = 1;
}

/* Opens hand-off `handoff_id` of an app on host `peer` (NULL or "": this
 * host): checks the manifest, prepares the buffers (each layer is resolved
 * by the pull, just before its read). */
mcdma_code mcdma_kv_import_open(mcdma_client* client, const char* peer, const char* handoff_id,
                                const mcdma_kv_import_options* options, mcdma_kv_import** out);
/* Pulls every layer as it is published; on_layer (may be NULL) runs on this
 * thread once layer i landed, verified. */
typedef void (*mcdma_kv_layer_done)(void* user, uint32_t layer);
mcdma_code mcdma_kv_import_pull(mcdma_kv_import* imp, mcdma_kv_layer_done on_layer, void* user);
/* From another thread while one pulls: blocks until layer `layer` landed. */
mcdma_code mcdma_kv_import_wait_layer(mcdma_kv_import* imp, uint32_t layer, uint32_t timeout_ms);
uint32_t mcdma_kv_import_layer_count(const mcdma_kv_import* imp);
uint64_t mcdma_kv_import_layer_nbytes(const mcdma_kv_import* imp, uint32_t layer);
/* The producer's manifest (JSON), valid until mcdma_kv_import_close. */
const char* mcdma_kv_import_manifest(const mcdma_kv_import* imp);
/* A new handle to layer `layer`'s buffer; free it with mcdma_buffer_free
 * (it may outlive the import). */
mcdma_code mcdma_kv_import_buffer(mcdma_kv_import* imp, uint32_t layer, mcdma_buffer** out);
/* Stops listening, releases the remote handles and frees the handle. */
void mcdma_kv_import_close(mcdma_kv_import* imp);

#ifdef __cplusplus
}
#endif

#endif /* MCDMA_MCDMA_H_ */
