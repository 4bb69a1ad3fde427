#include "link_hosts.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <sstream>

#include "platform/socket.hpp"

namespace bench {

namespace {

constexpr auto kScriptTimeout = std::chrono::seconds(30);
constexpr int kCheckUnavailable = 77;  // hosts.sh check: no namespaces here
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

// The removal command as the signal handler runs it; set while a HostPair
// with namespaces lives. Built beforehand: after a signal only fork, execv
// and waitpid are used (all async-signal-safe).
char* const* g_down_argv = nullptr;

void RemoveOnSignal(int sig) {
  if (g_down_argv != nullptr) {
    pid_t pid = fork();
    if (pid == 0) {
      execv(g_down_argv[0], g_down_argv);
      _exit(127);
    }
    int status;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

mcdma::Result<int> RunCommand(const std::vector<std::string>& argv, const std::string& stdout_path,
                              const std::string& stderr_path, std::chrono::milliseconds timeout) {
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.stdout_path = stdout_path;
  spawn.stderr_path = stderr_path;
  MCDMA_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(spawn));
  auto status = child.Wait(timeout);
  if (!status.ok()) {
    child.Kill();
    return mcdma::Status(mcdma::Code::kTimeout, argv[0] + " did not finish within " +
                                                    std::to_string(timeout.count() / 1000) + " s");
  }
  return *status;
}

int ExitCode(int wait_status) {
  return wait_status >= 0 && WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

std::string ReadTextFile(const std::string& path) {
  std::string text;
  if (FILE* f = fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    fclose(f);
  }
  return text;
}

std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  size_t nl = text.rfind('\n', end);
  return text.substr(nl == std::string::npos ? 0 : nl + 1,
                     end - (nl == std::string::npos ? 0 : nl + 1) + 1);
}

std::string LastLines(const std::string& text, int lines) {
  std::vector<std::string> kept;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) kept.push_back(line);
  }
  std::string out;
  size_t first = kept.size() > static_cast<size_t>(lines) ? kept.size() - lines : 0;
  for (size_t i = first; i < kept.size(); ++i) out += kept[i] + "\n";
  return out;
}

std::string FindInPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

mcdma::Result<std::unique_ptr<HostPair>> HostPair::Create(const std::string& script,
                                                          bool force_loopback, const TempDir& dir) {
  std::unique_ptr<HostPair> hosts(new HostPair());
  hosts->a_ = {"host-a", "", "127.0.0.1", "", ""};
  hosts->b_ = {"host-b", "", "127.0.0.1", "", ""};
  if (force_loopback) {
    hosts->note_ = "loopback (--loopback): both daemons on 127.0.0.1";
    return hosts;
  }
  std::string bash = FindInPath("bash");
  hosts->ip_path_ = FindInPath("ip");
  if (bash.empty()) return mcdma::Status(mcdma::Code::kNotFound, "no bash on PATH");
  if (access(script.c_str(), R_OK) != 0) {
    return mcdma::Status(mcdma::Code::kNotFound,
                         "no hosts script at " + script + " (pass --hosts-script or --loopback)");
  }
  std::string err = dir.Join("hosts.stderr");
  MCDMA_ASSIGN_OR_RETURN(int check, RunCommand({bash, script, "check"}, "", err, kScriptTimeout));
  if (ExitCode(check) == kCheckUnavailable || hosts->ip_path_.empty()) {
    std::string why = hosts->ip_path_.empty() ? "no `ip` on PATH" : LastLine(ReadTextFile(err));
    hosts->note_ = "loopback: " + (why.empty() ? "network namespaces unavailable" : why) +
                   "; both daemons on 127.0.0.1";
    return hosts;
  }
  if (ExitCode(check) != 0) {
    return mcdma::Status(mcdma::Code::kInternal, script + " check: " + DescribeWaitStatus(check) +
                                                     ": " + LastLine(ReadTextFile(err)));
  }

  std::string prefix = "mcbl" + std::to_string(getpid());
  hosts->down_argv_ = {bash, script, "down", prefix};
  // A run that died without cleaning up may have left this prefix (pids
  // are reused); `down` is idempotent.
  (void)RunCommand(hosts->down_argv_, "", "", kScriptTimeout);
  static std::vector<char*> argv;
  argv.clear();
  for (std::string& s : hosts->down_argv_) argv.push_back(s.data());
  argv.push_back(nullptr);
  g_down_argv = argv.data();
  for (int sig : kCleanupSignals) signal(sig, RemoveOnSignal);

  std::string out = dir.Join("hosts.stdout");
  MCDMA_ASSIGN_OR_RETURN(int up,
                         RunCommand({bash, script, "up", prefix}, out, err, kScriptTimeout));
  if (ExitCode(up) != 0) {
    return mcdma::Status(mcdma::Code::kInternal, script + " up " + prefix + ": " +
                                                     DescribeWaitStatus(up) + ": " +
                                                     LastLine(ReadTextFile(err)));
  }
  // Output: "PREFIX-a 10.240.N.1" then "PREFIX-b 10.240.N.2".
  std::istringstream lines(ReadTextFile(out));
  std::string ns, address;
  while (lines >> ns >> address) {
    if (ns == prefix + "-a") hosts->a_ = {"host-a", ns, address, "", ""};
    if (ns == prefix + "-b") hosts->b_ = {"host-b", ns, address, "", ""};
  }
  if (hosts->a_.netns.empty() || hosts->b_.netns.empty()) {
    return mcdma::Status(mcdma::Code::kInternal, script + " up printed no addresses");
  }
  hosts->note_ = "network namespaces " + hosts->a_.netns + " (" + hosts->a_.address + ") and " +
                 hosts->b_.netns + " (" + hosts->b_.address + ") joined by a veth pair";
  return hosts;
}

std::unique_ptr<HostPair> HostPair::Fixed(LinkHost a, LinkHost b, std::string note) {
  std::unique_ptr<HostPair> hosts(new HostPair());
  hosts->a_ = std::move(a);
  hosts->b_ = std::move(b);
  hosts->a_.netns.clear();
  hosts->b_.netns.clear();
  hosts->note_ = std::move(note);
  return hosts;
}

HostPair::~HostPair() {
  try {
    RemoveNamespaces();
  } catch (const std::exception& e) {
    fprintf(stderr, "mcdma_bench_link: removing the namespaces failed: %s\n", e.what());
  }
}

void HostPair::RemoveNamespaces() {
  if (down_argv_.empty()) return;
  auto removed = RunCommand(down_argv_, "", "", kScriptTimeout);
  if (!removed.ok() || ExitCode(*removed) != 0) {
    fprintf(stderr, "mcdma_bench_link: `%s down %s` failed; remove the namespaces by hand\n",
            down_argv_[1].c_str(), down_argv_[3].c_str());
  }
  for (int sig : kCleanupSignals) signal(sig, SIG_DFL);
  g_down_argv = nullptr;
  down_argv_.clear();
}

std::vector<std::string> HostPair::On(const LinkHost& host, std::vector<std::string> argv) const {
  if (host.netns.empty()) return argv;
  std::vector<std::string> full = {ip_path_, "netns", "exec", host.netns};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

mcdma::Result<uint16_t> HostPair::Port(uint16_t netns_port) const {
  if (!loopback()) return netns_port;
  auto opened =
      mcdma::platform::OpenSocket(AF_INET, SOCK_STREAM, 0, mcdma::platform::Blocking::kBlocking);
  Fd fd = opened.ok() ? std::move(opened).value() : Fd();
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return mcdma::Status(mcdma::Code::kSystem,
                         std::string("picking a free port: ") + strerror(errno));
  }
  return ntohs(sa.sin_port);
}

}  // namespace bench
