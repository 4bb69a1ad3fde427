#include "harness/etcd_server.hpp"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "harness/hosts.hpp"

namespace mcdma::harness {
namespace {

constexpr Millis kHealthPoll(100);
constexpr Millis kHealthTimeout(3000);  // one etcdctl run
constexpr Millis kStopGrace(10000);
constexpr const char* kMissing =
    " (Debian's etcd-server and etcd-client packages: scripts/install-deps.sh installs them)";

// `name` from PATH, else /usr/bin; "" when neither has it.
std::string FindTool(const std::string& name) {
  std::string found = FindInPath(name);
  if (found.empty() && access(("/usr/bin/" + name).c_str(), X_OK) == 0) found = "/usr/bin/" + name;
  return found;
}

}  // namespace

Result<std::unique_ptr<EtcdServer>> EtcdServer::Start(const Options& options) {
  std::unique_ptr<EtcdServer> s(new EtcdServer());
  s->options_ = options;
  s->etcd_ = FindTool("etcd");
  s->etcdctl_ = FindTool("etcdctl");
  if (s->etcd_.empty())
    return Status(Code::kNotFound, std::string("no etcd on PATH or in /usr/bin") + kMissing);
  if (s->etcdctl_.empty())
    return Status(Code::kNotFound, std::string("no etcdctl on PATH or in /usr/bin") + kMissing);
  if (options.dir.empty()) {
    s->temp_ = std::make_unique<TempDir>("mcdma-etcd");
    if (!s->temp_->ok()) return Status(Code::kSystem, s->temp_->error());
    s->dir_ = s->temp_->path();
  } else {
    s->dir_ = options.dir;
    std::error_code ec;
    std::filesystem::create_directories(s->dir_, ec);
    if (ec) return Status(Code::kSystem, "mkdir " + s->dir_ + ": " + ec.message());
  }
  s->log_ = s->dir_ + "/etcd.log";
  if (options.client_port == 0 || options.peer_port == 0) {
    std::vector<uint16_t> ports = FreePorts(2);
    if (ports.size() != 2) return Status(Code::kSystem, "no free ports on 127.0.0.1 for etcd");
    if (options.client_port == 0) s->options_.client_port = ports[0];
    if (options.peer_port == 0) s->options_.peer_port = ports[1];
  }
  MCDMA_RETURN_IF_ERROR(s->Launch());
  return s;
}

EtcdServer::~EtcdServer() { Kill(); }

std::string EtcdServer::endpoint() const {
  return options_.address + ":" + std::to_string(options_.client_port);
}

std::vector<std::string> EtcdServer::Argv() const {
  const std::string client = "http://" + endpoint();
  const std::string peer = "http://" + options_.address + ":" + std::to_string(options_.peer_port);
  return InNamespace(options_.netns, {etcd_,
                                      "--name",
                                      "mcdma-test",
                                      "--data-dir",
                                      dir_ + "/data",
                                      "--listen-client-urls",
                                      client,
                                      "--advertise-client-urls",
                                      client,
                                      "--listen-peer-urls",
                                      peer,
                                      "--initial-advertise-peer-urls",
                                      peer,
                                      "--initial-cluster",
                                      "mcdma-test=" + peer,
                                      "--initial-cluster-state",
                                      "new",
                                      "--initial-cluster-token",
                                      "mcdma-test",
                                      "--logger",
                                      "zap",
                                      "--log-outputs",
                                      "stderr",
                                      "--log-level",
                                      "warn"});
}

CommandResult EtcdServer::Ctl(const std::vector<std::string>& args, Millis timeout) const {
  std::vector<std::string> argv = {
      etcdctl_, "--endpoints", "http://" + endpoint(), "--dial-timeout", "1s", "--command-timeout",
      "2s"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(InNamespace(options_.netns, argv), timeout);
}

Status EtcdServer::Launch() {
  SpawnOptions o;
  o.name = "etcd";
  o.pipe_stdin = false;
  o.pipe_stdout = false;
  o.stderr_path = log_;  // appended to: a restart's log follows the first run's
  auto spawned = Child::Spawn(Argv(), o);
  if (!spawned.ok())
    return Status(Code::kSystem, "cannot start etcd: " + spawned.status().message());
  child_ = std::move(spawned).value();
  const auto deadline = Clock::now() + options_.start_timeout;
  for (;;) {
    CommandResult health = Ctl({"endpoint", "health"}, kHealthTimeout);
    if (health.exit_code() == 0) return Status::Ok();
    if (!child_->Alive()) {
      return Status(Code::kUnavailable, "etcd at " + endpoint() + " ended (" +
                                            DescribeStatus(child_->exit_status().value_or(-1)) +
                                            ") before it answered:\n" + LogTail(10));
    }
    if (Clock::now() >= deadline) {
      return Status(Code::kTimeout, "etcd at " + endpoint() + " did not answer within " +
                                        std::to_string(options_.start_timeout.count()) +
                                        " ms: " + health.Describe() + "\n" + LogTail(10));
    }
    std::this_thread::sleep_for(kHealthPoll);
  }
}

void EtcdServer::Stop() {
  if (child_ && child_->Alive()) child_->Stop(SIGTERM, kStopGrace);
}

void EtcdServer::Kill() {
  if (child_) child_->Kill();
}

bool EtcdServer::running() { return child_ && child_->Alive(); }

Status EtcdServer::Restart() {
  Stop();
  return Launch();
}

std::string EtcdServer::LogTail(int lines) const { return LastLines(ReadFile(log_), lines); }

}  // namespace mcdma::harness
