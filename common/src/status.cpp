#include "mcdma/status.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>

namespace mcdma {
namespace {

#define MCDMA_NAME_OF_(name, value, cpp, meaning) #name,
constexpr std::array<const char*, internal::kCodeCount> kCodeNames = {
    MCDMA_CODE_LIST(MCDMA_NAME_OF_)};
constexpr std::array<const char*, internal::kReasonCount> kReasonNames = {
    MCDMA_REASON_LIST(MCDMA_NAME_OF_)};
#undef MCDMA_NAME_OF_

template <size_t N>
size_t IndexOf(const std::array<const char*, N>& names, std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return i;
  }
  return N;
}

}  // namespace

const char* CodeName(Code code) {
  auto i = static_cast<size_t>(code);
  return i < kCodeNames.size() ? kCodeNames[i] : "UNKNOWN";
}

Code CodeFromName(std::string_view name) {
  size_t i = IndexOf(kCodeNames, name);
  return i < kCodeNames.size() ? static_cast<Code>(i) : Code::kInternal;
}

const char* ReasonName(Reason reason) {
  auto i = static_cast<size_t>(reason);
  return i < kReasonNames.size() ? kReasonNames[i] : "UNKNOWN";
}

Reason ReasonFromName(std::string_view name) {
  size_t i = IndexOf(kReasonNames, name);
  return i < kReasonNames.size() ? static_cast<Reason>(i) : Reason::kNone;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = CodeName(code_);
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

namespace internal {
void ValueOfError(const Status& status) {
  std::fprintf(stderr, "mcdma: Result::value() called on an error: %s\n",
               status.ToString().c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace mcdma
