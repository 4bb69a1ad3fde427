// The size-carrying structs of the C ABI (docs/c_api.md, "Option
// structs"): checking a caller's struct_size against this library's layout,
// reading input options and writing the session info.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>

#include "c_api_internal.hpp"

namespace mcdma::capi {
namespace {

// Where one field lies in this library's layout of a struct.
struct FieldSpan {
  size_t begin;
  size_t end;
  const char* name;
};

// NOLINTBEGIN(bugprone-macro-parentheses): T and f are a type and a member.
#define MCDMA_FIELD(T, f) \
  FieldSpan { offsetof(T, f), offsetof(T, f) + sizeof(T::f), #f }
// NOLINTEND(bugprone-macro-parentheses)

constexpr FieldSpan kConnectFields[] = {
    MCDMA_FIELD(mcdma_connect_options, struct_size),
    MCDMA_FIELD(mcdma_connect_options, socket),
    MCDMA_FIELD(mcdma_connect_options, app_name),
    MCDMA_FIELD(mcdma_connect_options, submission_entries),
    MCDMA_FIELD(mcdma_connect_options, completion_entries),
    MCDMA_FIELD(mcdma_connect_options, inbox_entries),
    MCDMA_FIELD(mcdma_connect_options, handler_threads),
    MCDMA_FIELD(mcdma_connect_options, spin_budget_us),
    MCDMA_FIELD(mcdma_connect_options, default_timeout_ms),
    MCDMA_FIELD(mcdma_connect_options, connect_timeout_ms),
    MCDMA_FIELD(mcdma_connect_options, arena_bytes),
};
constexpr FieldSpan kOpFields[] = {
    MCDMA_FIELD(mcdma_op_options, struct_size),
    MCDMA_FIELD(mcdma_op_options, timeout_ms),
    MCDMA_FIELD(mcdma_op_options, flags),
};
constexpr FieldSpan kExportFields[] = {
    MCDMA_FIELD(mcdma_export_options, struct_size),
    MCDMA_FIELD(mcdma_export_options, allowed_peers),
    MCDMA_FIELD(mcdma_export_options, allowed_peer_count),
    MCDMA_FIELD(mcdma_export_options, flags),
    MCDMA_FIELD(mcdma_export_options, offset),
    MCDMA_FIELD(mcdma_export_options, length),
    MCDMA_FIELD(mcdma_export_options, ttl_ms),
};
constexpr FieldSpan kKvExportFields[] = {
    MCDMA_FIELD(mcdma_kv_export_options, struct_size),
    MCDMA_FIELD(mcdma_kv_export_options, allowed_peers),
    MCDMA_FIELD(mcdma_kv_export_options, allowed_peer_count),
    MCDMA_FIELD(mcdma_kv_export_options, checksum),
    MCDMA_FIELD(mcdma_kv_export_options, ttl_ms),
};
constexpr FieldSpan kKvImportFields[] = {
    MCDMA_FIELD(mcdma_kv_import_options, struct_size),
    MCDMA_FIELD(mcdma_kv_import_options, expect_json),
    MCDMA_FIELD(mcdma_kv_import_options, token_digest),
    MCDMA_FIELD(mcdma_kv_import_options, deadline_ms),
    MCDMA_FIELD(mcdma_kv_import_options, open_wait_ms),
    MCDMA_FIELD(mcdma_kv_import_options, verify),
    MCDMA_FIELD(mcdma_kv_import_options, buffer_count),
    // The pointer members' own sizes are meant:
    MCDMA_FIELD(mcdma_kv_import_options, buffers),  // NOLINT(bugprone-sizeof-expression)
    MCDMA_FIELD(mcdma_kv_import_options, pool),     // NOLINT(bugprone-sizeof-expression)
};
constexpr FieldSpan kSessionFields[] = {
    MCDMA_FIELD(mcdma_session_info, struct_size),
    MCDMA_FIELD(mcdma_session_info, session_id),
    MCDMA_FIELD(mcdma_session_info, app_name),
    MCDMA_FIELD(mcdma_session_info, host_id),
    MCDMA_FIELD(mcdma_session_info, daemon_version),
    MCDMA_FIELD(mcdma_session_info, socket),
    MCDMA_FIELD(mcdma_session_info, submission_entries),
    MCDMA_FIELD(mcdma_session_info, completion_entries),
    MCDMA_FIELD(mcdma_session_info, inbox_entries),
    MCDMA_FIELD(mcdma_session_info, app_arena_bytes),
    MCDMA_FIELD(mcdma_session_info, daemon_arena_bytes),
    MCDMA_FIELD(mcdma_session_info, mailbox_bytes),
};
#undef MCDMA_FIELD

// The tables list every field in order, and no struct has tail padding: a
// field appended later starts where the struct ends today, so an older
// caller's struct_size never covers a byte the newer library would read.
template <size_t N>
constexpr bool Complete(const FieldSpan (&fields)[N], size_t size) {
  if (fields[0].begin != 0) return false;
  for (size_t i = 1; i < N; ++i) {
    if (fields[i].begin < fields[i - 1].end) return false;
  }
  return fields[N - 1].end == size;
}
static_assert(Complete(kConnectFields, sizeof(mcdma_connect_options)));
static_assert(Complete(kOpFields, sizeof(mcdma_op_options)));
static_assert(Complete(kExportFields, sizeof(mcdma_export_options)));
static_assert(Complete(kSessionFields, sizeof(mcdma_session_info)));
static_assert(Complete(kKvExportFields, sizeof(mcdma_kv_export_options)));
static_assert(Complete(kKvImportFields, sizeof(mcdma_kv_import_options)));

std::string Where(const char* fn, const char* type) { return std::string(fn) + ": " + type; }

// struct_size must reach past the first field after struct_size itself and
// must not end inside a field of this library's layout.
mcdma_code CheckSize(const char* fn, const char* type, size_t size,
                     std::span<const FieldSpan> fields) {
  if (size < fields[1].end) {
    return Bad(Where(fn, type) + ".struct_size " + std::to_string(size) +
               " is too small: it must reach past ." + fields[1].name + " (" +
               std::to_string(fields[1].end) + " bytes); set it with " + type + "_init");
  }
  for (const FieldSpan& f : fields) {
    if (f.begin < size && size < f.end) {
      return Bad(Where(fn, type) + ".struct_size " + std::to_string(size) + " ends inside ." +
                 f.name);
    }
  }
  return MCDMA_OK;
}

// Reads the caller's struct into `*out`, which holds the defaults.
template <typename T>
mcdma_code ReadSized(const char* fn, const char* type, std::span<const FieldSpan> fields,
                     const T* in, T* out) {
  if (in == nullptr) return MCDMA_OK;
  const size_t size = in->struct_size;
  if (mcdma_code c = CheckSize(fn, type, size, fields); c != MCDMA_OK) return c;
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(T); i < size; ++i) {
    if (bytes[i] != 0) {
      return Bad(Where(fn, type) + ".struct_size " + std::to_string(size) +
                 " is larger than this library's " + std::to_string(sizeof(T)) +
                 " bytes (libmcdma " MCDMA_VERSION_STRING ") and byte " + std::to_string(i) +
                 " is not zero: it sets a field this library does not know");
    }
  }
  std::memcpy(out, in, std::min(size, sizeof(T)));
  out->struct_size = sizeof(T);
  return MCDMA_OK;
}

}  // namespace

mcdma_code ReadConnectOptions(const char* fn, const mcdma_connect_options* in,
                              mcdma_connect_options* out) {
  mcdma_connect_options_init(out);
  mcdma_code c = ReadSized(fn, "mcdma_connect_options", kConnectFields, in, out);
  if (c != MCDMA_OK) return c;
  if (out->handler_threads > static_cast<uint32_t>(INT_MAX)) {
    return Bad(Where(fn, "mcdma_connect_options") + ".handler_threads " +
               std::to_string(out->handler_threads) + " is too large");
  }
  return MCDMA_OK;
}

mcdma_code ReadOpOptions(const char* fn, const mcdma_op_options* in, mcdma_op_options* out) {
  mcdma_op_options_init(out);
  mcdma_code c = ReadSized(fn, "mcdma_op_options", kOpFields, in, out);
  if (c != MCDMA_OK) return c;
  if (out->flags != 0) {
    return Bad(Where(fn, "mcdma_op_options") + ".flags " + std::to_string(out->flags) + ": ABI " +
               std::to_string(MCDMA_ABI_VERSION) + " defines no flags (must be 0)");
  }
  return MCDMA_OK;
}

mcdma_code ReadExportOptions(const char* fn, const mcdma_export_options* in,
                             mcdma_export_options* out) {
  mcdma_export_options_init(out);
  mcdma_code c = ReadSized(fn, "mcdma_export_options", kExportFields, in, out);
  if (c != MCDMA_OK) return c;
  if ((out->flags & ~(MCDMA_EXPORT_READ | MCDMA_EXPORT_WRITE)) != 0)
    return Bad(Where(fn, "mcdma_export_options") + ".flags has unknown bits");
  if (out->allowed_peers == nullptr && out->allowed_peer_count != 0)
    return Bad(Where(fn, "mcdma_export_options") + ".allowed_peers is NULL");
  for (uint32_t i = 0; i < out->allowed_peer_count; ++i) {
    if (out->allowed_peers[i] == nullptr) {
      return Bad(Where(fn, "mcdma_export_options") + ".allowed_peers[" + std::to_string(i) +
                 "] is NULL");
    }
  }
  return MCDMA_OK;
}

mcdma_code ReadKvExportOptions(const char* fn, const mcdma_kv_export_options* in,
                               mcdma_kv_export_options* out) {
  mcdma_kv_export_options_init(out);
  mcdma_code c = ReadSized(fn, "mcdma_kv_export_options", kKvExportFields, in, out);
  if (c != MCDMA_OK) return c;
  if (out->allowed_peers == nullptr && out->allowed_peer_count != 0)
    return Bad(Where(fn, "mcdma_kv_export_options") + ".allowed_peers is NULL");
  for (uint32_t i = 0; i < out->allowed_peer_count; ++i) {
    if (out->allowed_peers[i] == nullptr) {
      return Bad(Where(fn, "mcdma_kv_export_options") + ".allowed_peers[" + std::to_string(i) +
                 "] is NULL");
    }
  }
  return MCDMA_OK;
}

mcdma_code ReadKvImportOptions(const char* fn, const mcdma_kv_import_options* in,
                               mcdma_kv_import_options* out) {
  mcdma_kv_import_options_init(out);
  mcdma_code c = ReadSized(fn, "mcdma_kv_import_options", kKvImportFields, in, out);
  if (c != MCDMA_OK) return c;
  if (out->buffers == nullptr && out->buffer_count != 0)
    return Bad(Where(fn, "mcdma_kv_import_options") + ".buffers is NULL");
  for (uint32_t i = 0; i < out->buffer_count; ++i) {
    if (out->buffers[i] == nullptr) {
      return Bad(Where(fn, "mcdma_kv_import_options") + ".buffers[" + std::to_string(i) +
                 "] is NULL");
    }
  }
  return MCDMA_OK;
}

mcdma_code WriteSessionInfo(const char* fn, const mcdma_session_info& full,
                            mcdma_session_info* out) {
  if (out == nullptr) return Bad(std::string(fn) + ": info is NULL");
  const size_t size = out->struct_size;
  if (mcdma_code c = CheckSize(fn, "mcdma_session_info", size, kSessionFields); c != MCDMA_OK)
    return c;
  auto* bytes = reinterpret_cast<unsigned char*>(out);
  std::memcpy(bytes, &full, std::min(size, sizeof(full)));
  out->struct_size = size;  // the caller's, not this library's
  if (size > sizeof(full)) std::memset(bytes + sizeof(full), 0, size - sizeof(full));
  return MCDMA_OK;
}

}  // namespace mcdma::capi
