// Which operating system this code was built for: the one place outside
// the per-OS files that asks the compiler. Code that words or picks things
// per OS at run time (mcdmactl doctor's checks) reads kOs, so both
// variants are compiled, and unit-tested, on every platform.
#pragma once

#include <cstdint>

namespace mcdma::platform {

enum class Os : uint8_t { kLinux, kMacOS };

#if defined(__APPLE__)
inline constexpr Os kOs = Os::kMacOS;
#else
inline constexpr Os kOs = Os::kLinux;
#endif

}  // namespace mcdma::platform
