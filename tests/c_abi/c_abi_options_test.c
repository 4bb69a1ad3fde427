/* The C ABI's versioning and size-carrying structs, from C99 against a real
 * daemon (MCDMA_SOCKET): mcdma_version() against the header's MCDMA_VERSION,
 * connecting with a whole, an older (smaller), a newer (larger) and a
 * malformed mcdma_connect_options, the session info in each of those sizes,
 * and the named errors of NULL arguments. Exits 0 only if every check
 * passed. */
#include <stdlib.h>
#include <string.h>

#include "c_abi_check.h"

/* A caller built against a later header: one field appended. */
typedef struct newer_connect_options {
  mcdma_connect_options base;
  uint64_t future_field;
} newer_connect_options;

typedef struct newer_session_info {
  mcdma_session_info base;
  uint64_t future_field;
} newer_session_info;

static int is_power_of_two(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

static void check_versions(void) {
  char text[32];
  CHECK(mcdma_version() == MCDMA_VERSION, "mcdma_version() %u != MCDMA_VERSION %d",
        (unsigned)mcdma_version(), MCDMA_VERSION);
  CHECK(mcdma_abi_version() == MCDMA_ABI_VERSION, "mcdma_abi_version()");
  CHECK(MCDMA_VERSION ==
            MCDMA_VERSION_MAJOR * 10000 + MCDMA_VERSION_MINOR * 100 + MCDMA_VERSION_PATCH,
        "MCDMA_VERSION packs major, minor and patch");
  snprintf(text, sizeof(text), "%d.%d.%d", MCDMA_VERSION_MAJOR, MCDMA_VERSION_MINOR,
           MCDMA_VERSION_PATCH);
  CHECK(strcmp(text, MCDMA_VERSION_STRING) == 0, "MCDMA_VERSION_STRING %s", MCDMA_VERSION_STRING);
}

static void check_initializers(void) {
  mcdma_connect_options a = MCDMA_CONNECT_OPTIONS_INIT;
  mcdma_connect_options b;
  memset(&b, 0xAB, sizeof(b));
  mcdma_connect_options_init(&b);
  CHECK(a.struct_size == sizeof(mcdma_connect_options) && b.struct_size == a.struct_size,
        "struct_size is the header's sizeof");
  CHECK(a.socket == NULL && b.socket == NULL && a.app_name == NULL && b.app_name == NULL,
        "string defaults are NULL");
  CHECK(a.spin_budget_us == 50 && b.spin_budget_us == 50, "spin budget default");
  CHECK(a.default_timeout_ms == 30000 && b.default_timeout_ms == 30000, "default timeout");
  CHECK(a.connect_timeout_ms == 10000 && b.connect_timeout_ms == 10000, "connect timeout");
  CHECK(b.submission_entries == 0 && b.completion_entries == 0 && b.inbox_entries == 0 &&
            b.handler_threads == 0 && b.arena_bytes == 0,
        "the rest is zero (the daemon's defaults)");
  mcdma_op_options op = MCDMA_OP_OPTIONS_INIT;
  CHECK(op.struct_size == sizeof(op) && op.timeout_ms == 0 && op.flags == 0, "op options init");
  mcdma_export_options ex = MCDMA_EXPORT_OPTIONS_INIT;
  CHECK(ex.struct_size == sizeof(ex) && ex.flags == MCDMA_EXPORT_READ && ex.length == 0,
        "export options init");
}

/* A session with the daemon's default geometry, for comparison. */
static mcdma_session_info default_info(mcdma_client** keep) {
  mcdma_session_info info;
  mcdma_session_info_init(&info);
  CHECK(mcdma_connect(NULL, "c-default", keep) == MCDMA_OK, "plain connect");
  if (*keep != NULL)
    CHECK(mcdma_session_info_get(*keep, &info) == MCDMA_OK, "default session info");
  CHECK(is_power_of_two(info.submission_entries) && is_power_of_two(info.completion_entries) &&
            is_power_of_two(info.inbox_entries),
        "the daemon's default rings are powers of two");
  CHECK(info.app_arena_bytes > 0 && info.app_arena_bytes == info.daemon_arena_bytes,
        "the default arena halves");
  return info;
}

static void check_whole_struct(const mcdma_session_info* dflt) {
  mcdma_connect_options o;
  mcdma_connect_options_init(&o);
  o.app_name = "c-options";
  o.submission_entries = 64;
  o.completion_entries = 32;
  o.inbox_entries = 16;
  o.arena_bytes = 1u << 20;
  o.handler_threads = 1;
  mcdma_client* c = NULL;
  CHECK(mcdma_connect_ex(&o, &c) == MCDMA_OK && c != NULL, "connect_ex with every field");
  if (c == NULL) return;
  mcdma_session_info info;
  mcdma_session_info_init(&info);
  CHECK(mcdma_session_info_get(c, &info) == MCDMA_OK, "session info");
  CHECK(info.struct_size == sizeof(info), "struct_size is left as the caller set it");
  CHECK(info.session_id != 0 && info.session_id != dflt->session_id, "session id %llu",
        (unsigned long long)info.session_id);
  CHECK(info.app_name != NULL && strcmp(info.app_name, "c-options") == 0, "app name");
  CHECK(info.socket != NULL && strcmp(info.socket, getenv("MCDMA_SOCKET")) == 0, "socket %s",
        info.socket ? info.socket : "(null)");
  CHECK(info.daemon_version != NULL && strcmp(info.daemon_version, MCDMA_VERSION_STRING) == 0,
        "daemon version %s", info.daemon_version ? info.daemon_version : "(null)");
  CHECK(info.host_id != NULL && info.host_id[0] != '\0' && strcmp(info.host_id, dflt->host_id) == 0,
        "host id");
  CHECK(info.submission_entries == 64 && info.completion_entries == 32 && info.inbox_entries == 16,
        "the requested rings: %u %u %u", (unsigned)info.submission_entries,
        (unsigned)info.completion_entries, (unsigned)info.inbox_entries);
  CHECK(info.app_arena_bytes == 512u * 1024 && info.daemon_arena_bytes == 512u * 1024,
        "the requested arena, halved: %llu", (unsigned long long)info.app_arena_bytes);
  CHECK(info.mailbox_bytes > info.app_arena_bytes + info.daemon_arena_bytes, "mailbox bytes");
  mcdma_close(c);
}

static void check_older_caller(const mcdma_session_info* dflt) {
  /* An older header's struct ended after app_name: the geometry fields
   * past struct_size are garbage the library must not read. */
  mcdma_connect_options o;
  mcdma_connect_options_init(&o);
  o.struct_size = offsetof(mcdma_connect_options, submission_entries);
  o.app_name = "c-older";
  o.submission_entries = 7; /* invalid if read: not a power of two */
  o.completion_entries = 12345;
  mcdma_client* c = NULL;
  CHECK(mcdma_connect_ex(&o, &c) == MCDMA_OK && c != NULL, "connect_ex with a smaller struct");
  if (c == NULL) return;
  /* An older caller's session info: the library writes only what fits. */
  unsigned char raw[sizeof(mcdma_session_info)];
  memset(raw, 0xEE, sizeof(raw));
  mcdma_session_info* info = (mcdma_session_info*)raw;
  info->struct_size = offsetof(mcdma_session_info, socket);
  CHECK(mcdma_session_info_get(c, info) == MCDMA_OK, "smaller session info");
  CHECK(info->struct_size == offsetof(mcdma_session_info, socket), "struct_size kept");
  CHECK(info->app_name != NULL && strcmp(info->app_name, "c-older") == 0, "older app name");
  CHECK(info->session_id != 0, "older session id");
  size_t end = offsetof(mcdma_session_info, socket);
  int untouched = 1;
  for (size_t i = end; i < sizeof(raw); i++) untouched &= raw[i] == 0xEE;
  CHECK(untouched, "no byte past struct_size written");
  mcdma_session_info full;
  mcdma_session_info_init(&full);
  CHECK(mcdma_session_info_get(c, &full) == MCDMA_OK, "full info of the older session");
  CHECK(full.submission_entries == dflt->submission_entries &&
            full.completion_entries == dflt->completion_entries &&
            full.inbox_entries == dflt->inbox_entries &&
            full.app_arena_bytes == dflt->app_arena_bytes,
        "fields past struct_size took the defaults: %u %u", (unsigned)full.submission_entries,
        (unsigned)dflt->submission_entries);
  mcdma_close(c);
}

static void check_newer_caller(void) {
  newer_connect_options n;
  memset(&n, 0, sizeof(n));
  mcdma_connect_options_init(&n.base);
  n.base.struct_size = sizeof(n);
  n.base.app_name = "c-newer";
  mcdma_client* c = NULL;
  CHECK(mcdma_connect_ex(&n.base, &c) == MCDMA_OK && c != NULL,
        "a larger struct whose unknown field is zero");
  if (c != NULL) {
    newer_session_info info;
    memset(&info, 0xEE, sizeof(info));
    info.base.struct_size = sizeof(info);
    CHECK(mcdma_session_info_get(c, &info.base) == MCDMA_OK, "larger session info");
    CHECK(info.future_field == 0, "bytes past the library's fields are zeroed");
    CHECK(info.base.struct_size == sizeof(info), "larger struct_size kept");
    CHECK(strcmp(info.base.app_name, "c-newer") == 0, "newer app name");
    mcdma_close(c);
  }
  n.future_field = 1;
  c = NULL;
  CHECK(mcdma_connect_ex(&n.base, &c) == MCDMA_INVALID && c == NULL,
        "a larger struct that sets an unknown field");
  CHECK(strstr(mcdma_last_error(), "does not know") != NULL &&
            strstr(mcdma_last_error(), "mcdma_connect_options") != NULL,
        "the error names the struct and the unknown field");
}

static void check_bad_sizes(void) {
  mcdma_connect_options o;
  mcdma_client* c = NULL;
  mcdma_connect_options_init(&o);
  o.struct_size = 0;
  CHECK(mcdma_connect_ex(&o, &c) == MCDMA_INVALID && c == NULL, "struct_size 0");
  CHECK(strstr(mcdma_last_error(), "struct_size 0 is too small") != NULL, "names the size");
  o.struct_size = offsetof(mcdma_connect_options, socket);
  CHECK(mcdma_connect_ex(&o, &c) == MCDMA_INVALID, "struct_size without any field");
  o.struct_size = offsetof(mcdma_connect_options, app_name) + 1;
  CHECK(mcdma_connect_ex(&o, &c) == MCDMA_INVALID, "struct_size inside a field");
  CHECK(strstr(mcdma_last_error(), "ends inside .app_name") != NULL, "names the field");
  mcdma_session_info info;
  mcdma_session_info_init(&info);
  info.struct_size = 3;
  CHECK(mcdma_session_info_get(NULL, &info) == MCDMA_INVALID, "info of a NULL client");
  mcdma_connect_options_init(&o);
  o.submission_entries = 7;
  CHECK(mcdma_connect_ex(&o, &c) == MCDMA_INVALID && c == NULL, "the daemon refuses 7 entries");
  CHECK(strstr(mcdma_last_error(), "submission_entries") != NULL, "names the field");
  mcdma_connect_options_init(&o);
  o.socket = "/tmp/mcdma-c-abi-no-such-dir/rpcd.sock";
  o.connect_timeout_ms = 200;
  CHECK(mcdma_connect_ex(&o, &c) == MCDMA_UNAVAILABLE && c == NULL, "no daemon there");
  CHECK(mcdma_connect_ex(&o, NULL) == MCDMA_INVALID, "NULL out");
  CHECK(strstr(mcdma_last_error(), "mcdma_connect_ex: out is NULL") != NULL, "names out");
}

static void check_session_info_errors(mcdma_client* c) {
  mcdma_session_info info;
  mcdma_session_info_init(&info);
  CHECK(mcdma_session_info_get(c, NULL) == MCDMA_INVALID, "NULL info");
  info.struct_size = 0;
  CHECK(mcdma_session_info_get(c, &info) == MCDMA_INVALID, "info struct_size 0");
  CHECK(strstr(mcdma_last_error(), "mcdma_session_info") != NULL, "names the struct");
  info.struct_size = offsetof(mcdma_session_info, app_name) + 2;
  CHECK(mcdma_session_info_get(c, &info) == MCDMA_INVALID, "info size inside a field");
}

int main(void) {
  check_versions();
  check_initializers();
  mcdma_client* dflt_client = NULL;
  mcdma_session_info dflt = default_info(&dflt_client);
  if (dflt_client == NULL) return FINISH("c_abi_options_test");
  check_whole_struct(&dflt);
  check_older_caller(&dflt);
  check_newer_caller();
  check_bad_sizes();
  check_session_info_errors(dflt_client);
  mcdma_client* c = NULL;
  CHECK(mcdma_connect_ex(NULL, &c) == MCDMA_OK && c != NULL, "NULL options: every default");
  mcdma_close(c);
  mcdma_close(dflt_client);
  return FINISH("c_abi_options_test");
}
