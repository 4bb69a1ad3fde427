#include "harness/hosts.hpp"

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

#include "harness/files.hpp"
#include "platform/socket.hpp"

namespace mcdma::harness {
namespace {

constexpr Millis kCheckTimeout(10000);
constexpr Millis kScriptTimeout(30000);
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr size_t kMaxHosts = 26;  // PREFIX-a .. PREFIX-z

// The removal command as the signal handler runs it; set while a Hosts
// with RemoveOnSignals lives. Built beforehand: after a signal only fork,
// execv and waitpid are used (all async-signal-safe).
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

const std::string& IpPath() {
  static const std::string kPath = [] {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (access(p, X_OK) == 0) return std::string(p);
    }
    return FindInPath("ip");
  }();
  return kPath;
}

const std::string& BashPath() {
  static const std::string kPath =
      access("/bin/bash", X_OK) == 0 ? "/bin/bash" : FindInPath("bash");
  return kPath;
}

}  // namespace

std::string HostId(size_t index) { return std::string("host-") + static_cast<char>('a' + index); }

std::vector<std::string> InNamespace(const std::string& netns, std::vector<std::string> argv) {
  if (netns.empty()) return argv;
  std::vector<std::string> full = {IpPath().empty() ? "ip" : IpPath(), "netns", "exec", netns};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

std::vector<uint16_t> FreePorts(size_t count) {
  std::vector<Fd> held;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < count; ++i) {
    auto opened = platform::OpenSocket(AF_INET, SOCK_STREAM, 0, platform::Blocking::kBlocking);
    if (!opened.ok()) break;
    Fd fd = std::move(opened).value();
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      break;
    }
    ports.push_back(ntohs(addr.sin_port));
    held.push_back(std::move(fd));
  }
  return ports;
}

Status Hosts::Check(const std::string& script) {
  if (IpPath().empty()) return Status(Code::kUnavailable, "no ip(8) (iproute2) on this machine");
  if (access(script.c_str(), R_OK) != 0) {
    return Status(Code::kNotFound, "no hosts script at " + script);
  }
  CommandResult check = RunCommand({BashPath(), script, "check"}, kCheckTimeout);
  if (check.exit_code() == kCheckUnavailable) return Status(Code::kUnavailable, check.err);
  if (check.exit_code() != 0) {
    return Status(Code::kInternal, script + " check: " + check.Describe());
  }
  return Status::Ok();
}

Result<std::unique_ptr<Hosts>> Hosts::MakeNamespaces(const std::string& script,
                                                     const std::string& prefix, size_t count) {
  if (count < 2 || count > kMaxHosts) {
    return Status(Code::kInvalid, "hosts.sh makes 2 to 26 hosts, not " + std::to_string(count));
  }
  std::unique_ptr<Hosts> hosts(new Hosts());
  hosts->script_ = script;
  hosts->prefix_ = prefix;
  hosts->down_argv_ = {BashPath(), script, "down", prefix};
  // A run that died without cleaning up may have left this prefix (pids
  // are reused); `down` is idempotent.
  (void)RunCommand(hosts->down_argv_, kScriptTimeout);
  CommandResult up =
      RunCommand({BashPath(), script, "up", prefix, std::to_string(count)}, kScriptTimeout);
  if (up.exit_code() != 0) {
    return Status(Code::kInternal, script + " up " + prefix + ": " + up.Describe());
  }
  // Output: one "PREFIX-x 10.240.N.i" line per host, in order.
  std::istringstream lines(up.out);
  std::string ns, address;
  while (lines >> ns >> address) {
    size_t index = hosts->hosts_.size();
    if (index >= count || ns != prefix + "-" + static_cast<char>('a' + index)) break;
    hosts->hosts_.push_back(Host{HostId(index), ns, address, "", ""});
  }
  if (hosts->hosts_.size() != count) {
    return Status(Code::kInternal, "hosts.sh up did not print the " + std::to_string(count) +
                                       " hosts " + prefix + "-a, ... in order:\n" + up.out);
  }
  return hosts;
}

std::unique_ptr<Hosts> Hosts::Loopback(size_t count) {
  std::vector<Host> hosts;
  hosts.reserve(count);
  for (size_t i = 0; i < count; ++i) hosts.push_back(Host{HostId(i), "", "127.0.0.1", "", ""});
  return Shared(std::move(hosts));
}

std::unique_ptr<Hosts> Hosts::Shared(std::vector<Host> hosts) {
  std::unique_ptr<Hosts> out(new Hosts());
  out->hosts_ = std::move(hosts);
  for (Host& h : out->hosts_) h.netns.clear();
  return out;
}

Hosts::~Hosts() {
  if (down_argv_.empty()) return;
  CommandResult down = Down();
  if (down.exit_code() != 0) {
    fprintf(stderr, "`%s down %s` failed; remove the namespaces by hand: %s\n", script_.c_str(),
            prefix_.c_str(), LastLine(down.err).c_str());
  }
}

Result<uint16_t> Hosts::Port(uint16_t netns_port) const {
  if (netns()) return netns_port;
  std::vector<uint16_t> port = FreePorts(1);
  if (port.empty())
    return Status(Code::kSystem, std::string("picking a free port: ") + strerror(errno));
  return port[0];
}

CommandResult Hosts::Script(const std::string& cmd) const {
  if (!netns()) {
    CommandResult none;
    none.err = "no namespaces: these hosts share this machine's namespace";
    return none;
  }
  return RunCommand({BashPath(), script_, cmd, prefix_}, kScriptTimeout);
}

CommandResult Hosts::Down() {
  if (down_argv_.empty()) return CommandResult{0, "", ""};
  CommandResult down = RunCommand(down_argv_, kScriptTimeout);
  if (on_signals_) {
    for (int sig : kCleanupSignals) signal(sig, SIG_DFL);
    g_down_argv = nullptr;
    on_signals_ = false;
  }
  down_argv_.clear();
  return down;
}

void Hosts::RemoveOnSignals() {
  if (down_argv_.empty() || on_signals_) return;
  static std::vector<char*> argv;
  argv.clear();
  for (std::string& s : down_argv_) argv.push_back(s.data());
  argv.push_back(nullptr);
  g_down_argv = argv.data();
  on_signals_ = true;
  for (int sig : kCleanupSignals) signal(sig, RemoveOnSignal);
}

}  // namespace mcdma::harness
