// Which operating system this mcdmactl was built for (platform/os.hpp:
// platform::kOs). Doctor picks the macOS checks at run time from
// DoctorInputs::host_os, so both sets are compiled, and unit-tested, on
// every platform; other Unix hosts get the Linux checks and wording.
//
// Threads: constants only.
#pragma once

#include "platform/os.hpp"

namespace mcdma::tools::doctor {

inline constexpr bool kHostIsMacOS = platform::kOs == platform::Os::kMacOS;

}  // namespace mcdma::tools::doctor
