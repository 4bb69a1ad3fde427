// Child processes for the integration tests: spawn with pipes, read stdout
// lines with timeouts, wait for exit with a timeout, kill.
//
// No leaks: a Child kills (SIGKILL) and reaps its process when destroyed, and
// every child is started with PR_SET_PDEATHSIG=SIGKILL, so even a test binary
// that crashes or is killed by ctest's timeout takes its children with it.
// Nothing here busy-waits: reads block in poll(2), exit waits sleep 5 ms.
//
// Threading: a Child belongs to the thread that made it (the test body).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mcdma::itest {

using Millis = std::chrono::milliseconds;

struct SpawnOptions {
  // Where the child's stderr goes (a file; appended to). Empty: /dev/null.
  std::string stderr_path;
  // Pipe the child's stdout to us (ReadLine); otherwise stdout goes with stderr.
  bool pipe_stdout = true;
  // Pipe our end to the child's stdin (WriteStdin/CloseStdin); otherwise /dev/null.
  bool pipe_stdin = true;
};

class Child {
 public:
  // Starts argv[0] (a path) with argv. nullptr with `error` set on failure.
  static std::unique_ptr<Child> Spawn(const std::vector<std::string>& argv,
                                      const SpawnOptions& options, std::string* error);
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

  // Waits for the process to end; its wait status, or nullopt on timeout.
  std::optional<int> WaitExit(Millis timeout);
  // Alive = not yet reaped and not a zombie.
  bool Alive();
  void Signal(int sig);
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
  std::string name_;
  std::string stderr_path_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  bool eof_ = false;
  std::string buf_;
  std::vector<std::string> lines_;
  std::optional<int> status_;
};

// Describes a wait status: "exit 0", "signal 9 (Killed)".
std::string DescribeStatus(int status);
bool ExitedWith(const std::optional<int>& status, int code);

// Runs a short command to completion: stdout and stderr captured.
struct CommandResult {
  std::optional<int> status;  // nullopt: it did not finish in time (killed)
  std::string out;
  std::string err;
  int exit_code() const;  // -1 unless it exited normally
  std::string Describe() const;
};
CommandResult RunCommand(const std::vector<std::string>& argv, Millis timeout);

// A fresh private directory (mkdtemp) removed with everything in it on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);

}  // namespace mcdma::itest
