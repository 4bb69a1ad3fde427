/* What an engine written in C needs, against a real daemon (MCDMA_SOCKET):
 * asynchronous reads and writes with completion callbacks, batches, exports
 * with every option, notifications received by a handler, and the named
 * errors of bad handles and options. Compiled as C11 (atomics). Exits 0 only
 * if every check passed. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "c_abi_check.h"

enum { kSize = 1 << 20, kPiece = 4096 };

/* One asynchronous transfer's outcome, written by its callback. */
typedef struct completion {
  atomic_int calls; /* how many times done ran: must end at 1 */
  mcdma_code code;
  uint64_t moved;
} completion;

static void on_transfer(void* user, mcdma_code code, uint64_t moved) {
  completion* c = (completion*)user;
  c->code = code;
  c->moved = moved;
  atomic_fetch_add(&c->calls, 1);
}

static void reset(completion* c) {
  atomic_store(&c->calls, 0);
  c->code = MCDMA_INTERNAL;
  c->moved = 0;
}

static int wait_done(completion* c) {
  for (int i = 0; i < 5000 && atomic_load(&c->calls) == 0; i++) sleep_ms(1);
  sleep_ms(2); /* a second run would show up here */
  return atomic_load(&c->calls);
}

static unsigned char pattern(uint64_t i, unsigned seed) { return (unsigned char)(i * 13 + seed); }

static void fill(unsigned char* p, uint64_t n, unsigned seed) {
  for (uint64_t i = 0; i < n; i++) p[i] = pattern(i, seed);
}

static int same(const unsigned char* p, uint64_t n, uint64_t from, unsigned seed) {
  for (uint64_t i = 0; i < n; i++) {
    if (p[i] != pattern(from + i, seed)) return 0;
  }
  return 1;
}

/* Notifications: what the server's handler saw. */
static atomic_int note_count;
static char note_bytes[64];
static size_t note_len;
static uint64_t note_service;
static int note_one_way;
/* Written by the handler before it replies, read by the caller after the
   reply: the two meet through the daemon, so the order holds, but only an
   atomic says so to a race detector. */
static _Atomic uint64_t call_time_left_us;

static void on_note(void* user, mcdma_call* call) {
  (void)user;
  size_t n = 0;
  const void* p = mcdma_call_payload(call, &n);
  if (!mcdma_call_one_way(call)) {
    atomic_store(&call_time_left_us, mcdma_call_time_left_us(call));
    mcdma_reply(call, p, n);
    return;
  }
  note_len = n < sizeof(note_bytes) ? n : sizeof(note_bytes);
  memcpy(note_bytes, p, note_len);
  note_service = mcdma_call_service_id(call);
  note_one_way = mcdma_call_one_way(call);
  atomic_fetch_add(&note_count, 1);
}

static void check_notifications(mcdma_client* server, mcdma_client* client) {
  uint64_t sid = 0;
  CHECK(mcdma_serve(server, "c.notes", on_note, NULL, &sid) == MCDMA_OK, "serve notes");
  atomic_store(&note_count, 0);
  CHECK(mcdma_notify(client, "c.notes", "tick-1", 6, 0) == MCDMA_OK, "notify");
  for (int i = 0; i < 5000 && atomic_load(&note_count) == 0; i++) sleep_ms(1);
  CHECK(atomic_load(&note_count) == 1, "the handler received the notification");
  CHECK(note_len == 6 && memcmp(note_bytes, "tick-1", 6) == 0, "notification bytes");
  CHECK(note_one_way == 1 && note_service == sid, "one-way, on the served id");
  void* reply = NULL;
  size_t len = 0;
  CHECK(mcdma_call_service(client, "c.notes", "ping", 4, 5000, &reply, &len) == MCDMA_OK &&
            len == 4 && memcmp(reply, "ping", 4) == 0,
        "a call to the same service");
  mcdma_free_reply(reply);
  uint64_t left = atomic_load(&call_time_left_us);
  CHECK(left > 0 && left <= 5000000u, "time left %llu us", (unsigned long long)left);
  CHECK(mcdma_call_service_id(NULL) == 0 && mcdma_call_time_left_us(NULL) == 0,
        "NULL call accessors");
  CHECK(mcdma_unserve(server, sid) == MCDMA_OK, "unserve notes");
}

static void check_async(mcdma_client* client, mcdma_remote* remote, mcdma_buffer* local,
                        mcdma_buffer* exported) {
  unsigned char* src = (unsigned char*)mcdma_buffer_data(local);
  unsigned char* dst = (unsigned char*)mcdma_buffer_data(exported);
  completion c;
  mcdma_op_options o;
  mcdma_op_options_init(&o);
  o.timeout_ms = 5000;

  fill(src, kSize, 1);
  memset(dst, 0, kSize);
  reset(&c);
  CHECK(mcdma_write_async(client, remote, 0, local, 0, kSize, &o, on_transfer, &c) == MCDMA_OK,
        "write_async");
  CHECK(wait_done(&c) == 1, "write callback ran once");
  CHECK(c.code == MCDMA_OK && c.moved == kSize, "write moved %llu", (unsigned long long)c.moved);
  CHECK(same(dst, kSize, 0, 1), "the exporter sees the written bytes");

  memset(src, 0, kSize);
  reset(&c);
  CHECK(mcdma_read_async(client, remote, 8192, local, 0, kSize - 8192, NULL, on_transfer, &c) ==
            MCDMA_OK,
        "read_async with default options");
  CHECK(wait_done(&c) == 1, "read callback ran once");
  CHECK(c.code == MCDMA_OK && c.moved == kSize - 8192, "read moved");
  CHECK(same(src, kSize - 8192, 8192, 1), "read bytes");

  reset(&c);
  CHECK(mcdma_read_async(client, remote, 1, local, 0, kSize, &o, on_transfer, &c) == MCDMA_OK,
        "a read past the end is submitted");
  CHECK(wait_done(&c) == 1 && c.code == MCDMA_OUT_OF_RANGE, "and completes OUT_OF_RANGE (%s)",
        mcdma_code_name(c.code));

  reset(&c);
  o.flags = 1;
  CHECK(mcdma_write_async(client, remote, 0, local, 0, 16, &o, on_transfer, &c) == MCDMA_INVALID,
        "unknown op flags");
  CHECK(strstr(mcdma_last_error(), "mcdma_op_options.flags") != NULL, "names the field");
  mcdma_op_options_init(&o);
  o.struct_size = 4;
  CHECK(mcdma_read_async(client, remote, 0, local, 0, 16, &o, on_transfer, &c) == MCDMA_INVALID,
        "op options struct_size 4");
  CHECK(mcdma_read_async(client, remote, 0, local, 0, 16, NULL, NULL, &c) == MCDMA_INVALID,
        "NULL callback");
  CHECK(mcdma_write_async(client, NULL, 0, local, 0, 16, NULL, on_transfer, &c) == MCDMA_INVALID,
        "NULL remote");
  sleep_ms(2);
  CHECK(atomic_load(&c.calls) == 0, "a refused transfer never runs its callback");
}

static void check_batches(mcdma_client* client, mcdma_remote* remote, mcdma_buffer* local,
                          mcdma_buffer* exported) {
  unsigned char* src = (unsigned char*)mcdma_buffer_data(local);
  unsigned char* dst = (unsigned char*)mcdma_buffer_data(exported);
  mcdma_transfer pieces[4];
  /* Local pieces 0..3 land reversed at the remote: piece i at 3 - i. */
  for (int i = 0; i < 4; i++) {
    pieces[i].remote = remote;
    pieces[i].remote_offset = (uint64_t)(3 - i) * kPiece;
    pieces[i].local = local;
    pieces[i].local_offset = (uint64_t)i * kPiece;
    pieces[i].length = kPiece;
  }
  fill(src, 4 * kPiece, 2);
  memset(dst, 0, 4 * kPiece);
  uint64_t moved = 0;
  CHECK(mcdma_write_batch(client, pieces, 4, NULL, &moved) == MCDMA_OK && moved == 4 * kPiece,
        "write batch moved %llu", (unsigned long long)moved);
  int ok = 1;
  for (int i = 0; i < 4; i++) ok &= same(dst + (3 - i) * kPiece, kPiece, (uint64_t)i * kPiece, 2);
  CHECK(ok, "every piece at its remote offset");

  memset(src, 0, 4 * kPiece);
  mcdma_op_options o = MCDMA_OP_OPTIONS_INIT;
  o.timeout_ms = 5000;
  CHECK(mcdma_read_batch(client, pieces, 4, &o, &moved) == MCDMA_OK && moved == 4 * kPiece,
        "read batch");
  CHECK(same(src, 4 * kPiece, 0, 2), "the read batch restores the order");

  CHECK(mcdma_read_batch(client, pieces, 0, NULL, &moved) == MCDMA_OK && moved == 0,
        "an empty batch");
  CHECK(mcdma_read_batch(client, NULL, 2, NULL, &moved) == MCDMA_INVALID, "NULL pieces");
  pieces[1].remote = NULL;
  CHECK(mcdma_write_batch(client, pieces, 4, NULL, &moved) == MCDMA_INVALID, "a NULL handle");
  CHECK(strstr(mcdma_last_error(), "piece 1") != NULL, "names the piece");
  pieces[1].remote = remote;
  pieces[2].remote_offset = kSize - 10;
  CHECK(mcdma_read_batch(client, pieces, 4, NULL, &moved) == MCDMA_OUT_OF_RANGE,
        "a piece past the end fails the batch");
}

static void check_exports(mcdma_client* server, mcdma_client* client, mcdma_buffer* exported,
                          mcdma_buffer* local) {
  const char* peers[] = {"host-b", "host-c"};
  mcdma_export_options e;
  mcdma_export_options_init(&e);
  e.offset = 4096;
  e.length = 8192;
  e.allowed_peers = peers;
  e.allowed_peer_count = 2;
  CHECK(mcdma_export_ex(server, exported, "c.ranged", &e) == MCDMA_OK, "export_ex");
  mcdma_remote* r = NULL;
  CHECK(mcdma_resolve(client, NULL, "c.ranged", &r) == MCDMA_OK && r != NULL, "resolve ranged");
  if (r != NULL) {
    CHECK(mcdma_remote_length(r) == 8192, "the exported range");
    CHECK(mcdma_remote_flags(r) == MCDMA_EXPORT_READ, "read-only by default");
    uint64_t moved = 0;
    CHECK(mcdma_write(client, r, 0, local, 0, 16, 0, &moved) == MCDMA_PERMISSION_DENIED,
          "a write to the read-only export");
    mcdma_remote_free(r);
  }
  /* An older caller's export options end before offset: the whole buffer. */
  mcdma_export_options_init(&e);
  e.struct_size = offsetof(mcdma_export_options, offset);
  e.flags = MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE;
  e.offset = 4096; /* past struct_size: not read */
  CHECK(mcdma_export_ex(server, exported, "c.older", &e) == MCDMA_OK, "older export options");
  r = NULL;
  CHECK(mcdma_resolve(client, "", "c.older", &r) == MCDMA_OK && r != NULL, "resolve older");
  if (r != NULL) {
    CHECK(mcdma_remote_length(r) == kSize, "offset past struct_size took its default");
    CHECK(mcdma_remote_flags(r) == (MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE), "read-write");
    mcdma_remote_free(r);
  }
  CHECK(mcdma_remote_flags(NULL) == 0, "NULL remote flags");
  mcdma_export_options_init(&e);
  e.flags = 4;
  CHECK(mcdma_export_ex(server, exported, "c.bad", &e) == MCDMA_INVALID, "unknown export flags");
  mcdma_export_options_init(&e);
  e.allowed_peer_count = 1;
  CHECK(mcdma_export_ex(server, exported, "c.bad", &e) == MCDMA_INVALID, "NULL allowed_peers");
  const char* holes[] = {"host-b", NULL};
  e.allowed_peers = holes;
  e.allowed_peer_count = 2;
  CHECK(mcdma_export_ex(server, exported, "c.bad", &e) == MCDMA_INVALID, "a NULL peer name");
  CHECK(strstr(mcdma_last_error(), "allowed_peers[1]") != NULL, "names the entry");
  CHECK(mcdma_export_ex(server, NULL, "c.bad", NULL) == MCDMA_INVALID, "NULL buffer");
  CHECK(mcdma_export_ex(server, exported, "bad name!", NULL) == MCDMA_INVALID, "a bad name");
}

int main(void) {
  mcdma_connect_options co = MCDMA_CONNECT_OPTIONS_INIT;
  mcdma_client* server = NULL;
  mcdma_client* client = NULL;
  co.app_name = "c-engine-server";
  co.handler_threads = 1;
  CHECK(mcdma_connect_ex(&co, &server) == MCDMA_OK, "connect server");
  co.app_name = "c-engine-client";
  co.handler_threads = 0;
  CHECK(mcdma_connect_ex(&co, &client) == MCDMA_OK, "connect client");
  if (server == NULL || client == NULL) return FINISH("c_abi_engine_test");

  check_notifications(server, client);

  mcdma_buffer* exported = NULL;
  mcdma_buffer* local = NULL;
  CHECK(mcdma_alloc(server, kSize, &exported) == MCDMA_OK, "alloc exported");
  CHECK(mcdma_alloc(client, kSize, &local) == MCDMA_OK, "alloc local");
  if (exported == NULL || local == NULL) return FINISH("c_abi_engine_test");
  mcdma_export_options e = MCDMA_EXPORT_OPTIONS_INIT;
  e.flags = MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE;
  CHECK(mcdma_export_ex(server, exported, "c.engine", &e) == MCDMA_OK, "export read-write");
  mcdma_remote* remote = NULL;
  CHECK(mcdma_resolve(client, NULL, "c.engine", &remote) == MCDMA_OK && remote != NULL, "resolve");
  if (remote == NULL) return FINISH("c_abi_engine_test");

  check_async(client, remote, local, exported);
  check_batches(client, remote, local, exported);
  check_exports(server, client, exported, local);

  /* Handles of one client are refused by another. */
  uint64_t moved = 0;
  CHECK(mcdma_read(server, remote, 0, exported, 0, 16, 0, &moved) == MCDMA_INVALID,
        "another client's remote");
  CHECK(strstr(mcdma_last_error(), "another client") != NULL, "says whose");
  completion c;
  reset(&c);
  CHECK(
      mcdma_write_async(client, remote, 0, exported, 0, 16, NULL, on_transfer, &c) == MCDMA_INVALID,
      "another client's buffer");

  mcdma_remote_free(remote);
  mcdma_buffer_free(local);
  mcdma_buffer_free(exported);
  mcdma_close(client);
  mcdma_close(server);
  return FINISH("c_abi_engine_test");
}
