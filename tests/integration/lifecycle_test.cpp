// The daemon going away under busy clients: SIGKILL (a crash) and SIGTERM
// (a drain). Clients fail with UNAVAILABLE instead of hanging, nothing leaks
// in /dev/shm, and a new daemon on the same socket serves new clients.
#include <signal.h>

#include <filesystem>

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

}  // namespace
}  // namespace mcdma::itest
