// The fabric key file (auth/src/fabric_key.cpp): the input is written to
// a key file (mode 0600, owned by us, in a private directory) and loaded
// as the daemon loads --fabric-key. A key that loads has a fingerprint of
// 8 lowercase hex digits and is exactly the 64 hex digits of the file.
#include <cctype>
#include <cstdlib>
#include <string>

#include "fuzz_support.hpp"
#include "mcdma_auth/fabric_key.hpp"

using namespace mcdma;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = mcdma::fuzz::ScratchDir() + "/fabric.key";
  if (!mcdma::fuzz::WriteFile(path, {data, size})) std::abort();
  Result<FabricKey> key = LoadFabricKey(path);
  if (!key.ok()) {
    if (key.status().code() != Code::kInvalid) std::abort();  // the file itself is fine
    return 0;
  }
  if (key->empty()) std::abort();
  std::string fp = key->Fingerprint();
  if (fp.size() != 8) std::abort();
  for (char c : fp) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) ||
        std::isupper(static_cast<unsigned char>(c)))
      std::abort();
  }
  if (size < 64) std::abort();
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < FabricKey::kBytes; ++i) {
    char hi = static_cast<char>(std::tolower(data[2 * i]));
    char lo = static_cast<char>(std::tolower(data[2 * i + 1]));
    if (hi != hex[key->data()[i] >> 4] || lo != hex[key->data()[i] & 0xf]) std::abort();
  }
  return 0;
}
