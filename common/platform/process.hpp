// Facts about the running process that each OS reports its own way
// (linux/process_linux.cpp: /proc; darwin/process_darwin.cpp: dyld).
//
// Threading: any thread.
#pragma once

#include <cstdint>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma::platform {

// The executable's file name without its directory ("vllm", "python3.11");
// "app" when the OS does not say.
std::string ProgramName();

// The limit on open files (RLIMIT_NOFILE) after raising the soft limit to
// the hard one (macOS: to at most OPEN_MAX, which setrlimit enforces).
// Returns the soft limit now in effect.
Result<uint64_t> RaiseOpenFileLimit();

// How many file descriptors the process has open now (/proc/self/fd on
// Linux, /dev/fd on macOS); -1 when it cannot be read.
int64_t OpenFileCount();

namespace internal {
// open_files.cpp: RLIMIT_NOFILE's soft limit raised to min(hard, most);
// the entries of a descriptor directory less its own.
Result<uint64_t> RaiseOpenFileLimitTo(uint64_t most);
int64_t CountOpenFilesIn(const char* dir);
}  // namespace internal

}  // namespace mcdma::platform
