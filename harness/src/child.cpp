#include "harness/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness/files.hpp"

namespace mcdma::harness {
namespace {

Millis Left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  return left.count() < 0 ? Millis(0) : left;
}

Status SpawnError(const std::string& call) {
  return Status(Code::kSystem, call + ": " + std::strerror(errno));
}

// A pidfd turns "wait for exit with a deadline" into one poll(); kernels
// before 5.3 lack it, and then the wait sleeps 5 ms between looks.
int OpenPidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// The descriptors a spawn opens before fork; closed (here) after it.
struct SpawnFds {
  Fd in_read, in_write;    // stdin pipe
  Fd out_read, out_write;  // stdout pipe
  Fd err_file, out_file, null;
};

Status OpenSpawnFds(const SpawnOptions& options, SpawnFds& fds) {
  int p[2];
  if (options.pipe_stdin) {
    if (pipe2(p, O_CLOEXEC) != 0) return SpawnError("pipe2");
    fds.in_read = Fd(p[0]);
    fds.in_write = Fd(p[1]);
  }
  if (options.pipe_stdout) {
    if (pipe2(p, O_CLOEXEC) != 0) return SpawnError("pipe2");
    fds.out_read = Fd(p[0]);
    fds.out_write = Fd(p[1]);
  }
  if (!options.stderr_path.empty()) {
    int mode = options.truncate_stderr ? O_TRUNC : O_APPEND;
    fds.err_file =
        Fd(open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | mode, 0644));
    if (!fds.err_file.valid()) return SpawnError("open " + options.stderr_path);
  }
  if (!options.pipe_stdout && !options.stdout_path.empty()) {
    fds.out_file =
        Fd(open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fds.out_file.valid()) return SpawnError("open " + options.stdout_path);
  }
  fds.null = Fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!fds.null.valid()) return SpawnError("open /dev/null");
  return Status::Ok();
}

}  // namespace

SpawnOptions LoggedSpawn(const std::string& name, const std::string& log) {
  SpawnOptions o;
  o.name = name;
  o.pipe_stdin = o.pipe_stdout = false;  // this process's own, with `inherit`
  o.inherit = o.truncate_stderr = true;
  o.stderr_path = log;
  return o;
}

Result<std::unique_ptr<Child>> Child::Spawn(const std::vector<std::string>& argv,
                                            const SpawnOptions& options) {
  if (argv.empty()) return Status(Code::kInvalid, "empty argv");
  SpawnFds fds;
  MCDMA_RETURN_IF_ERROR(OpenSpawnFds(options, fds));
  // Where each standard stream of the child comes from; -1: this process's.
  const int child_in = options.pipe_stdin ? fds.in_read.get()
                       : options.inherit  ? -1
                                          : fds.null.get();
  const int child_err = fds.err_file.valid() ? fds.err_file.get()
                        : options.inherit    ? -1
                                             : fds.null.get();
  const int child_out = options.pipe_stdout    ? fds.out_write.get()
                        : fds.out_file.valid() ? fds.out_file.get()
                        : options.inherit      ? -1
                                               : child_err;
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls (the caller may have other threads).
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Die with the parent, whatever kills it, so nothing is left over.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    for (int fd : options.keep_fds) {
      if (fcntl(fd, F_SETFD, 0) != 0) _exit(127);
    }
    if (child_in >= 0) dup2(child_in, 0);
    if (child_out >= 0) dup2(child_out, 1);
    if (child_err >= 0) dup2(child_err, 2);
    // A new process group would hide it from ctest's kill; keep ours. Undo
    // an ignored SIGPIPE so the child starts with default signals.
    signal(SIGPIPE, SIG_DFL);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  if (pid < 0) return SpawnError("fork");
  std::unique_ptr<Child> c(new Child());
  c->pid_ = pid;
  c->pidfd_ = Fd(OpenPidFd(pid));
  c->name_ = !options.name.empty() ? options.name
                                   : std::filesystem::path(argv[0]).filename().string() +
                                         (argv.size() > 1 ? " " + argv[1] : "");
  c->stderr_path_ = options.stderr_path;
  c->stdin_fd_ = fds.in_write.Release();
  c->stdout_fd_ = fds.out_read.Release();
  if (c->stdout_fd_ >= 0) fcntl(c->stdout_fd_, F_SETFL, fcntl(c->stdout_fd_, F_GETFL) | O_NONBLOCK);
  if (!options.pipe_stdout) c->eof_ = true;
  return c;
}

Child::~Child() {
  Kill();
  CloseStdin();
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

bool Child::FillBuffer(Millis timeout) {
  if (eof_ || stdout_fd_ < 0) return false;
  auto deadline = Clock::now() + timeout;
  while (true) {
    char chunk[4096];
    ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
      return true;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      eof_ = true;
      return false;
    }
    Millis left = Left(deadline);
    if (left.count() == 0) return false;
    pollfd p{stdout_fd_, POLLIN, 0};
    poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
  }
}

std::optional<std::string> Child::ReadLine(Millis timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      lines_.push_back(line);
      return line;
    }
    if (!FillBuffer(Left(deadline))) {
      if (eof_ && !buf_.empty()) {  // a last line without '\n'
        std::string line;
        line.swap(buf_);
        lines_.push_back(line);
        return line;
      }
      return std::nullopt;
    }
  }
}

std::optional<std::string> Child::WaitForLine(const std::function<bool(const std::string&)>& match,
                                              Millis timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    auto line = ReadLine(Left(deadline));
    if (!line) return std::nullopt;
    if (match(*line)) return line;
  }
}

void Child::Drain() {
  while (ReadLine(Millis(0))) {
  }
}

bool Child::ReadToEof(Millis timeout) {
  auto deadline = Clock::now() + timeout;
  while (ReadLine(Left(deadline))) {
  }
  return eof_;
}

std::string Child::LastLineWith(const std::string& prefix) const {
  for (auto it = lines_.rbegin(); it != lines_.rend(); ++it) {
    if (it->rfind(prefix, 0) == 0) return *it;
  }
  return "";
}

bool Child::WriteStdin(const std::string& text) {
  if (stdin_fd_ < 0) return false;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(stdin_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void Child::CloseStdin() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

std::optional<int> Child::WaitExit(Millis timeout) {
  if (status_) return status_;
  auto deadline = Clock::now() + timeout;
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      pidfd_.Reset();
      return status_;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;  // not our child (cannot happen)
    Millis left = Left(deadline);
    if (left.count() == 0) return std::nullopt;
    if (pidfd_.valid()) {
      pollfd p{pidfd_.get(), POLLIN, 0};
      poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    } else {
      std::this_thread::sleep_for(std::min(left, Millis(5)));
    }
  }
}

bool Child::Alive() {
  if (status_) return false;
  return !WaitExit(Millis(0)).has_value();
}

void Child::Signal(int sig) {
  if (!status_ && pid_ > 0) kill(pid_, sig);
}

int Child::Stop(int sig, Millis grace) {
  if (status_) return *status_;
  Signal(sig);
  if (auto st = WaitExit(grace)) return *st;
  Kill();
  return status_.value_or(-1);
}

void Child::Kill() {
  if (status_ || pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st = 0;
  while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  status_ = st;
  pidfd_.Reset();
}

std::string Child::StderrTail(size_t max_lines) const {
  if (stderr_path_.empty()) return "";
  std::ifstream in(stderr_path_);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (tail.size() > max_lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += "    " + l + "\n";
  return out;
}

std::string Child::Describe() const {
  std::ostringstream os;
  os << "--- " << name_ << " (pid " << pid_ << ", "
     << (status_ ? DescribeStatus(*status_) : std::string("running")) << ")\n";
  size_t from = lines_.size() > 30 ? lines_.size() - 30 : 0;
  if (from > 0) os << "  stdout: (" << from << " earlier lines)\n";
  for (size_t i = from; i < lines_.size(); ++i) os << "  stdout: " << lines_[i] << "\n";
  std::string err = StderrTail();
  if (!err.empty()) os << "  stderr (tail):\n" << err;
  return os.str();
}

std::string DescribeStatus(int status) {
  if (status < 0) return "not reaped";
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)).c_str());
  }
  return "status " + std::to_string(status);
}

bool ExitedWith(const std::optional<int>& status, int code) {
  return status && ExitCode(*status) == code;
}

int ExitCode(int status) { return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

int CommandResult::exit_code() const { return status ? ExitCode(*status) : -1; }

std::string CommandResult::Describe() const {
  return (status ? DescribeStatus(*status) : std::string("did not finish in time")) +
         "\nstdout:\n" + out + "\nstderr:\n" + err;
}

CommandResult RunCommand(const std::vector<std::string>& argv, Millis timeout) {
  CommandResult r;
  char err_template[] = "/tmp/mcdma-cmd-XXXXXX";
  int fd = mkstemp(err_template);
  if (fd < 0) {
    r.err = std::string("mkstemp: ") + std::strerror(errno);
    return r;
  }
  close(fd);
  SpawnOptions o;
  o.stderr_path = err_template;
  o.pipe_stdin = false;
  auto child = Child::Spawn(argv, o);
  if (!child.ok()) {
    unlink(err_template);
    r.err = "spawn: " + child.status().message();
    return r;
  }
  Child& c = **child;
  auto deadline = Clock::now() + timeout;
  c.ReadToEof(Left(deadline));
  r.status = c.WaitExit(Left(deadline));
  if (!r.status) c.Kill();
  for (const auto& l : c.lines()) r.out += l + "\n";
  r.err = ReadFile(err_template);
  unlink(err_template);
  return r;
}

}  // namespace mcdma::harness
