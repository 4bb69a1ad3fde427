#include "mcdma/status.hpp"

#include <array>

namespace mcdma {
namespace {
constexpr std::array<const char*, 16> kNames = {
    "OK",          "INVALID",  "OUT_OF_RANGE", "NOT_FOUND", "PERMISSION_DENIED", "ALREADY_EXISTS",
    "NO_MEMORY",   "TIMEOUT",  "LINK_DOWN",    "PEER_GONE", "REVOKED",           "CANCELLED",
    "UNAVAILABLE", "INTERNAL", "BUSY",         "SYSTEM"};
}  // namespace

const char* CodeName(Code code) {
  auto i = static_cast<size_t>(code);
  return i < kNames.size() ? kNames[i] : "UNKNOWN";
}

Code CodeFromName(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<Code>(i);
  }
  return Code::kInternal;
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

}  // namespace mcdma
