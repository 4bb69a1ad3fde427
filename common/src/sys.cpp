#include "mcdma_internal/sys.hpp"

#include <openssl/rand.h>

#include <cstring>
#include <stdexcept>
#include <vector>

namespace mcdma {

Status SysError(const char* call, int err, const std::string& detail) {
  std::string msg =
      std::string(call) + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")";
  if (!detail.empty()) msg += ": " + detail;
  return Status(Code::kSystem, std::move(msg));
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    // The CSPRNG failing is not recoverable: a predictable name or token
    // would be a security hole, so refuse to go on.
    throw std::runtime_error("RAND_bytes failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace mcdma
