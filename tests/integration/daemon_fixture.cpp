#include "daemon_fixture.hpp"

#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "platform/socket.hpp"

namespace mcdma::itest {

std::set<std::string> ListShm(const std::string& prefix) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.insert(name);
  }
  return names;
}

bool SocketAccepts(const std::string& path) {
  auto opened = platform::OpenSocket(AF_UNIX, SOCK_STREAM, 0, platform::Blocking::kBlocking);
  if (!opened.ok()) return false;
  int fd = std::move(opened).value().Release();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
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

std::unique_ptr<Child> SpawnDaemonListening(const std::vector<std::string>& argv,
                                            const std::string& socket, const std::string& log_path,
                                            std::string* why) {
  SpawnOptions o;
  o.stderr_path = log_path;
  o.pipe_stdout = false;
  o.pipe_stdin = false;
  std::string error;
  std::unique_ptr<Child> daemon = Child::Spawn(argv, o, &error);
  if (!daemon) {
    *why = "cannot start " + argv[0] + ": " + error;
    return nullptr;
  }
  bool up = PollUntil([&] { return !daemon->Alive() || SocketAccepts(socket); }, Millis(20000),
                      Millis(20));
  if (!up || !daemon->Alive()) {
    *why = "mcdma-rpcd did not start listening on " + socket + " within 20 s";
    return nullptr;
  }
  return daemon;
}

bool DaemonTest::StartDaemon() {
  std::vector<std::string> argv = {kDaemonPath, "--socket", socket_, "--log-level", "info"};
  for (const auto& a : DaemonArgs()) argv.push_back(a);
  if (daemon_) daemon_->Kill();
  std::string why;
  daemon_ = SpawnDaemonListening(argv, socket_, dir_.path() + "/daemon.log", &why);
  if (!daemon_) ADD_FAILURE() << why;
  return daemon_ != nullptr;
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
  std::string error;
  auto child = Child::Spawn(argv, o, &error);
  if (!child) {
    ADD_FAILURE() << "cannot start " << kTestAppPath << " " << role << ": " << error;
    return nullptr;
  }
  apps_.push_back(std::move(child));
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
  std::string log = ReadFile(dir_.path() + "/daemon.log");
  size_t pos = log.size();
  for (int lines = 0; lines < 80 && pos > 0; ++lines) {
    pos = log.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  out += log.substr(pos) + "\n";
  for (const auto& app : apps_) out += app->Describe();
  return out;
}

}  // namespace mcdma::itest
