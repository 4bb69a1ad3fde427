#include "validate/process.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace mcdma::tools::validate {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> Argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

Status SpawnError(const std::string& what, int rc) {
  Code code = rc == ENOENT || rc == EACCES ? Code::kNotFound : Code::kSystem;
  return Status(code, "cannot start " + what + ": " + std::strerror(rc) +
                          (rc == ENOENT ? " (is it installed and on PATH?)" : ""));
}

// Waits for `pid` until `deadline`, killing it then; its exit code, or -1.
int Reap(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return -1;
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

Result<ProcessOutput> RunCaptured(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds limit) {
  if (argv.empty()) return Status(Code::kInvalid, "RunCaptured: no program");
  int out_pipe[2];
  int err_pipe[2];
  if (pipe(out_pipe) != 0) return Status(Code::kSystem, std::string("pipe: ") + strerror(errno));
  if (pipe(err_pipe) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status(Code::kSystem, std::string("pipe: ") + strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, err_pipe[0]);
  auto args = Argv(argv);
  const auto start = Clock::now();
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return SpawnError(argv[0], rc);
  }
  ProcessOutput result;
  const auto deadline = start + limit;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  bool timed_out = false;
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  result.exit_code = Reap(pid, timed_out ? Clock::now() : deadline + std::chrono::seconds(5));
  result.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (timed_out) {
    return Status(Code::kTimeout,
                  argv[0] + " did not finish within " + std::to_string(limit.count()) +
                      " ms; it printed: " +
                      result.out.substr(result.out.size() > 400 ? result.out.size() - 400 : 0));
  }
  return result;
}

Result<pid_t> Background(const std::vector<std::string>& argv, const std::string& log,
                         std::chrono::milliseconds limit) {
  if (argv.empty()) return Status(Code::kInvalid, "Background: no program");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  auto args = Argv(argv);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return SpawnError(argv[0], rc);
  const auto deadline = Clock::now() + limit;
  std::thread([pid, deadline] { (void)Reap(pid, deadline); }).detach();
  return pid;
}

Result<uint16_t> FreeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status(Code::kSystem, std::string("socket: ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int e = errno;
    close(fd);
    return Status(Code::kSystem, std::string("finding a free port: ") + strerror(e));
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace mcdma::tools::validate
