// Child processes for the tests and the benchmarks: spawn with pipes or
// files, read stdout lines with timeouts, wait for exit with a timeout,
// stop, kill; and short commands run to completion.
//
// No leaks: a Child kills (SIGKILL) and reaps its process when destroyed,
// and every child is started with PR_SET_PDEATHSIG=SIGKILL, so even a test
// binary or a benchmark that crashes or is killed takes its children with
// it. Nothing here busy-waits: reads block in poll(2), exit waits poll a
// pidfd (or sleep 5 ms where the kernel has none).
//
// A write to a child that died fails with EPIPE only where the caller
// ignores SIGPIPE (the test binaries and role mains do, role_main.hpp).
//
// Threading: a Child belongs to the thread that made it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mcdma/status.hpp"
#include "platform/fd.hpp"

namespace mcdma::harness {

// Every deadline here runs on the steady clock.
using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;
using platform::Fd;

struct SpawnOptions {
  // For messages ("uds-server (host-b)"); empty: the program's file name
  // and its first argument.
  std::string name;
  // stdin: a pipe from this process (WriteStdin, CloseStdin); otherwise
  // /dev/null, or this process's own with `inherit`.
  bool pipe_stdin = true;
  // stdout: a pipe to this process (ReadLine and friends); otherwise
  // `stdout_path`, else where stderr goes, or this process's own with
  // `inherit`.
  bool pipe_stdout = true;
  std::string stdout_path;  // created or truncated
  // stderr: this file, appended to (emptied first with `truncate_stderr`);
  // empty: /dev/null, or this process's own with `inherit`.
  std::string stderr_path;
  bool truncate_stderr = false;
  // Streams that neither a pipe nor a file takes are this process's own
  // (a benchmark's endpoints print where it prints), not /dev/null.
  bool inherit = false;
  // Descriptors the child keeps across exec (their numbers unchanged);
  // every other descriptor of this process is close-on-exec to it.
  std::vector<int> keep_fds;
};

// A child that keeps this process's stdin and stdout and writes its stderr
// to `log` (emptied first): a benchmark's endpoints and tools.
SpawnOptions LoggedSpawn(const std::string& name, const std::string& log);

class Child {
 public:
  // Starts argv[0] (a path) with argv. Fails (kSystem, naming the call)
  // when a pipe, a file or the fork cannot be made.
  static Result<std::unique_ptr<Child>> Spawn(const std::vector<std::string>& argv,
                                              const SpawnOptions& options);
  ~Child();  // SIGKILL + reap if still running
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  const std::string& stderr_path() const { return stderr_path_; }

  // The next whole stdout line (without '\n'); nullopt on timeout or EOF.
  std::optional<std::string> ReadLine(Millis timeout);
  // Reads lines until one satisfies `match`; returns it (nullopt on timeout
  // or EOF). Every line read is kept in lines().
  std::optional<std::string> WaitForLine(const std::function<bool(const std::string&)>& match,
                                         Millis timeout);
  std::optional<std::string> WaitForPrefix(const std::string& prefix, Millis timeout) {
    return WaitForLine([&](const std::string& l) { return l.rfind(prefix, 0) == 0; }, timeout);
  }
  // Reads whatever lines are available now without waiting.
  void Drain();
  // Reads lines until EOF or timeout; true at EOF.
  bool ReadToEof(Millis timeout);
  const std::vector<std::string>& lines() const { return lines_; }
  // The last line that starts with `prefix` among lines(); empty if none.
  std::string LastLineWith(const std::string& prefix) const;

  bool WriteStdin(const std::string& text);
  void CloseStdin();

  // Waits for the process to end; its wait status, or nullopt on timeout
  // (0 ms: just a look).
  std::optional<int> WaitExit(Millis timeout);
  // Alive = not yet reaped and not a zombie.
  bool Alive();
  void Signal(int sig);
  // Sends `sig`, waits up to `grace`, then SIGKILLs; the wait status.
  int Stop(int sig, Millis grace);
  // SIGKILL and reap (idempotent).
  void Kill();
  std::optional<int> exit_status() const { return status_; }

  // Last `max_lines` lines of the stderr file, for failure messages.
  std::string StderrTail(size_t max_lines = 40) const;
  // stdout lines seen so far and the stderr tail, for failure messages.
  std::string Describe() const;

 private:
  Child() = default;
  bool FillBuffer(Millis timeout);  // false on timeout or EOF

  pid_t pid_ = -1;
  Fd pidfd_;  // readable once the process has ended; empty without pidfds
  std::string name_;
  std::string stderr_path_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  bool eof_ = false;
  std::string buf_;
  std::vector<std::string> lines_;
  std::optional<int> status_;
};

// Describes a wait status: "exit 0", "killed by SIGKILL"; "not reaped" for
// a negative one.
std::string DescribeStatus(int status);
bool ExitedWith(const std::optional<int>& status, int code);
// The exit code of a wait status; -1 unless it exited normally.
int ExitCode(int status);

// Runs a short command to completion: stdout and stderr captured.
struct CommandResult {
  std::optional<int> status;  // nullopt: it did not finish in time (killed)
  std::string out;
  std::string err;
  int exit_code() const;  // -1 unless it exited normally
  std::string Describe() const;
};
CommandResult RunCommand(const std::vector<std::string>& argv, Millis timeout);

}  // namespace mcdma::harness
