// The daemon going away under busy clients: SIGKILL (a crash) and SIGTERM
// (a drain). Clients fail with UNAVAILABLE instead of hanging, nothing leaks
// in /dev/shm, and a new daemon on the same socket serves new clients.
#include <signal.h>

#include <filesystem>

#include "raw_session.hpp"
#include "sustain_world.hpp"

namespace mcdma::itest {
namespace {

class DaemonLifecycle : public SustainWorld {
 protected:
  // Every sustain client reports a failed call naming UNAVAILABLE and exits.
  void ExpectClientsFailUnavailable() {
    for (Child* c : clients_) {
      auto fail = c->WaitForPrefix("FAIL", kProgressWait);
      ASSERT_TRUE(fail.has_value()) << "a client did not notice that the daemon is gone\n"
                                    << c->Describe();
      std::cerr << "client pid " << c->pid() << ": " << *fail << "\n";
      EXPECT_NE(fail->find("UNAVAILABLE"), std::string::npos) << *fail;
      EXPECT_TRUE(ExitedWith(c->WaitExit(Millis(30000)), 1)) << c->Describe();
    }
  }

  // A fresh server and caller work against the daemon now on the socket.
  void ExpectNewClientsWork() {
    ASSERT_NE(StartReady("serve", {"--service", "echo-again"}), nullptr);
    Child* caller =
        StartApp("call", {"--service", "echo-again", "--threads", "2", "--calls", "300"});
    ASSERT_NE(caller, nullptr);
    auto r = caller->WaitForPrefix("{", Millis(60000));
    ASSERT_TRUE(r.has_value()) << caller->Describe();
    EXPECT_TRUE(ExitedWith(caller->WaitExit(Millis(30000)), 0)) << *r;
  }
};

TEST_F(DaemonLifecycle, KilledDaemonFailsClientsWithUnavailableAndLeaksNothing) {
  ASSERT_NO_FATAL_FAILURE(StartWorld());
  daemon()->Signal(SIGKILL);
  ASSERT_TRUE(daemon()->WaitExit(Millis(5000)));
  ASSERT_NO_FATAL_FAILURE(ExpectClientsFailUnavailable());
  // Idle apps only lost their session; their libraries did not crash.
  EXPECT_TRUE(server_->Alive()) << server_->Describe();
  EXPECT_TRUE(exporter_->Alive()) << exporter_->Describe();
  // Every segment was unlinked once mapped: a crashed daemon leaks nothing.
  ExpectNoNewShmEntries();
  // A new daemon replaces the dead one's stale socket.
  ASSERT_TRUE(RestartDaemon());
  ExpectNewClientsWork();
}

TEST_F(DaemonLifecycle, SigtermUnderLoadDrainsExitsZeroAndFailsClientsWithUnavailable) {
  ASSERT_NO_FATAL_FAILURE(StartWorld());
  daemon()->Signal(SIGTERM);
  auto st = daemon()->WaitExit(Millis(20000));
  ASSERT_TRUE(st.has_value()) << "the daemon did not exit within 20 s of SIGTERM";
  EXPECT_TRUE(ExitedWith(st, 0)) << DescribeStatus(*st);
  EXPECT_FALSE(std::filesystem::exists(socket()));
  ASSERT_NO_FATAL_FAILURE(ExpectClientsFailUnavailable());
  ExpectNoNewShmEntries();
  ASSERT_TRUE(RestartDaemon());
  ExpectNewClientsWork();
}

bool InShm(const std::string& segment) { return ListShm().count(segment.substr(1)) != 0; }

// A daemon killed before its apps mapped their segments leaves those names
// in /dev/shm. The next daemon on the same socket (as systemd restarts it)
// removes them, and none of another daemon's.
TEST_F(DaemonLifecycle, RestartedDaemonRemovesTheSegmentsItsKilledInstanceLeft) {
  TempDir other_dir;
  const std::string other_socket = other_dir.path() + "/other.sock";
  auto spawned =
      SpawnDaemon({kDaemonPath, "--socket", other_socket, "--log-level", "info"}, other_socket,
                  other_dir.path() + "/daemon.log", false, kDaemonListenWait);
  ASSERT_TRUE(spawned.ok()) << spawned.status().message();
  std::unique_ptr<Child> other = std::move(spawned).value();
  std::string error;
  auto other_session = RawSession::Open(other_socket, &error);
  ASSERT_TRUE(other_session) << error;
  auto other_segment = other_session->AllocUnmapped(1 << 16);
  ASSERT_TRUE(other_segment.ok()) << other_segment.status().ToString();

  auto session = RawSession::Open(socket(), &error);
  ASSERT_TRUE(session) << error;
  std::vector<std::string> left;
  for (int i = 0; i < 3; ++i) {
    auto seg = session->AllocUnmapped(1 << 16);
    ASSERT_TRUE(seg.ok()) << seg.status().ToString();
    ASSERT_TRUE(InShm(*seg)) << *seg;
    left.push_back(*seg);
  }
  // One daemon's names share its tag; another socket's daemon has another.
  const std::string tag = left[0].substr(9, 8);
  for (const auto& seg : left) EXPECT_EQ(seg.substr(9, 8), tag) << seg;
  EXPECT_NE(other_segment->substr(9, 8), tag) << *other_segment;

  daemon()->Signal(SIGKILL);
  ASSERT_TRUE(daemon()->WaitExit(Millis(5000)));
  session.reset();
  for (const auto& seg : left) ASSERT_TRUE(InShm(seg)) << seg << " vanished with the daemon";

  ASSERT_TRUE(RestartDaemon());
  for (const auto& seg : left) {
    EXPECT_FALSE(InShm(seg)) << "the restarted daemon left its killed instance's " << seg;
  }
  EXPECT_TRUE(InShm(*other_segment))
      << "the daemon on another socket lost its unmapped segment " << *other_segment;
  EXPECT_NE(ReadFile(dir() + "/daemon.log").find("left by an earlier instance"), std::string::npos);
  ExpectNewClientsWork();

  other_session.reset();
  other->Signal(SIGTERM);
  EXPECT_TRUE(ExitedWith(other->WaitExit(Millis(15000)), 0));
  EXPECT_FALSE(InShm(*other_segment));
}

}  // namespace
}  // namespace mcdma::itest
