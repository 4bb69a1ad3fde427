#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace mcdma::itest {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A write to a child that died must fail with EPIPE, not kill the test.
[[maybe_unused]] const bool kIgnoreSigpipe = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

Millis Left(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - SteadyClock::now());
  return left.count() < 0 ? Millis(0) : left;
}

}  // namespace

std::unique_ptr<Child> Child::Spawn(const std::vector<std::string>& argv,
                                    const SpawnOptions& options, std::string* error) {
  if (argv.empty()) {
    *error = "empty argv";
    return nullptr;
  }
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  if ((options.pipe_stdin && pipe2(in, O_CLOEXEC) != 0) ||
      (options.pipe_stdout && pipe2(out, O_CLOEXEC) != 0)) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    for (int fd : {in[0], in[1], out[0], out[1]}) {
      if (fd >= 0) close(fd);
    }
    return nullptr;
  }
  std::string err_path = options.stderr_path.empty() ? "/dev/null" : options.stderr_path;
  int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (err_fd < 0 || null_fd < 0) {
    *error = "open " + err_path + ": " + std::strerror(errno);
    for (int fd : {in[0], in[1], out[0], out[1], err_fd, null_fd}) {
      if (fd >= 0) close(fd);
    }
    return nullptr;
  }
  // Everything the child needs is prepared before fork: after it, only
  // async-signal-safe calls (the test process has other threads).
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    dup2(options.pipe_stdin ? in[0] : null_fd, 0);
    dup2(options.pipe_stdout ? out[1] : err_fd, 1);
    dup2(err_fd, 2);
    // A new process group would hide it from ctest's kill; keep ours. Undo
    // the test's ignored SIGPIPE so the child starts with default signals.
    signal(SIGPIPE, SIG_DFL);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  int fork_errno = errno;
  close(err_fd);
  close(null_fd);
  if (in[0] >= 0) close(in[0]);
  if (out[1] >= 0) close(out[1]);
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(fork_errno);
    if (in[1] >= 0) close(in[1]);
    if (out[0] >= 0) close(out[0]);
    return nullptr;
  }
  std::unique_ptr<Child> c(new Child());
  c->pid_ = pid;
  c->name_ =
      std::filesystem::path(argv[0]).filename().string() + (argv.size() > 1 ? " " + argv[1] : "");
  c->stderr_path_ = options.stderr_path;
  c->stdin_fd_ = in[1];
  c->stdout_fd_ = out[0];
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
  auto deadline = SteadyClock::now() + timeout;
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
  auto deadline = SteadyClock::now() + timeout;
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
  auto deadline = SteadyClock::now() + timeout;
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
  auto deadline = SteadyClock::now() + timeout;
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
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;  // not our child (cannot happen)
    if (Left(deadline).count() == 0) return std::nullopt;
    std::this_thread::sleep_for(Millis(5));
  }
}

bool Child::Alive() {
  if (status_) return false;
  return !WaitExit(Millis(0)).has_value();
}

void Child::Signal(int sig) {
  if (!status_ && pid_ > 0) kill(pid_, sig);
}

void Child::Kill() {
  if (status_ || pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int st = 0;
  while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  status_ = st;
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
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

bool ExitedWith(const std::optional<int>& status, int code) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code;
}

int CommandResult::exit_code() const {
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

std::string CommandResult::Describe() const {
  return (status ? DescribeStatus(*status) : std::string("did not finish in time")) +
         "\nstdout:\n" + out + "\nstderr:\n" + err;
}

CommandResult RunCommand(const std::vector<std::string>& argv, Millis timeout) {
  CommandResult r;
  char err_template[] = "/tmp/mcdma-it-cmd-XXXXXX";
  int fd = mkstemp(err_template);
  if (fd < 0) {
    r.err = std::string("mkstemp: ") + std::strerror(errno);
    return r;
  }
  close(fd);
  SpawnOptions o;
  o.stderr_path = err_template;
  o.pipe_stdin = false;
  std::string error;
  auto child = Child::Spawn(argv, o, &error);
  if (!child) {
    unlink(err_template);
    r.err = "spawn: " + error;
    return r;
  }
  auto deadline = SteadyClock::now() + timeout;
  child->ReadToEof(Left(deadline));
  r.status = child->WaitExit(Left(deadline));
  if (!r.status) child->Kill();
  for (const auto& l : child->lines()) r.out += l + "\n";
  r.err = ReadFile(err_template);
  unlink(err_template);
  return r;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/mcdma-it-XXXXXX";
  if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace mcdma::itest
