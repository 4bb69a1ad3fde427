/* libmcdma C ABI: opaque handles over the C++ API (mcdma/client.hpp).
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

#ifdef __cplusplus
extern "C" {
#endif

/* Same numbers as mcdma::Code (status.hpp) and the mailbox protocol; both
 * are made from the one list in mcdma/codes.h. */
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
      MCDMA_MAX_REASON = MCDMA_REASON_TRANSPORT_REFUSED /* the highest reason */
} mcdma_reason;

typedef struct mcdma_client mcdma_client; /* a session */
typedef struct mcdma_buffer mcdma_buffer; /* a shared-memory buffer */
typedef struct mcdma_remote mcdma_remote; /* a resolved export */
typedef struct mcdma_call mcdma_call;     /* an incoming call (handler argument) */

/* "TIMEOUT", "OUT_OF_RANGE", ... */
const char* mcdma_code_name(mcdma_code code);
const char* mcdma_last_error(void);

/* socket may be NULL (default path); app_name may be NULL. */
mcdma_code mcdma_connect(const char* socket, const char* app_name, mcdma_client** out);
void mcdma_close(mcdma_client* client);

/* Request/reply. timeout_ms 0 = the client's default. The reply is copied
 * into a malloc'd block the caller frees with mcdma_free_reply. */
mcdma_code mcdma_call_service(mcdma_client* client, const char* service, const void* request,
                              size_t request_len, uint32_t timeout_ms, void** reply,
                              size_t* reply_len);
void mcdma_free_reply(void* reply);
/* Asynchronous call: `done` runs exactly once with the result — on the
 * library's progress thread, on an app thread that is waiting on another
 * operation of this client, or immediately on the calling thread if the call
 * could not be submitted. It must not block. The reply pointer is valid only
 * during the callback. */
typedef void (*mcdma_call_done)(void* user, mcdma_code code, const void* reply, size_t reply_len);
mcdma_code mcdma_call_async(mcdma_client* client, const char* service, const void* request,
                            size_t request_len, uint32_t timeout_ms, mcdma_call_done done,
                            void* user);
mcdma_code mcdma_notify(mcdma_client* client, const char* service, const void* message, size_t len,
                        uint32_t timeout_ms);

/* Serving: the handler runs on the library's progress thread and must
 * reply (mcdma_reply / mcdma_reply_error) before returning, unless the call
 * is one-way (mcdma_call_one_way). */
typedef void (*mcdma_handler)(void* user, mcdma_call* call);
mcdma_code mcdma_serve(mcdma_client* client, const char* service, mcdma_handler handler, void* user,
                       uint64_t* service_id);
mcdma_code mcdma_unserve(mcdma_client* client, uint64_t service_id);
const void* mcdma_call_payload(const mcdma_call* call, size_t* len);
int mcdma_call_one_way(const mcdma_call* call);
mcdma_code mcdma_reply(mcdma_call* call, const void* reply, size_t len);
mcdma_code mcdma_reply_error(mcdma_call* call, mcdma_code code, const char* message);

/* Buffers: page-aligned shared memory owned by the session. */
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
mcdma_code mcdma_unexport(mcdma_client* client, const char* name);
/* peer NULL or "" = this host. */
mcdma_code mcdma_resolve(mcdma_client* client, const char* peer, const char* name,
                         mcdma_remote** out);
uint64_t mcdma_remote_length(const mcdma_remote* remote);
void mcdma_remote_free(mcdma_remote* remote);

/* One-sided transfers; *moved (may be NULL) receives the bytes moved. */
mcdma_code mcdma_write(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                       const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                       uint32_t timeout_ms, uint64_t* moved);
mcdma_code mcdma_read(mcdma_client* client, const mcdma_remote* remote, uint64_t remote_offset,
                      const mcdma_buffer* local, uint64_t local_offset, uint64_t length,
                      uint32_t timeout_ms, uint64_t* moved);

#ifdef __cplusplus
}
#endif

#endif /* MCDMA_MCDMA_H_ */
