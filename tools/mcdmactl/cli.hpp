// The mcdmactl command line: parse, run one Admin request, print, and map the
// outcome to an exit code. Separate from main() so tests can run it in-process
// against a fake daemon and read what it printed.
//
// Exit codes are part of the interface (scripts depend on them):
//   0  the request succeeded and its output was written
//   1  failure: daemon unreachable, timed out, or it rejected the request
//   2  usage: bad flags or arguments (--help and --version exit 0)
//
// Failure: nothing throws out of RunCli except std::bad_alloc-class bugs;
// every error is a message on `err` plus an exit code.
#pragma once

#include <ostream>

namespace mcdma::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// `argv[0]` is the program name, as in main(). Replies and help go to `out`,
// errors to `err`.
int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace mcdma::tools
