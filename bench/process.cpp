#include "process.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <thread>

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

mcdma::Status SysError(const char* call) {
  return mcdma::Status(mcdma::Code::kSystem, std::string(call) + ": " + strerror(errno));
}

// A pidfd turns "wait for exit with a deadline" into one poll(); kernels
// before 5.3 lack it, and then we poll waitpid every few milliseconds.
int OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

mcdma::Result<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return SysError("pipe2");
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

mcdma::Result<TempDir> TempDir::Create(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return SysError("mkdtemp");
  return TempDir(tmpl);
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;  // best effort: a leftover dir in /tmp is harmless
  std::filesystem::remove_all(path_, ec);
}

mcdma::Result<std::string> SelfExePath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n < 0) return SysError("readlink(/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

mcdma::Status WaitReadable(int fd, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0) return mcdma::Status::Ok();
    if (rc < 0 && errno != EINTR) return SysError("poll");
    if (rc == 0) return mcdma::Status(mcdma::Code::kTimeout, "no data within the deadline");
  }
}

mcdma::Status WaitReadyByte(int fd, std::chrono::milliseconds timeout) {
  MCDMA_RETURN_IF_ERROR(WaitReadable(fd, timeout));
  char byte = 0;
  ssize_t n;
  do {
    n = read(fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (n == 1) return mcdma::Status::Ok();
  if (n == 0) return mcdma::Status(mcdma::Code::kPeerGone, "exited before it was ready");
  return SysError("read(ready pipe)");
}

mcdma::Result<std::string> WaitReadyMessage(int fd, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string text;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    MCDMA_RETURN_IF_ERROR(WaitReadable(fd, left));
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysError("read(ready pipe)");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 4096) break;  // no server says this much; stop reading
  }
  if (text.empty()) return mcdma::Status(mcdma::Code::kPeerGone, "exited before it was ready");
  return text;
}

mcdma::Result<ChildProcess> ChildProcess::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return mcdma::Status(mcdma::Code::kInvalid, "empty argv");
  // Everything the child touches between fork and exec is prepared here:
  // after fork only async-signal-safe calls are allowed.
  std::vector<char*> argv;
  argv.reserve(options.argv.size() + 1);
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t parent = getpid();

  pid_t pid = fork();
  if (pid < 0) return SysError("fork");
  if (pid == 0) {
    // Die with the orchestrator, whatever kills it, so nothing is left over.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    for (int fd : options.keep_fds) {
      if (fcntl(fd, F_SETFD, 0) != 0) _exit(127);
    }
    if (!options.stderr_path.empty()) {
      int err = open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (err < 0 || dup2(err, STDERR_FILENO) < 0) _exit(127);
    }
    if (!options.stdout_path.empty()) {
      int out = open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (out < 0 || dup2(out, STDOUT_FILENO) < 0) _exit(127);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  return ChildProcess(pid, options.name.empty() ? options.argv[0] : options.name);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), name_(std::move(other.name_)) {
  other.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Kill();
    pid_ = other.pid_;
    name_ = std::move(other.name_);
    other.pid_ = -1;
  }
  return *this;
}

mcdma::Result<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return mcdma::Status(mcdma::Code::kInvalid, "no child to wait for");
  auto deadline = Clock::now() + timeout;
  Fd pidfd(OpenPidFd(pid_));
  for (;;) {
    int status = 0;
    pid_t rc = waitpid(pid_, &status, WNOHANG);
    if (rc == pid_) {
      pid_ = -1;
      return status;
    }
    if (rc < 0 && errno != EINTR) return SysError("waitpid");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return mcdma::Status(mcdma::Code::kTimeout, name_ + " still running");
    if (pidfd.valid()) {
      pollfd p{pidfd.get(), POLLIN, 0};
      (void)poll(&p, 1, static_cast<int>(left.count()));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(5)));
    }
  }
}

int ChildProcess::Stop(int sig, std::chrono::milliseconds grace) {
  if (pid_ <= 0) return 0;
  kill(pid_, sig);
  auto status = Wait(grace);
  if (status.ok()) return *status;
  kill(pid_, SIGKILL);
  auto killed = Wait(std::chrono::seconds(5));
  return killed.ok() ? *killed : -1;
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

std::string DescribeWaitStatus(int status) {
  if (status < 0) return "not reaped";
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)).c_str());
  }
  return "status " + std::to_string(status);
}

}  // namespace bench
