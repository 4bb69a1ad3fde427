// The integration-test fixture: a real mcdma-rpcd child per test on a socket
// in a fresh mkdtemp directory, real client processes (mcdma_testapp), and
// mcdmactl to look at the daemon's state.
//
// Lifetime: SetUp starts the daemon and waits until its socket accepts;
// TearDown SIGKILLs every app the test started, SIGTERMs the daemon (which
// must exit 0 within 15 s: the drain path is checked by every test), then
// removes the directory. On any failure it prints the daemon's log and every
// app's stdout/stderr. Nothing survives a test, even a failed one.
#pragma once

#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mcdma/v1/admin.pb.h"
#include "test_util.hpp"

namespace mcdma::itest {

inline constexpr const char* kDaemonPath = MCDMA_RPCD_PATH;
inline constexpr const char* kTestAppPath = MCDMA_TESTAPP_PATH;
inline constexpr const char* kCtlPath = MCDMA_CTL_PATH;  // "" when the target did not exist

// Tests that need mcdmactl skip, saying why, when it was not built.
#define REQUIRE_MCDMACTL()                                                                         \
  do {                                                                                             \
    if (::mcdma::itest::kCtlPath[0] == '\0') {                                                     \
      GTEST_SKIP() << "mcdmactl was not built: there was no CMake target `mcdmactl` "              \
                      "(tools/mcdmactl) when tests/integration was configured; re-run cmake once " \
                      "it exists";                                                                 \
    }                                                                                              \
  } while (0)

// /dev/shm entries whose names start with `prefix`.
std::set<std::string> ListShm(const std::string& prefix = "mcdma-");
// Sleeps in steps of `step` until pred() or the timeout; the last pred().
bool PollUntil(const std::function<bool()>& pred, Millis timeout, Millis step = Millis(50));
// How long a daemon may take to listen on its socket.
inline constexpr Millis kDaemonListenWait(20000);

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Extra daemon flags for a test class.
  virtual std::vector<std::string> DaemonArgs() const { return {}; }

  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_.path(); }
  Child* daemon() { return daemon_.get(); }
  bool DaemonAlive() { return daemon_ && daemon_->Alive(); }
  // Starts a new daemon on the same socket (the old one must have exited).
  bool RestartDaemon() { return StartDaemon(); }

  // Starts `mcdma_testapp ROLE --socket S ARGS...` (stderr to a log file in
  // the test directory). nullptr (and a test failure) if it cannot start.
  Child* StartApp(const std::string& role, const std::vector<std::string>& args);
  // Starts an app and waits (up to 20 s) for its READY line; nullptr (and a
  // failure naming the app's output) if it does not come.
  Child* StartReady(const std::string& role, const std::vector<std::string>& args);

  // mcdmactl --socket S ARGS... (10 s limit).
  CommandResult Ctl(const std::vector<std::string>& args);
  // `mcdmactl --socket S COMMAND --json`, parsed into `out` (the reply's
  // proto message: the JSON is the proto3 JSON mapping). Fails the test and
  // returns false if the command fails or prints something else.
  bool CtlJson(const std::string& command, google::protobuf::Message* out,
               std::string* raw = nullptr);

  // Counters of one op ("call", "read", ...) from a status reply.
  static v1::OpCounters Op(const v1::StatusReply& status, const std::string& op);

  // The daemon log and every app's output, for failure messages.
  std::string Describe() const;

  std::set<std::string> shm_baseline_;  // mcdma-* names before the daemon started

 private:
  bool StartDaemon();

  TempDir dir_;
  std::string socket_;
  std::unique_ptr<Child> daemon_;
  std::vector<std::unique_ptr<Child>> apps_;
  int app_counter_ = 0;
};

}  // namespace mcdma::itest
