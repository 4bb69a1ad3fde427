// Errors cross gRPC as "CODE_NAME: message" (daemon/src/grpc_status.hpp) so
// the receiver recovers the exact mcdma Code. One parser for every reader:
// libmcdma, mcdmactl and a daemon reading its peers' answers.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mcdma/status.hpp"

namespace mcdma {

// The Status a "CODE_NAME: message" text carries; nullopt when the text does
// not start with a known error code name (it came from gRPC itself).
inline std::optional<Status> StatusFromCodedMessage(std::string_view text) {
  const size_t colon = text.find(": ");
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view name = text.substr(0, colon);
  const Code code = CodeFromName(name);
  if (code == Code::kOk || (code == Code::kInternal && name != "INTERNAL")) return std::nullopt;
  return Status(code, std::string(text.substr(colon + 2)));
}

}  // namespace mcdma
