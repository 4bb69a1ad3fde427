// Where `mcdmactl doctor` gets DarwinInputs on a Mac: it runs rdma_ctl,
// kmutil, networksetup and launchctl (each bounded in time and output) and
// lists the interface addresses with getifaddrs(). Compiled on every
// platform (RunCommand and ListInterfaceAddresses are POSIX and tested on
// Linux); doctor calls GatherDarwinInputs only when kHostIsMacOS.
//
// Failure: never fails; a tool that is missing, cannot be started, hangs or
// floods is that CommandOutput's status, a failed getifaddrs() the
// InterfacesInput's status.
// Threads: doctor's thread. Each command's pipes are made close-on-exec
// right after pipe(), so another thread spawning at that moment could
// inherit them (mcdmactl spawns from one thread only).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "doctor/darwin.hpp"

namespace mcdma::tools::doctor {

// Where the tools are looked for, in order: absolute paths only, so neither
// $PATH nor the caller's environment picks what runs.
inline constexpr const char* kToolDirs[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin"};

// The first kToolDirs entry holding an executable `name`; "" when none does.
std::string FindTool(const std::string& name);

// Runs argv[0] (an absolute path) with argv[1..], stdin from /dev/null and
// the environment PATH=/usr/bin:/bin:/usr/sbin:/sbin, LC_ALL=C (so the output
// is not localized), and collects stdout and stderr. The child is killed
// (SIGKILL) once `timeout` has passed or it has printed more than
// `max_bytes` on the two together; the status then says which. `command`
// names it in messages.
CommandOutput RunCommand(const std::string& command, const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout, size_t max_bytes);

// Every IPv4 and IPv6 address of every interface, numeric.
InterfacesInput ListInterfaceAddresses();

// The macOS commands, 5 s and 1 MiB each, and the interfaces.
DarwinInputs GatherDarwinInputs();

}  // namespace mcdma::tools::doctor
