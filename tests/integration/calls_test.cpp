// Request/reply under load: many processes, many threads, every byte checked.
#include <signal.h>
#include <sys/wait.h>

#include <regex>
#include <thread>

#include "daemon_fixture.hpp"
#include "test_util.hpp"

namespace mcdma::itest {
namespace {

class Calls : public DaemonTest {};

constexpr int kProcesses = 4;
constexpr int kThreads = 8;
constexpr int kCallsPerThread = 10000;
constexpr uint64_t kCallsTotal = uint64_t{kProcesses} * kThreads * kCallsPerThread;

TEST_F(Calls, ManyProcessesManyThreadsCallsAllVerified) {
  Child* server = StartReady("serve", {"--service", "echo"});
  ASSERT_NE(server, nullptr);
  std::vector<Child*> callers;
  for (int p = 0; p < kProcesses; ++p) {
    Child* c = StartApp("call", {"--service", "echo", "--threads", std::to_string(kThreads),
                                 "--calls", std::to_string(kCallsPerThread), "--max-payload",
                                 "65536", "--seed", std::to_string(100 + p)});
    ASSERT_NE(c, nullptr);
    callers.push_back(c);
  }
  uint64_t ok_total = 0;
  for (Child* c : callers) {
    auto result = c->WaitForPrefix("{", Millis(240000));
    ASSERT_TRUE(result.has_value()) << "a caller printed no result line\n" << c->Describe();
    auto status = c->WaitExit(Millis(30000));
    EXPECT_TRUE(ExitedWith(status, 0)) << *result << "\n" << c->Describe();
    EXPECT_EQ(Field(*result, "ok"), uint64_t{kThreads} * kCallsPerThread) << *result;
    EXPECT_EQ(Field(*result, "failed"), 0u) << *result;
    EXPECT_EQ(Field(*result, "mismatch"), 0u) << *result;
    ok_total += Field(*result, "ok").value_or(0);
  }
  EXPECT_EQ(ok_total, kCallsTotal);
  ASSERT_TRUE(DaemonAlive());
  EXPECT_TRUE(server->Alive()) << server->Describe();

  REQUIRE_MCDMACTL();
  v1::StatusReply status;
  ASSERT_TRUE(CtlJson("status", &status));
  v1::OpCounters call = Op(status, "call");
  EXPECT_GE(call.ok(), kCallsTotal);
  EXPECT_EQ(call.failed(), 0u);
  EXPECT_EQ(call.submitted(), call.ok());
  v1::OpCounters reply = Op(status, "reply");
  EXPECT_GE(reply.ok(), kCallsTotal);
  EXPECT_EQ(reply.failed(), 0u);
  EXPECT_EQ(status.invalid_descriptors(), 0u);
  EXPECT_EQ(status.ring_faults(), 0u);
  EXPECT_EQ(status.inflight(), 0u);
}

// A server that is killed mid-load: its callers' calls end with named errors
// (none hangs), and a new server under the same name serves the same callers.
TEST_F(Calls, KilledServerFailsCallsWithNamedErrors) {
  Child* server = StartReady("serve", {"--service", "echo"});
  ASSERT_NE(server, nullptr);
  Child* caller =
      StartApp("call", {"--service", "echo", "--threads", "4", "--calls", "1000000",
                        "--max-payload", "4096", "--timeout-ms", "5000", "--stop-on-error"});
  ASSERT_NE(caller, nullptr);
  ASSERT_TRUE(caller->WaitForPrefix("STARTED", Millis(20000))) << caller->Describe();
  // Let some calls complete, then kill the server under them.
  std::this_thread::sleep_for(Millis(300));
  server->Signal(SIGKILL);
  ASSERT_TRUE(server->WaitExit(Millis(5000)));
  auto result = caller->WaitForPrefix("{", Millis(120000));
  ASSERT_TRUE(result.has_value()) << "callers hung after their server was killed\n"
                                  << caller->Describe();
  caller->WaitExit(Millis(30000));
  EXPECT_GT(Field(*result, "failed").value_or(0), 0u) << *result;
  EXPECT_EQ(Field(*result, "mismatch"), 0u) << *result;
  // Every failure is one of the named "the server is gone" errors.
  std::regex code_re("\"([A-Z_]+)\":[0-9]+");
  std::string errors = result->substr(result->find("\"errors\""));
  for (std::sregex_iterator it(errors.begin(), errors.end(), code_re), end; it != end; ++it) {
    std::string code = (*it)[1].str();
    EXPECT_TRUE(code == "PEER_GONE" || code == "NOT_FOUND")
        << "unexpected error " << code << " in " << *result;
  }
  ASSERT_TRUE(DaemonAlive());
  Child* again = StartReady("serve", {"--service", "echo"});
  ASSERT_NE(again, nullptr);
  Child* after = StartApp(
      "call", {"--service", "echo", "--threads", "2", "--calls", "500", "--max-payload", "8192"});
  ASSERT_NE(after, nullptr);
  auto r2 = after->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(r2.has_value()) << after->Describe();
  EXPECT_TRUE(ExitedWith(after->WaitExit(Millis(30000)), 0)) << *r2 << after->Describe();
}

// The harness's own check: a server that flips one byte in every 50th reply
// is caught (so a pass above means the bytes really were compared).
TEST_F(Calls, CallerChecksDetectCorruptedReplies) {
  ASSERT_NE(StartReady("serve", {"--service", "echo", "--corrupt-every", "50"}), nullptr);
  Child* caller = StartApp(
      "call", {"--service", "echo", "--threads", "2", "--calls", "500", "--max-payload", "4096"});
  ASSERT_NE(caller, nullptr);
  auto result = caller->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(result.has_value()) << caller->Describe();
  EXPECT_TRUE(ExitedWith(caller->WaitExit(Millis(30000)), 1)) << *result;
  EXPECT_GE(Field(*result, "mismatch").value_or(0), 15u) << *result;
  EXPECT_EQ(Field(*result, "failed"), 0u) << *result;
}

// A server whose handler blocks (and with it its progress thread): callers'
// calls end with TIMEOUT at their deadline, none hangs; once the server
// unblocks, the stale calls drain and fresh calls pass again.
TEST_F(Calls, StalledServerTimesCallersOutThenRecovers) {
  Child* server = StartReady("serve", {"--service", "echo", "--stall-after", "100"});
  ASSERT_NE(server, nullptr);
  Child* caller =
      StartApp("call", {"--service", "echo", "--threads", "4", "--calls", "2000", "--depth", "4",
                        "--max-payload", "1024", "--timeout-ms", "1500", "--stop-on-error"});
  ASSERT_NE(caller, nullptr);
  ASSERT_TRUE(server->WaitForPrefix("STALLED", Millis(30000))) << server->Describe();
  auto result = caller->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(result.has_value()) << "callers of a stalled server hung\n" << caller->Describe();
  caller->WaitExit(Millis(30000));
  // Only the calls answered before the stall can have passed.
  EXPECT_LE(Field(*result, "ok").value_or(0), 100u) << *result;
  EXPECT_GT(Field(*result, "failed").value_or(0), 0u) << *result;
  EXPECT_EQ(Field(*result, "mismatch"), 0u) << *result;
  std::regex code_re("\"([A-Z_]+)\":[0-9]+");
  std::string errors = result->substr(result->find("\"errors\""));
  for (std::sregex_iterator it(errors.begin(), errors.end(), code_re), end; it != end; ++it) {
    EXPECT_EQ((*it)[1].str(), "TIMEOUT") << *result;
  }
  ASSERT_TRUE(server->WriteStdin("unstall\n"));
  ASSERT_TRUE(server->WaitForPrefix("UNSTALLED", Millis(10000))) << server->Describe();
  Child* after = StartApp(
      "call", {"--service", "echo", "--threads", "2", "--calls", "300", "--max-payload", "8192"});
  ASSERT_NE(after, nullptr);
  auto r2 = after->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(r2.has_value()) << after->Describe();
  EXPECT_TRUE(ExitedWith(after->WaitExit(Millis(30000)), 0)) << *r2 << after->Describe();
  ASSERT_TRUE(DaemonAlive());
  EXPECT_TRUE(server->Alive()) << server->Describe();
  REQUIRE_MCDMACTL();
  v1::StatusReply status;
  EXPECT_TRUE(PollUntil([&] { return CtlJson("status", &status) && status.inflight() == 0; },
                        Millis(10000)))
      << "inflight=" << status.inflight();
}

}  // namespace
}  // namespace mcdma::itest
