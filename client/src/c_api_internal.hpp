// Shared by the C ABI's translation units (c_api*.cpp): the handle structs
// behind mcdma.h's opaque types, error conversion, the exception guard and
// the readers of the size-carrying option structs (docs/c_api.md).
//
// Threads: handles are used from any app thread; their members are set once
// at creation and read-only after, except what the C++ objects guard.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "mcdma/client.hpp"
#include "mcdma/mcdma.h"

struct mcdma_client {
  std::unique_ptr<mcdma::Client> client;
  // What mcdma_session_info_get hands out; fixed at connect, so its strings
  // stay valid until mcdma_close.
  mcdma::SessionInfo info;
  std::string app_name;
  mcdma_session_info geometry{};  // the mailbox fields only
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

namespace mcdma::capi {

// Records `st` as this thread's last error and returns its code.
mcdma_code Fail(const Status& st);
inline mcdma_code Check(const Status& st) { return st.ok() ? MCDMA_OK : Fail(st); }
// MCDMA_INVALID with `what` as the message.
inline mcdma_code Bad(const std::string& what) { return Fail(Status(Code::kInvalid, what)); }

inline std::chrono::milliseconds Ms(uint32_t v) { return std::chrono::milliseconds(v); }

inline std::span<const std::byte> Bytes(const void* p, size_t n) {
  return {static_cast<const std::byte*>(p), n};
}

// Runs `f` and turns any exception into a code: nothing crosses the ABI.
template <typename F>
mcdma_code Guard(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Fail(Status(Code::kNoMemory, "out of memory"));
  } catch (const std::exception& e) {
    return Fail(Status(Code::kInternal, e.what()));
  } catch (...) {
    return Fail(Status(Code::kInternal, "unknown exception"));
  }
}

// The option structs as this library knows them, every field valid: the
// caller's fields where its struct_size covers them, defaults elsewhere.
// MCDMA_INVALID (last error set, naming `fn` and the struct) otherwise.
// A NULL pointer gives the defaults.
mcdma_code ReadConnectOptions(const char* fn, const mcdma_connect_options* in,
                              mcdma_connect_options* out);
mcdma_code ReadOpOptions(const char* fn, const mcdma_op_options* in, mcdma_op_options* out);
mcdma_code ReadExportOptions(const char* fn, const mcdma_export_options* in,
                             mcdma_export_options* out);
mcdma_code ReadKvExportOptions(const char* fn, const mcdma_kv_export_options* in,
                               mcdma_kv_export_options* out);
mcdma_code ReadKvImportOptions(const char* fn, const mcdma_kv_import_options* in,
                               mcdma_kv_import_options* out);
// Copies this library's `full` session info into the caller's struct as far
// as its struct_size reaches; MCDMA_INVALID on a malformed struct_size.
mcdma_code WriteSessionInfo(const char* fn, const mcdma_session_info& full,
                            mcdma_session_info* out);

}  // namespace mcdma::capi
