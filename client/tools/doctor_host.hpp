// Which operating system this mcdmactl was built for (platform/os.hpp).
// Doctor picks the macOS checks at run time from
// kHostOs, so both sets are compiled, and unit-tested, on every platform.
//
// Threads: constants only.
#pragma once

#include <cstdint>

#include "platform/os.hpp"

namespace mcdma::tools::doctor {

// kLinux is also what other Unix hosts get: the Linux checks and wording.
enum class HostOs : uint8_t { kLinux, kMacOS };

inline constexpr HostOs kHostOs =
    platform::kOs == platform::Os::kMacOS ? HostOs::kMacOS : HostOs::kLinux;

inline constexpr bool kHostIsMacOS = kHostOs == HostOs::kMacOS;

}  // namespace mcdma::tools::doctor
