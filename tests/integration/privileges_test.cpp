// The daemon as the systemd unit runs it: an unprivileged user holding only
// the capabilities the unit grants (AmbientCapabilities= in
// systemd/mcdma-rpcd.service, read from the file), serving an app of
// another user. The app's segments are chowned to the app, and /dev/shm is
// sticky, so the daemon can unlink them only with CAP_FOWNER: with the
// unit's capabilities nothing stays in /dev/shm once the app has mapped
// them; with CAP_CHOWN alone each unlink fails, and the daemon says so in
// its log and in status (segment_unlink_failures).
//
// Needs root (setpriv switches to the test's uids) and util-linux's
// setpriv; skips, saying which, without them.
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "daemon_fixture.hpp"
#include "socket_path.hpp"
#include "test_util.hpp"

namespace mcdma::itest {
namespace {

constexpr uid_t kDaemonUid = 64741;  // the unit's User=mcdma
constexpr gid_t kDaemonGid = 64740;  // Group=mcdma: apps are members
constexpr uid_t kAppUid = 64742;     // an app of another user

std::string SetprivPath() {
  for (const char* p : {"/usr/bin/setpriv", "/bin/setpriv"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// "CAP_CHOWN CAP_FOWNER" from the unit's AmbientCapabilities= line, as
// setpriv's "+chown,+fowner".
std::string UnitCapabilities() {
  std::ifstream in(MCDMA_SYSTEMD_UNIT);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("AmbientCapabilities=", 0) != 0) continue;
    std::istringstream words(line.substr(line.find('=') + 1));
    std::string cap;
    std::string out;
    while (words >> cap) {
      if (cap.rfind("CAP_", 0) != 0) return "";
      std::string name = cap.substr(4);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out += (out.empty() ? "+" : ",+") + name;
    }
    return out;
  }
  return "";
}

// The segments of the daemon on `socket` now in /dev/shm.
std::set<std::string> DaemonSegments(const std::string& socket) {
  const std::string tag = daemon::SegmentTag(socket);
  std::set<std::string> out;
  for (const std::string& name : ListShm("mcdma-")) {
    if (name.size() > 16 && name.compare(8, 8, tag) == 0) out.insert(name);
  }
  return out;
}

class Privileges : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: setpriv switches to the test's uids";
    setpriv_ = SetprivPath();
    if (setpriv_.empty()) GTEST_SKIP() << "setpriv not found (Debian: util-linux)";
    ASSERT_TRUE(dir_.ok());
    // The unit's RuntimeDirectory: owned by the daemon's user, group mcdma, 0750.
    run_ = dir_.path() + "/run";
    ASSERT_EQ(mkdir(run_.c_str(), 0750), 0);
    ASSERT_EQ(chown(run_.c_str(), kDaemonUid, kDaemonGid), 0);
    ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
    socket_ = run_ + "/rpcd.sock";
  }

  void TearDown() override {
    if (app_) app_->Kill();
    if (daemon_ && daemon_->Alive()) {
      daemon_->Signal(SIGTERM);
      EXPECT_TRUE(ExitedWith(daemon_->WaitExit(Millis(15000)), 0)) << DaemonLog();
    }
    // What a daemon without CAP_FOWNER could not remove.
    for (const std::string& name : DaemonSegments(socket_)) unlink(("/dev/shm/" + name).c_str());
  }

  // Starts the daemon as kDaemonUid:kDaemonGid with exactly `caps`.
  bool StartDaemon(const std::string& caps) {
    std::vector<std::string> argv = {setpriv_,
                                     "--reuid=" + std::to_string(kDaemonUid),
                                     "--regid=" + std::to_string(kDaemonGid),
                                     "--clear-groups",
                                     "--inh-caps=" + caps,
                                     "--ambient-caps=" + caps,
                                     "--bounding-set=-all," + caps,
                                     "--",
                                     kDaemonPath,
                                     "--socket",
                                     socket_,
                                     "--log-level",
                                     "info"};
    auto started =
        SpawnDaemon(argv, socket_, dir_.path() + "/daemon.log", false, kDaemonListenWait);
    if (!started.ok()) {
      ADD_FAILURE() << started.status().message() << " (uid " << kDaemonUid << ", caps " << caps
                    << ")\n"
                    << DaemonLog();
      return false;
    }
    daemon_ = std::move(started).value();
    return true;
  }

  // A fill app as kAppUid, a member of the daemon's group: READY or null.
  Child* StartApp() {
    std::vector<std::string> argv = {setpriv_,
                                     "--reuid=" + std::to_string(kAppUid),
                                     "--regid=" + std::to_string(kAppUid),
                                     "--groups=" + std::to_string(kDaemonGid),
                                     "--",
                                     kTestAppPath,
                                     "fill",
                                     "--socket",
                                     socket_,
                                     "--export",
                                     "privileges.kv",
                                     "--size",
                                     std::to_string(4 << 20),
                                     "--seed",
                                     "7"};
    SpawnOptions o;
    o.stderr_path = dir_.path() + "/app.log";
    auto app = Child::Spawn(argv, o);
    if (!app.ok()) {
      ADD_FAILURE() << "cannot start " << kTestAppPath
                    << " under setpriv: " << app.status().message();
      return nullptr;
    }
    app_ = std::move(app).value();
    if (!app_->WaitForPrefix("READY", Millis(20000))) {
      ADD_FAILURE() << "the app (uid " << kAppUid << ") did not print READY\n"
                    << app_->Describe() << DaemonLog();
      return nullptr;
    }
    return app_.get();
  }

  v1::StatusReply Status() {
    v1::StatusReply status;
    CommandResult r =
        RunCommand({kCtlPath, "--socket", socket_, "status", "--json"}, Millis(10000));
    EXPECT_EQ(r.exit_code(), 0) << r.Describe();
    google::protobuf::util::JsonParseOptions po;
    po.ignore_unknown_fields = true;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &status, po).ok()) << r.out;
    return status;
  }

  std::string DaemonLog() const { return "daemon log:\n" + ReadFile(dir_.path() + "/daemon.log"); }

  std::string setpriv_;
  TempDir dir_;
  std::string run_;
  std::string socket_;
  std::unique_ptr<Child> daemon_;
  std::unique_ptr<Child> app_;
};

TEST_F(Privileges, UnitCapabilitiesLetTheDaemonRemoveAnotherUsersSegments) {
  REQUIRE_MCDMACTL();
  const std::string caps = UnitCapabilities();
  ASSERT_EQ(caps, "+chown,+fowner") << "AmbientCapabilities= in " << MCDMA_SYSTEMD_UNIT;
  ASSERT_TRUE(StartDaemon(caps));
  Child* app = StartApp();
  ASSERT_NE(app, nullptr);
  // The app mapped its mailbox and buffer, so the daemon unlinked both.
  EXPECT_TRUE(PollUntil([&] { return DaemonSegments(socket_).empty(); }, Millis(5000)))
      << "left in /dev/shm: " << DaemonSegments(socket_).size() << "\n"
      << DaemonLog();
  ASSERT_TRUE(app->WriteStdin("verify 7\n"));
  EXPECT_EQ(app->WaitForPrefix("VERIFY", Millis(10000)).value_or(""),
            "VERIFY ok bytes=" + std::to_string(4 << 20));
  v1::StatusReply status = Status();
  EXPECT_EQ(status.sessions(), 1u);
  EXPECT_EQ(status.segment_unlink_failures(), 0u);
  app->CloseStdin();
  EXPECT_TRUE(ExitedWith(app->WaitExit(Millis(10000)), 0)) << app->Describe();
  EXPECT_TRUE(PollUntil([&] { return Status().sessions() == 0; }, Millis(10000)));
  EXPECT_TRUE(DaemonSegments(socket_).empty());
  EXPECT_EQ(Status().segment_unlink_failures(), 0u);
}

TEST_F(Privileges, WithoutFownerEachFailedUnlinkIsLoggedAndCounted) {
  REQUIRE_MCDMACTL();
  ASSERT_TRUE(StartDaemon("+chown"));
  Child* app = StartApp();
  ASSERT_NE(app, nullptr);
  // Mailbox and buffer: both chowned to the app, neither removable.
  EXPECT_TRUE(PollUntil([&] { return Status().segment_unlink_failures() >= 2; }, Millis(5000)))
      << DaemonLog();
  EXPECT_EQ(DaemonSegments(socket_).size(), 2u);
  for (const std::string& name : DaemonSegments(socket_)) {
    struct stat st {};
    ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_uid, kAppUid) << name;
  }
  EXPECT_NE(ReadFile(dir_.path() + "/daemon.log").find("cannot unlink segment"), std::string::npos)
      << DaemonLog();
  // Serving goes on.
  ASSERT_TRUE(app->WriteStdin("verify 7\n"));
  EXPECT_EQ(app->WaitForPrefix("VERIFY", Millis(10000)).value_or(""),
            "VERIFY ok bytes=" + std::to_string(4 << 20));
}

}  // namespace
}  // namespace mcdma::itest
