#include "harness/round_trips.hpp"

#include <cstring>

namespace mcdma::harness {

void FillPattern(std::span<std::byte> request) {
  for (size_t i = 0; i < request.size(); ++i) {
    request[i] = static_cast<std::byte>((i * 7 + 1) & 0xff);
  }
}

void StampIteration(std::span<std::byte> request, uint64_t iteration) {
  std::memcpy(request.data(), &iteration, std::min(request.size(), sizeof(iteration)));
}

}  // namespace mcdma::harness
