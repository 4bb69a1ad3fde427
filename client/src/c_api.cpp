// The C ABI (mcdma.h): converts handles and Status at the boundary; no
// exception crosses it (allocation failure is reported as MCDMA_NO_MEMORY).
// This file: errors and versions. The rest, by concern: c_api_session.cpp
// (connecting, session info), c_api_calls.cpp (calls, notifications,
// serving), c_api_bulk.cpp (buffers, exports, transfers), c_api_options.cpp
// (the size-carrying structs). Rules: docs/c_api.md.
#include <string>

#include "c_api_internal.hpp"

namespace mcdma::capi {
namespace {
// One per thread: mcdma_last_error() is this thread's last failure.
thread_local std::string t_last_error;
}  // namespace

mcdma_code Fail(const Status& st) {
  t_last_error = st.ToString();
  return static_cast<mcdma_code>(st.code());
}

}  // namespace mcdma::capi

extern "C" {

const char* mcdma_code_name(mcdma_code code) {
  return mcdma::CodeName(static_cast<mcdma::Code>(code));
}
const char* mcdma_last_error(void) { return mcdma::capi::t_last_error.c_str(); }

uint32_t mcdma_version(void) { return MCDMA_VERSION; }
uint32_t mcdma_abi_version(void) { return MCDMA_ABI_VERSION; }

}  // extern "C"
