// Facts about the running process that each OS reports its own way
// (linux/process_linux.cpp: /proc; darwin/process_darwin.cpp: dyld).
//
// Threading: any thread.
#pragma once

#include <string>

namespace mcdma::platform {

// The executable's file name without its directory ("vllm", "python3.11");
// "app" when the OS does not say.
std::string ProgramName();

}  // namespace mcdma::platform
