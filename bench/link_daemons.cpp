#include "link_daemons.hpp"

#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <thread>

namespace bench {

namespace {

constexpr uint16_t kPeerPort = 7471;  // ports used inside a namespace
constexpr uint16_t kDataPort = 7472;
constexpr auto kSocketWait = std::chrono::seconds(20);  // a daemon starts slowly under TCG
constexpr auto kDaemonStopGrace = std::chrono::seconds(5);
constexpr auto kLinkPoll = std::chrono::milliseconds(200);
constexpr auto kCtlTimeout = std::chrono::seconds(20);
constexpr int kCtlUsage = 2;  // mcdmactl's exit code for an unknown subcommand

// 32 random bytes as 64 hex digits and a newline, mode 0600 (what
// `mcdmactl fabric-key new` writes).
mcdma::Status WriteFabricKey(const std::string& path) {
  unsigned char key[32];
  if (getrandom(key, sizeof(key), 0) != static_cast<ssize_t>(sizeof(key)))
    return mcdma::Status(mcdma::Code::kSystem, std::string("getrandom: ") + strerror(errno));
  std::string hex;
  for (unsigned char byte : key) {
    hex += "0123456789abcdef"[byte >> 4];
    hex += "0123456789abcdef"[byte & 15];
  }
  hex += '\n';
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid() || write(fd.get(), hex.data(), hex.size()) != static_cast<ssize_t>(hex.size()))
    return mcdma::Status(mcdma::Code::kSystem, "write " + path + ": " + strerror(errno));
  return mcdma::Status::Ok();
}

// The string value of the first "key" at or after `from` in JSON text
// (our own tool's output, so no escapes beyond \" need handling).
std::string JsonString(const std::string& text, const std::string& key, size_t from = 0) {
  size_t at = text.find("\"" + key + "\"", from);
  if (at == std::string::npos) return "";
  at = text.find(':', at);
  if (at == std::string::npos) return "";
  at = text.find('"', at);
  if (at == std::string::npos) return "";
  size_t end = at + 1;
  while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
  return text.substr(at + 1, end - at - 1);
}

}  // namespace

mcdma::Result<std::unique_ptr<DaemonPair>> DaemonPair::Start(const LinkPlan& plan,
                                                             const HostPair& hosts,
                                                             const TempDir& dir) {
  if (access(plan.daemon_path.c_str(), X_OK) != 0) {
    return mcdma::Status(mcdma::Code::kNotFound, "no executable mcdma-rpcd at " + plan.daemon_path +
                                                     " (build it or pass --daemon)");
  }
  std::string key = dir.Join("fabric.key");
  MCDMA_RETURN_IF_ERROR(WriteFabricKey(key));
  // Four distinct ports (on loopback all four share one address).
  std::set<uint16_t> taken;
  auto port = [&](uint16_t netns_port) -> mcdma::Result<uint16_t> {
    for (int attempt = 0; attempt < 20; ++attempt) {
      MCDMA_ASSIGN_OR_RETURN(uint16_t p, hosts.Port(netns_port));
      if (hosts.loopback() ? taken.insert(p).second : true) return p;
    }
    return mcdma::Status(mcdma::Code::kInternal, "no free port found");
  };
  MCDMA_ASSIGN_OR_RETURN(uint16_t peer_b, port(kPeerPort));
  MCDMA_ASSIGN_OR_RETURN(uint16_t data_b, port(kDataPort));
  MCDMA_ASSIGN_OR_RETURN(uint16_t peer_a, port(kPeerPort));
  MCDMA_ASSIGN_OR_RETURN(uint16_t data_a, port(kDataPort));

  std::unique_ptr<DaemonPair> pair(new DaemonPair());
  pair->socket_a_ = dir.Join("rpcd-a.sock");
  pair->socket_b_ = dir.Join("rpcd-b.sock");
  std::string log_dir = plan.daemon_log_dir.empty() ? dir.path() : plan.daemon_log_dir;
  pair->log_a_ = log_dir + "/rpcd-a.log";
  pair->log_b_ = log_dir + "/rpcd-b.log";
  auto spawn = [&](const LinkHost& host, const std::string& socket, const std::string& log,
                   uint16_t peer_port, uint16_t data_port,
                   const std::string& peer_flag) -> mcdma::Result<ChildProcess> {
    SpawnOptions options;
    options.name = "mcdma-rpcd (" + host.id + ")";
    std::vector<std::string> argv = {plan.daemon_path,
                                     "--socket",
                                     socket,
                                     "--host-id",
                                     host.id,
                                     "--fabric-key",
                                     key,
                                     "--listen",
                                     host.address + ":" + std::to_string(peer_port),
                                     "--data-listen",
                                     host.address + ":" + std::to_string(data_port),
                                     "--log-level",
                                     plan.daemon_log_level};
    if (!peer_flag.empty()) argv.insert(argv.end(), {"--peer", peer_flag});
    if (plan.transport == "verbs") {
      options.name = "mcdma-rpcd (" + host.id + ", " + host.verbs_device + ")";
      argv.insert(argv.end(), {"--verbs-device", host.verbs_device, "--verbs-interface",
                               host.verbs_interface, "--verbs-profile", plan.verbs_profile});
    }
    argv.insert(argv.end(), plan.daemon_args.begin(), plan.daemon_args.end());
    options.argv = hosts.On(host, argv);
    options.stderr_path = log;
    return ChildProcess::Spawn(options);
  };
  MCDMA_ASSIGN_OR_RETURN(ChildProcess b,
                         spawn(hosts.b(), pair->socket_b_, pair->log_b_, peer_b, data_b, ""));
  pair->b_.emplace(std::move(b));
  std::string peer =
      hosts.b().id + "=" + hosts.b().address + ":" + std::to_string(peer_b) + "," + plan.transport;
  MCDMA_ASSIGN_OR_RETURN(ChildProcess a,
                         spawn(hosts.a(), pair->socket_a_, pair->log_a_, peer_a, data_a, peer));
  pair->a_.emplace(std::move(a));
  MCDMA_RETURN_IF_ERROR(pair->WaitForSockets());
  MCDMA_RETURN_IF_ERROR(pair->WaitForLink(plan, dir));
  return pair;
}

DaemonPair::~DaemonPair() {
  if (a_) StopChild(*a_, kDaemonStopGrace);
  if (b_) StopChild(*b_, kDaemonStopGrace);
}

std::string DaemonPair::Exited() {
  for (auto* d : {&a_, &b_}) {
    if (!*d || !(*d)->running()) continue;
    std::string name = (*d)->name();
    auto status = (*d)->Wait(std::chrono::milliseconds(0));
    if (!status.ok()) continue;
    // The last two lines: a usage error's reason comes before CLI11's
    // closing "Run with --help for more information."
    std::string log = LastLines(ReadTextFile(d == &a_ ? log_a_ : log_b_), 2);
    while (!log.empty() && log.back() == '\n') log.pop_back();
    if (size_t nl = log.find('\n'); nl != std::string::npos) log.replace(nl, 1, " / ");
    return name + " ended (" + DescribeWaitStatus(*status) + ")" + (log.empty() ? "" : ": " + log);
  }
  return "";
}

std::string DaemonPair::LogTails(int lines) const {
  std::string out;
  for (const auto& [host, path] : {std::pair{"host-a", log_a_}, std::pair{"host-b", log_b_}}) {
    std::string tail = LastLines(ReadTextFile(path), lines);
    for (size_t start = 0; start < tail.size();) {
      size_t nl = tail.find('\n', start);
      out += std::string("  ") + host + ": " + tail.substr(start, nl - start) + "\n";
      start = nl + 1;
    }
  }
  return out;
}

mcdma::Result<std::vector<uint64_t>> DaemonPair::LinkTest(const LinkPlan& plan, const TempDir& dir,
                                                          size_t bytes, int count) {
  if (access(plan.mcdmactl_path.c_str(), X_OK) != 0)
    return mcdma::Status(mcdma::Code::kNotFound, "no mcdmactl at " + plan.mcdmactl_path);
  std::string out = dir.Join("link-test.json");
  std::string err = dir.Join("link-test.stderr");
  MCDMA_ASSIGN_OR_RETURN(
      int status,
      RunCommand({plan.mcdmactl_path, "--socket", socket_a_, "--timeout",
                  std::to_string(plan.run_limit_ms), "link", "test", "host-b", "--bytes",
                  std::to_string(bytes), "--count", std::to_string(count), "--json"},
                 out, err, std::chrono::milliseconds(plan.run_limit_ms + 5000)));
  if (ExitCode(status) != 0) {
    return mcdma::Status(
        mcdma::Code::kInternal,
        "mcdmactl link test: " + DescribeWaitStatus(status) + ": " + LastLine(ReadTextFile(err)));
  }
  // {"peer":...,"rtt_us":[464.019,56.285,...],...}
  std::string text = ReadTextFile(out);
  size_t at = text.find("\"rtt_us\"");
  at = at == std::string::npos ? at : text.find('[', at);
  std::vector<uint64_t> nanos;
  while (at != std::string::npos && at < text.size() && text[at] != ']') {
    char* end = nullptr;
    double us = strtod(text.c_str() + at + 1, &end);
    if (end == text.c_str() + at + 1) break;
    nanos.push_back(static_cast<uint64_t>(us * 1000));
    at = static_cast<size_t>(end - text.c_str());
  }
  if (nanos.size() != static_cast<size_t>(count)) {
    return mcdma::Status(mcdma::Code::kInternal, "mcdmactl link test printed " +
                                                     std::to_string(nanos.size()) + " of " +
                                                     std::to_string(count) + " round trips");
  }
  return nanos;
}

mcdma::Status DaemonPair::WaitForSockets() {
  auto deadline = Clock::now() + kSocketWait;
  struct stat st;
  while (stat(socket_a_.c_str(), &st) != 0 || stat(socket_b_.c_str(), &st) != 0) {
    if (std::string gone = Exited(); !gone.empty())
      return mcdma::Status(mcdma::Code::kUnavailable, gone);
    if (Clock::now() >= deadline) {
      return mcdma::Status(mcdma::Code::kTimeout, "mcdma-rpcd created no control socket within " +
                                                      std::to_string(kSocketWait.count()) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return mcdma::Status::Ok();
}

mcdma::Status DaemonPair::WaitForLink(const LinkPlan& plan, const TempDir& dir) {
  auto start = Clock::now();
  auto deadline = start + std::chrono::milliseconds(plan.link_wait_ms);
  if (access(plan.mcdmactl_path.c_str(), X_OK) != 0) {
    note_ = "no mcdmactl at " + plan.mcdmactl_path +
            "; link state not checked, the clients retry their first use for 30 s";
    return mcdma::Status::Ok();
  }
  std::string out = dir.Join("links.json");
  std::string err = dir.Join("links.stderr");
  std::string state = "(not read yet)";
  std::string last_error;
  while (Clock::now() < deadline) {
    if (std::string gone = Exited(); !gone.empty())
      return mcdma::Status(mcdma::Code::kUnavailable, gone);
    auto rc = RunCommand({plan.mcdmactl_path, "--socket", socket_a_, "links", "--json"}, out, err,
                         kCtlTimeout);
    if (rc.ok() && ExitCode(*rc) == kCtlUsage) {
      note_ = "mcdmactl has no `links` (" + LastLine(ReadTextFile(err)) +
              "); link state not checked, the clients retry their first use for 30 s";
      return mcdma::Status::Ok();
    }
    if (rc.ok() && ExitCode(*rc) == 0) {
      std::string text = ReadTextFile(out);
      size_t entry = text.find("\"host-b\"");
      if (entry != std::string::npos) {
        state = JsonString(text, "state", entry);
        last_error = JsonString(text, "last_error", entry);
        std::string transport = JsonString(text, "transport", entry);
        if (state == "up" && transport != plan.transport) {
          return mcdma::Status(mcdma::Code::kInternal,
                               "link to host-b came up over '" + transport + "', not " +
                                   plan.transport + ": nothing here would measure " +
                                   plan.transport +
                                   (last_error.empty() ? "" : " (" + last_error + ")"));
        }
        if (state == "up") {
          char secs[32];
          snprintf(secs, sizeof(secs), "%.1f",
                   std::chrono::duration<double>(Clock::now() - start).count());
          note_ = "link host-a -> host-b up after " + std::string(secs) + " s (transport " +
                  transport +
                  (plan.verbs_profile.empty() ? "" : ", profile " + plan.verbs_profile) + ")";
          return mcdma::Status::Ok();
        }
      } else {
        state = "(no link to host-b listed)";
      }
    } else {
      state = "(mcdmactl links: " + LastLine(ReadTextFile(err)) + ")";
    }
    std::this_thread::sleep_for(kLinkPoll);
  }
  return mcdma::Status(mcdma::Code::kTimeout,
                       "link host-a -> host-b not up within " +
                           std::to_string(plan.link_wait_ms / 1000) + " s (state " + state +
                           (last_error.empty() ? "" : ", last error: " + last_error) + ")");
}

}  // namespace bench
