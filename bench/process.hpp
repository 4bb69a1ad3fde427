// Process plumbing for the benchmark: owned fds, a scratch directory, and
// child processes that are always reaped.
//
// Every benchmark endpoint is a separate process started by fork + exec of
// this same binary (a hidden `child` subcommand), so no endpoint inherits
// another's threads or state. Every wait here has a deadline, and every
// child is killed with SIGKILL if this process dies (PR_SET_PDEATHSIG), so a
// broken mechanism ends in an error row, never in a hang or a stray process.
//
// Threading: all of this is used from the orchestrator's single thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "mcdma/status.hpp"
#include "platform/fd.hpp"

namespace bench {

// A move-only owned file descriptor; -1 when empty (the platform seam's).
using mcdma::platform::Fd;

// Both ends of a pipe, created close-on-exec: a child keeps only the ends it
// is explicitly handed (see SpawnOptions::keep_fds).
struct Pipe {
  Fd read;
  Fd write;
};
mcdma::Result<Pipe> MakePipe();

// A fresh private directory (mode 0700) removed with its contents on
// destruction. Unix socket paths live here, so it stays short (/tmp).
class TempDir {
 public:
  static mcdma::Result<TempDir> Create(const std::string& prefix);
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Absolute path of the running executable (/proc/self/exe).
mcdma::Result<std::string> SelfExePath();

// Waits until `fd` is readable or hung up; kTimeout after `timeout`.
mcdma::Status WaitReadable(int fd, std::chrono::milliseconds timeout);

// Reads exactly one byte from a ready pipe: OK when it came, kPeerGone when
// the writer closed without sending it (the child died before it was ready).
mcdma::Status WaitReadyByte(int fd, std::chrono::milliseconds timeout);

// Reads everything a ready pipe carries until the writer closes it (a
// server that signalled readiness closes its end at once). kPeerGone when
// nothing came: the child died before it was ready.
mcdma::Result<std::string> WaitReadyMessage(int fd, std::chrono::milliseconds timeout);

struct SpawnOptions {
  std::string name;               // for messages, e.g. "uds server"
  std::vector<std::string> argv;  // argv[0] is the program path
  // Descriptors the child keeps across exec (their numbers are unchanged);
  // everything else the orchestrator holds is close-on-exec.
  std::vector<int> keep_fds;
  // When set, the child's stderr goes to this file (created or truncated),
  // so its reason for failing can be quoted in the report.
  std::string stderr_path;
  // When set, the child's stdout goes to this file (for tools whose answer
  // is their output: `hosts.sh up`, `mcdmactl links --json`, iperf3 -J).
  std::string stdout_path;
};

// A child process that is reaped on destruction (SIGKILL first if it is
// still running), so none outlives the run that started it.
class ChildProcess {
 public:
  static mcdma::Result<ChildProcess> Spawn(const SpawnOptions& options);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Kill(); }

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  bool running() const { return pid_ > 0; }

  // Waits for the child to exit. Returns its raw wait status; kTimeout (the
  // child keeps running) when the deadline passes (0 ms: just a look).
  mcdma::Result<int> Wait(std::chrono::milliseconds timeout);
  // Sends `sig`, waits up to `grace`, then SIGKILLs. Returns the wait status.
  int Stop(int sig, std::chrono::milliseconds grace);
  // SIGKILL and reap; no-op when not running.
  void Kill();

 private:
  ChildProcess(pid_t pid, std::string name) : pid_(pid), name_(std::move(name)) {}
  pid_t pid_ = -1;
  std::string name_;
};

// "exit 0", "exit 3", "killed by SIGSEGV" for a raw wait status.
std::string DescribeWaitStatus(int status);

}  // namespace bench
