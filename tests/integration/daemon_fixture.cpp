#include "daemon_fixture.hpp"

#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

namespace mcdma::itest {
namespace {

// A write to a child that died must fail with EPIPE, not kill the test.
[[maybe_unused]] const bool kIgnoreSigpipe = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

}  // namespace

std::set<std::string> ListShm(const std::string& prefix) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.insert(name);
  }
  return names;
}

bool PollUntil(const std::function<bool()>& pred, Millis timeout, Millis step) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(step);
  }
}

void DaemonTest::SetUp() {
  ASSERT_TRUE(dir_.ok()) << "mkdtemp failed: " << std::strerror(errno);
  socket_ = dir_.path() + "/rpcd.sock";
  shm_baseline_ = ListShm();
  ASSERT_TRUE(StartDaemon()) << Describe();
}

bool DaemonTest::StartDaemon() {
  std::vector<std::string> argv = {kDaemonPath, "--socket", socket_, "--log-level", "info"};
  for (const auto& a : DaemonArgs()) argv.push_back(a);
  if (daemon_) daemon_->Kill();
  daemon_.reset();
  auto started = SpawnDaemon(argv, socket_, dir_.path() + "/daemon.log", false, kDaemonListenWait);
  if (!started.ok()) {
    ADD_FAILURE() << started.status().message();
    return false;
  }
  daemon_ = std::move(started).value();
  return true;
}

void DaemonTest::TearDown() {
  for (auto& app : apps_) app->Kill();
  if (daemon_ && daemon_->Alive()) {
    daemon_->Signal(SIGTERM);
    auto st = daemon_->WaitExit(Millis(15000));
    if (!st) {
      ADD_FAILURE() << "mcdma-rpcd did not exit within 15 s of SIGTERM";
      daemon_->Kill();
    } else {
      EXPECT_TRUE(ExitedWith(st, 0))
          << "mcdma-rpcd ended with " << DescribeStatus(*st) << " after SIGTERM";
      EXPECT_FALSE(std::filesystem::exists(socket_))
          << "the daemon left its socket behind after SIGTERM";
    }
  }
  if (HasFailure()) std::cerr << Describe();
  apps_.clear();
  daemon_.reset();
}

Child* DaemonTest::StartApp(const std::string& role, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kTestAppPath, role, "--socket", socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions o;
  o.stderr_path = dir_.path() + "/app-" + std::to_string(++app_counter_) + "-" + role + ".log";
  auto child = Child::Spawn(argv, o);
  if (!child.ok()) {
    ADD_FAILURE() << "cannot start " << kTestAppPath << " " << role << ": "
                  << child.status().message();
    return nullptr;
  }
  apps_.push_back(std::move(child).value());
  return apps_.back().get();
}

Child* DaemonTest::StartReady(const std::string& role, const std::vector<std::string>& args) {
  Child* c = StartApp(role, args);
  if (c == nullptr) return nullptr;
  if (!c->WaitForPrefix("READY", Millis(20000))) {
    c->WaitExit(Millis(100));
    ADD_FAILURE() << "mcdma_testapp " << role << " did not print READY within 20 s\n"
                  << c->Describe();
    return nullptr;
  }
  return c;
}

CommandResult DaemonTest::Ctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kCtlPath, "--socket", socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, Millis(10000));
}

bool DaemonTest::CtlJson(const std::string& command, google::protobuf::Message* out,
                         std::string* raw) {
  CommandResult r = Ctl({command, "--json"});
  if (r.exit_code() != 0) {
    ADD_FAILURE() << "mcdmactl " << command << " --json: " << r.Describe();
    return false;
  }
  if (raw != nullptr) *raw = r.out;
  google::protobuf::util::JsonParseOptions po;
  po.ignore_unknown_fields = true;  // newer mcdmactl may print more
  out->Clear();
  auto st = google::protobuf::util::JsonStringToMessage(r.out, out, po);
  if (!st.ok()) {
    ADD_FAILURE() << "mcdmactl " << command << " --json printed something that is not a "
                  << out->GetTypeName() << ": " << st.ToString() << "\n"
                  << r.out;
    return false;
  }
  return true;
}

v1::OpCounters DaemonTest::Op(const v1::StatusReply& status, const std::string& op) {
  for (const auto& c : status.ops()) {
    if (c.op() == op) return c;
  }
  ADD_FAILURE() << "status has no counters for op '" << op << "'";
  return {};
}

std::string DaemonTest::Describe() const {
  std::string out = "==== mcdma-rpcd log (" + dir_.path() + "/daemon.log, tail) ====\n";
  out += harness::LastLines(ReadFile(dir_.path() + "/daemon.log"), 80) + "\n";
  for (const auto& app : apps_) out += app->Describe();
  return out;
}

}  // namespace mcdma::itest
