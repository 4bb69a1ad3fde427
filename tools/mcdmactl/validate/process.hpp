// Running perftest for `mcdmactl validate`: a process whose output is
// captured with a deadline, and a server left running in the background
// with a deadline of its own. POSIX (posix_spawnp), so it builds on Linux
// and macOS; perftest itself is found on PATH.
//
// Threads: any; Background's watcher is a detached thread that reaps the
// process, so nothing is left a zombie whoever returns first.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::tools::validate {

struct ProcessOutput {
  int exit_code = -1;  // -1: killed at the deadline or by a signal
  std::string out;
  std::string err;
  double wall_s = 0;
};

// Runs argv (argv[0] looked up on PATH), stdin from /dev/null, until it
// ends or `limit` passes (then SIGKILL). kNotFound when argv[0] cannot be
// started (not installed), kTimeout at the deadline (with what it printed).
Result<ProcessOutput> RunCaptured(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds limit);

// Starts argv in the background with stdout and stderr to `log`; it is
// killed (SIGKILL) if it still runs after `limit`, and reaped when it ends.
// Its pid, or kNotFound as above.
Result<pid_t> Background(const std::vector<std::string>& argv, const std::string& log,
                         std::chrono::milliseconds limit);

// A TCP port nothing listens on now (bound to port 0 and released).
Result<uint16_t> FreeTcpPort();

}  // namespace mcdma::tools::validate
