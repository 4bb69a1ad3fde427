// The in-process daemon itself: what Status and a session say about it, a
// second daemon on its socket, draining, and how quickly one starts.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "inproc_daemon.hpp"

namespace mcdma::itest {
namespace {

class InprocStatus : public InprocDaemonTest {};

TEST_F(InprocStatus, StatusAndSessionInfoDescribeThisDaemon) {
  Client* a = Connect("app-a");
  Client* b = Connect("app-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->Serve("svc", [](ServerCall& call) { (void)call.Reply(call.view()); }).ok());
  auto buffer = b->Alloc(65536);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  SessionInfo info = a->info();
  EXPECT_EQ(info.host_id, kHostId);
  EXPECT_EQ(info.socket, socket());
  EXPECT_NE(info.session_id, b->info().session_id);

  auto status = AdminStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->host_id(), kHostId);
  EXPECT_EQ(status->socket(), socket());
  EXPECT_EQ(status->pid(), static_cast<uint32_t>(getpid())) << "the daemon runs in this process";
  EXPECT_EQ(status->state(), "serving");
  EXPECT_EQ(status->sessions(), 2u);
  EXPECT_EQ(status->services(), 1u);
  EXPECT_EQ(status->buffers(), 1u);
  EXPECT_EQ(status->buffer_bytes(), 65536u);
  EXPECT_EQ(status->version(), info.daemon_version);
}

TEST_F(InprocStatus, SecondDaemonOnTheSocketFailsAndLeavesTheFirstServing) {
  daemon::Options options = daemon()->options();
  auto second = daemon::Daemon::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kAlreadyExists) << second.status().ToString();
  EXPECT_NE(second.status().message().find(socket()), std::string::npos);
  // Its failed start removed nothing of the first's.
  EXPECT_TRUE(std::filesystem::exists(socket()));
  EXPECT_NE(Connect("after"), nullptr);
}

TEST_F(InprocStatus, DrainClosesSessionsAndRefusesNewOnes) {
  Client* c = Connect("app");
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Alloc(4096).ok());
  daemon()->Drain("the test drains");
  // The session's stream ends at once, but the client learns it on its own
  // thread: until then the daemon answers for the session it closed.
  auto after = c->Alloc(4096);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!after.ok() && after.status().code() == Code::kNotFound &&
         std::chrono::steady_clock::now() < give_up) {
    EXPECT_NE(after.status().message().find("no session"), std::string::npos)
        << after.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    after = c->Alloc(4096);
  }
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), Code::kUnavailable) << after.status().ToString();
  ClientOptions o;
  o.socket = socket();
  auto late = Client::Connect(o);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Code::kUnavailable) << late.status().ToString();
  StopDaemon();
  EXPECT_FALSE(std::filesystem::exists(socket()));
}

// The point of the fixture: a daemon in milliseconds, not a process start.
TEST_F(InprocStatus, AnotherDaemonStartsAndStopsWithinASecond) {
  daemon::Options options = daemon()->options();
  options.socket = dir() + "/second.sock";
  auto t0 = std::chrono::steady_clock::now();
  auto second = daemon::Daemon::Start(options);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ClientOptions o;
  o.socket = options.socket;
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  (*c)->Close();
  (*second)->Drain("the test stops it");
  second->reset();
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(std::filesystem::exists(options.socket));
  EXPECT_LT(took, std::chrono::seconds(1))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

}  // namespace
}  // namespace mcdma::itest
