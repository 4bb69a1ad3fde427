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
// The C ABI's numbers are the C++ ones (both come from codes.h; this pins
// it against an edit of either enum by hand).
#define MCDMA_SAME_CODE_(name, value, cpp, meaning)                              \
  static_assert(static_cast<int>(MCDMA_##name) == static_cast<int>(Code::cpp) && \
                    static_cast<int>(Code::cpp) == (value),                      \
                "mcdma_code MCDMA_" #name " differs from mcdma::Code::" #cpp);
MCDMA_CODE_LIST(MCDMA_SAME_CODE_)
#undef MCDMA_SAME_CODE_
#define MCDMA_SAME_REASON_(name, value, cpp, meaning)                                     \
  static_assert(static_cast<int>(MCDMA_REASON_##name) == static_cast<int>(Reason::cpp) && \
                    static_cast<int>(Reason::cpp) == (value),                             \
                "mcdma_reason MCDMA_REASON_" #name " differs from mcdma::Reason::" #cpp);
MCDMA_REASON_LIST(MCDMA_SAME_REASON_)
#undef MCDMA_SAME_REASON_
static_assert(static_cast<int>(MCDMA_MAX_CODE) == static_cast<int>(kMaxCode));
static_assert(static_cast<int>(MCDMA_MAX_REASON) == static_cast<int>(kMaxReason));

// One per thread: mcdma_last_error() and mcdma_last_reason() are this
// thread's last failure.
thread_local std::string t_last_error;
thread_local Reason t_last_reason = Reason::kNone;
}  // namespace

mcdma_code Fail(const Status& st) {
  t_last_error = st.ToString();
  t_last_reason = st.reason();
  return static_cast<mcdma_code>(st.code());
}

}  // namespace mcdma::capi

extern "C" {

const char* mcdma_code_name(mcdma_code code) {
  return mcdma::CodeName(static_cast<mcdma::Code>(code));
}
const char* mcdma_last_error(void) { return mcdma::capi::t_last_error.c_str(); }
mcdma_reason mcdma_last_reason(void) {
  return static_cast<mcdma_reason>(mcdma::capi::t_last_reason);
}
const char* mcdma_reason_name(mcdma_reason reason) {
  return mcdma::ReasonName(static_cast<mcdma::Reason>(reason));
}

uint32_t mcdma_version(void) { return MCDMA_VERSION; }
uint32_t mcdma_abi_version(void) { return MCDMA_ABI_VERSION; }

}  // extern "C"
