/* The C ABI, exercised from C against a real daemon (MCDMA_SOCKET): calls,
 * handler errors, buffers, exports, reads/writes and named errors. Compiled
 * as C11 so the header is proven to be valid C. Exits 0 only if every check
 * passed; prints each failure. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "c_abi_check.h"

static void upper(void* user, mcdma_call* call) {
  (void)user;
  size_t n = 0;
  const char* p = (const char*)mcdma_call_payload(call, &n);
  if (n == 4 && memcmp(p, "fail", 4) == 0) {
    mcdma_reply_error(call, MCDMA_PERMISSION_DENIED, "refused by handler");
    return;
  }
  char buf[256];
  if (n > sizeof(buf)) n = sizeof(buf);
  for (size_t i = 0; i < n; i++) buf[i] = (p[i] >= 'a' && p[i] <= 'z') ? (char)(p[i] - 32) : p[i];
  mcdma_reply(call, buf, n);
}

static atomic_int async_done;
static void on_done(void* user, mcdma_code code, const void* reply, size_t len) {
  int ok = code == MCDMA_OK && len == 5 && memcmp(reply, "ASYNC", 5) == 0;
  atomic_store((atomic_int*)user, ok ? 1 : -1);
}

int main(void) {
  mcdma_client* server = NULL;
  mcdma_client* client = NULL;
  CHECK(mcdma_connect(NULL, "c-server", &server) == MCDMA_OK, "connect server");
  CHECK(mcdma_connect(NULL, "c-client", &client) == MCDMA_OK, "connect client");
  if (server == NULL || client == NULL) return 1;

  uint64_t sid = 0;
  CHECK(mcdma_serve(server, "c.upper", upper, NULL, &sid) == MCDMA_OK && sid != 0, "serve");
  CHECK(mcdma_serve(client, "c.upper", upper, NULL, NULL) == MCDMA_ALREADY_EXISTS,
        "duplicate serve");

  void* reply = NULL;
  size_t len = 0;
  CHECK(mcdma_call_service(client, "c.upper", "hello", 5, 0, &reply, &len) == MCDMA_OK, "call");
  CHECK(len == 5 && reply && memcmp(reply, "HELLO", 5) == 0, "reply bytes");
  mcdma_free_reply(reply);
  CHECK(
      mcdma_call_service(client, "c.upper", "fail", 4, 0, &reply, &len) == MCDMA_PERMISSION_DENIED,
      "handler error code");
  CHECK(strstr(mcdma_last_error(), "refused by handler") != NULL, "handler error text");
  CHECK(mcdma_call_service(client, "c.nobody", "x", 1, 0, &reply, &len) == MCDMA_NOT_FOUND,
        "unknown service");
  CHECK(strcmp(mcdma_code_name(MCDMA_REVOKED), "REVOKED") == 0, "code names");
  CHECK(mcdma_last_reason() == MCDMA_REASON_NONE, "no reason for an unknown name");
  {
    mcdma_remote* nowhere = NULL;
    CHECK(mcdma_resolve(client, "no-such-host", "c.kv", &nowhere) == MCDMA_NOT_FOUND,
          "resolve on a host with no link");
    CHECK(mcdma_last_reason() == MCDMA_REASON_NOT_LINKED, "its reason");
    CHECK(strcmp(mcdma_reason_name(mcdma_last_reason()), "NOT_LINKED") == 0, "reason name");
    CHECK(strcmp(mcdma_reason_name((mcdma_reason)MCDMA_MAX_REASON), "RAIL_END_DOWN") == 0,
          "the highest reason is named");
  }

  atomic_store(&async_done, 0);
  CHECK(mcdma_call_async(client, "c.upper", "async", 5, 0, on_done, &async_done) == MCDMA_OK,
        "call_async");
  for (int i = 0; i < 5000 && atomic_load(&async_done) == 0; i++) sleep_ms(1);
  CHECK(atomic_load(&async_done) == 1, "async completion");

  mcdma_buffer* exported = NULL;
  mcdma_buffer* local = NULL;
  const uint64_t size = 8u << 20;
  CHECK(mcdma_alloc(server, size, &exported) == MCDMA_OK, "alloc exported");
  CHECK(mcdma_alloc(client, size, &local) == MCDMA_OK, "alloc local");
  if (exported == NULL || local == NULL) return 1;
  CHECK(((uintptr_t)mcdma_buffer_data(local) & 4095) == 0, "page aligned");
  CHECK(mcdma_buffer_size(local) == size, "size");
  unsigned char* src = (unsigned char*)mcdma_buffer_data(local);
  for (uint64_t i = 0; i < size; i++) src[i] = (unsigned char)(i * 7 + 3);
  CHECK(mcdma_export(server, exported, "c.kv", 0, 0, 0, MCDMA_EXPORT_READ) == MCDMA_OK,
        "export read-only");
  mcdma_remote* remote = NULL;
  CHECK(mcdma_resolve(client, NULL, "c.kv", &remote) == MCDMA_OK && remote != NULL, "resolve");
  if (remote == NULL) return 1;
  CHECK(mcdma_remote_length(remote) == size, "remote length");
  uint64_t moved = 0;
  CHECK(mcdma_write(client, remote, 0, local, 0, size, 0, &moved) == MCDMA_PERMISSION_DENIED,
        "write to read-only export refused");
  CHECK(mcdma_unexport(server, "c.kv") == MCDMA_OK, "unexport");
  CHECK(mcdma_read(client, remote, 0, local, 0, 16, 0, &moved) == MCDMA_REVOKED,
        "read after unexport");
  mcdma_remote_free(remote);

  CHECK(mcdma_export(server, exported, "c.kv2", 0, 0, 0, MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE) ==
            MCDMA_OK,
        "export read-write");
  CHECK(mcdma_resolve(client, "", "c.kv2", &remote) == MCDMA_OK, "resolve 2");
  CHECK(mcdma_write(client, remote, 0, local, 0, size, 0, &moved) == MCDMA_OK && moved == size,
        "write");
  CHECK(memcmp(mcdma_buffer_data(exported), src, size) == 0, "server sees written bytes");
  memset(src, 0, size);
  CHECK(mcdma_read(client, remote, 4096, local, 0, size - 4096, 0, &moved) == MCDMA_OK &&
            moved == size - 4096,
        "read");
  int same = 1;
  for (uint64_t i = 0; i < size - 4096; i++) {
    if (src[i] != (unsigned char)((i + 4096) * 7 + 3)) {
      same = 0;
      break;
    }
  }
  CHECK(same, "read bytes");
  CHECK(mcdma_read(client, remote, 1, local, 0, size, 0, &moved) == MCDMA_OUT_OF_RANGE,
        "read past end");
  CHECK(mcdma_export(server, exported, "bad name!", 0, 0, 0, MCDMA_EXPORT_READ) == MCDMA_INVALID,
        "bad name");
  CHECK(mcdma_connect(NULL, NULL, NULL) == MCDMA_INVALID, "NULL out");

  mcdma_remote_free(remote);
  mcdma_buffer_free(local);
  mcdma_buffer_free(exported);
  mcdma_close(client);
  mcdma_close(server);
  return FINISH("c_abi_test");
}
