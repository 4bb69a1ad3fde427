#include "doctor/darwin_gather.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace mcdma::tools::doctor {
namespace {

using Clock = std::chrono::steady_clock;

Status Errno(const std::string& what, int err) {
  return Status(Code::kSystem,
                what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

// A pipe whose ends are closed on exec; the child gets its write end through
// posix_spawn's dup2, which clears the flag on the copy.
Status MakePipe(int (&fds)[2]) {
  if (pipe(fds) != 0) return Errno("pipe", errno);
  for (int fd : fds) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
  return Status::Ok();
}

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) (void)close(fd);
  }
}

// The bytes a sockaddr holds: sa_len where the platform has it (macOS and
// the BSDs, whose netmasks may be shorter than their family's sockaddr, the
// missing bytes being zero), else SIZE_MAX for "the whole struct". Found by
// overload so no platform #if is needed.
template <typename T>
auto SockaddrLen(const T* sa, int) -> decltype(sa->sa_len, size_t()) {
  return sa->sa_len;
}
template <typename T>
size_t SockaddrLen(const T*, long) {
  return SIZE_MAX;
}

// The numeric form of an interface address; "" for other families.
std::string Numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa == nullptr) return "";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)) != nullptr ? buf : "";
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf)) != nullptr ? buf : "";
  }
  return "";
}

CommandOutput RunTool(const std::string& command, const std::vector<std::string>& args) {
  constexpr std::chrono::milliseconds kTimeout{5000};
  constexpr size_t kMaxBytes = 1 << 20;
  const std::string& name = args.front();
  const std::string path = FindTool(name);
  if (path.empty()) {
    CommandOutput out;
    out.command = command;
    std::string dirs;
    for (const char* d : kToolDirs) dirs += (dirs.empty() ? "" : ", ") + std::string(d);
    out.status = Status(Code::kNotFound, name + " not found in " + dirs);
    return out;
  }
  std::vector<std::string> argv = args;
  argv.front() = path;
  return RunCommand(command, argv, kTimeout, kMaxBytes);
}

}  // namespace

std::string FindTool(const std::string& name) {
  for (const char* dir : kToolDirs) {
    std::string path = std::string(dir) + "/" + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

CommandOutput RunCommand(const std::string& command, const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout, size_t max_bytes) {
  CommandOutput result;
  result.command = command;
  if (argv.empty()) {
    result.status = Status(Code::kInvalid, "no program to run");
    return result;
  }
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  result.status = MakePipe(out_pipe);
  if (result.status.ok()) result.status = MakePipe(err_pipe);
  if (!result.status.ok()) {
    CloseAll({out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]});
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char path_env[] = "PATH=/usr/bin:/bin:/usr/sbin:/sbin";
  char locale_env[] = "LC_ALL=C";
  char* env[] = {path_env, locale_env, nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv.front().c_str(), &actions, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  CloseAll({out_pipe[1], err_pipe[1]});
  if (spawned != 0) {
    CloseAll({out_pipe[0], err_pipe[0]});
    result.status = Errno("cannot run " + argv.front(), spawned);
    return result;
  }
  // Read both pipes until both are closed, the deadline passes or the
  // output bound is crossed; in the last two cases the child is killed.
  const auto deadline = Clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  Status stopped;
  while (open_fds > 0 && stopped.ok()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      stopped = Status(Code::kTimeout, command + " did not finish within " +
                                           std::to_string(timeout.count()) + " ms");
      break;
    }
    const int ready = poll(fds, 2, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      stopped = Errno("poll", errno);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        (void)close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      sinks[i]->append(buf, static_cast<size_t>(n));
      if (result.out.size() + result.err.size() > max_bytes) {
        stopped = Status(Code::kOutOfRange,
                         command + " printed more than " + std::to_string(max_bytes) + " bytes");
        break;
      }
    }
  }
  CloseAll({fds[0].fd, fds[1].fd});
  if (!stopped.ok()) (void)kill(pid, SIGKILL);
  int wstatus = 0;
  pid_t waited = -1;
  do {
    waited = waitpid(pid, &wstatus, 0);
  } while (waited < 0 && errno == EINTR);
  if (!stopped.ok()) {
    result.status = stopped;
  } else if (waited < 0) {
    result.status = Errno("waitpid", errno);
  } else if (WIFSIGNALED(wstatus)) {
    result.status = Status(Code::kSystem,
                           command + " was killed by signal " + std::to_string(WTERMSIG(wstatus)));
  } else {
    result.status = Status::Ok();
    result.exit_code = WEXITSTATUS(wstatus);
  }
  return result;
}

InterfacesInput ListInterfaceAddresses() {
  InterfacesInput in;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    in.status = Errno("getifaddrs", errno);
    return in;
  }
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_name == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    InterfaceAddress a;
    a.name = i->ifa_name;
    a.family = family == AF_INET ? "inet" : "inet6";
    a.address = Numeric(i->ifa_addr);
    // The mask's own sa_family is not always set (BSDs leave it 0) and its
    // length may be short: copy what it has and read it as the address's
    // family.
    if (i->ifa_netmask != nullptr) {
      sockaddr_storage mask{};
      const size_t full = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      const size_t len = SockaddrLen(i->ifa_netmask, 0);
      std::memcpy(&mask, i->ifa_netmask, std::min(len, full));
      mask.ss_family = static_cast<sa_family_t>(family);
      a.netmask = Numeric(reinterpret_cast<const sockaddr*>(&mask));
    }
    if (!a.address.empty()) in.addresses.push_back(std::move(a));
  }
  freeifaddrs(list);
  return in;
}

DarwinInputs GatherDarwinInputs() {
  DarwinInputs in;
  in.rdma_ctl = RunTool("rdma_ctl status", {"rdma_ctl", "status"});
  in.kmutil = RunTool("kmutil showloaded --list-only", {"kmutil", "showloaded", "--list-only"});
  in.networksetup =
      RunTool("networksetup -listallnetworkservices", {"networksetup", "-listallnetworkservices"});
  in.memlock = RunTool("launchctl limit memlock", {"launchctl", "limit", "memlock"});
  in.interfaces = ListInterfaceAddresses();
  return in;
}

}  // namespace mcdma::tools::doctor
