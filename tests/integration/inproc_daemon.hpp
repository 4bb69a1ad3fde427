// The in-process daemon fixture: a real mcdma::daemon::Daemon in the test
// process (a real Unix socket in a fresh mkdtemp directory, real shared
// memory, the real engine thread and gRPC server) and real mcdma::Client
// sessions on it. It starts in milliseconds, where a daemon process takes a
// fork, an exec and a poll of its socket, so tests of client and daemon
// together can be many and quick. What needs a process stays with
// daemon_fixture.hpp: flags, SIGTERM, kill -9, crash reclaim.
//
// Lifetime: SetUp starts the daemon; TearDown closes the test's clients,
// drains and destroys the daemon (Daemon's teardown, in reverse order of
// start), then checks that the socket file and every mailbox and buffer
// segment are gone. Tests run on the gtest thread; the daemon's threads are
// its own.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "mcdma/client.hpp"
#include "mcdma/v1/admin.pb.h"
#include "test_util.hpp"

namespace mcdma::itest {

class InprocDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Adjusts the daemon's options before it starts (socket, host_id and log
  // level are set already).
  virtual void Configure(daemon::Options& /*options*/) const {}

  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_.path(); }
  // The daemon; null after StopDaemon().
  daemon::Daemon* daemon() { return daemon_.get(); }
  // Drains and destroys the daemon now (TearDown's checks still run).
  void StopDaemon();

  // A new session named `app_name`; the fixture keeps it and closes it in
  // TearDown. nullptr (and a test failure) if Connect fails.
  Client* Connect(const std::string& app_name = "inproc-test");
  // The Admin service's Status, over the control socket as mcdmactl asks.
  Result<v1::StatusReply> AdminStatus();
  // Counters of one op ("call", "read", ...) from a status reply.
  static v1::OpCounters Op(const v1::StatusReply& status, const std::string& op);

  static constexpr const char* kHostId = "inproc-host";

 private:
  TempDir dir_;
  std::string socket_;
  std::unique_ptr<daemon::Daemon> daemon_;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace mcdma::itest
