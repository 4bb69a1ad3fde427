// Shared memory is untrusted: an app that scribbles random bytes over its
// whole mailbox gets errors (or is evicted) and harms nobody else.
#include <regex>

#include "daemon_fixture.hpp"
#include "test_util.hpp"

namespace mcdma::itest {
namespace {

class Garbage : public DaemonTest {
 protected:
  // An echo server, a well-behaved caller, and the garbage process in
  // `mode`, all at once. Returns the garbage process's report line.
  std::string RunScenario(const std::string& mode) {
    Child* server = StartReady("serve", {"--service", "echo"});
    EXPECT_NE(server, nullptr);
    Child* garbage = StartReady(
        "garbage", {"--service", "echo", "--mode", mode, "--rounds", "300", "--seed", "1234"});
    EXPECT_NE(garbage, nullptr);
    Child* caller = StartApp("call", {"--service", "echo", "--threads", "2", "--calls", "5000",
                                      "--max-payload", "16384", "--seed", "5"});
    EXPECT_NE(caller, nullptr);
    if (server == nullptr || garbage == nullptr || caller == nullptr) return "";
    EXPECT_TRUE(caller->WaitForPrefix("STARTED", Millis(20000))) << caller->Describe();
    EXPECT_TRUE(garbage->WriteStdin("go\n"));

    // The scribbler finishes within its bound (no HUNG) with a report.
    auto report = garbage->WaitForLine(
        [](const std::string& l) { return l.rfind("{", 0) == 0 || l.rfind("HUNG", 0) == 0; },
        Millis(90000));
    EXPECT_TRUE(report.has_value()) << "the garbage process printed no report\n"
                                    << garbage->Describe();
    if (!report) return "";
    EXPECT_EQ(report->rfind("HUNG", 0), std::string::npos) << *report << "\n"
                                                           << garbage->Describe();
    std::regex code_re("\"([A-Z_]+)\"");
    for (std::sregex_iterator it(report->begin(), report->end(), code_re), end; it != end; ++it) {
      EXPECT_NE((*it)[1].str(), "UNKNOWN") << *report;
    }
    std::cerr << "garbage process (" << mode << ") report: " << *report << "\n";
    auto done = garbage->WaitForLine(
        [](const std::string& l) { return l == "DONE" || l.rfind("HUNG", 0) == 0; }, Millis(60000));
    EXPECT_EQ(done.value_or("(nothing)"), "DONE") << garbage->Describe();
    EXPECT_TRUE(ExitedWith(garbage->WaitExit(Millis(30000)), 0)) << garbage->Describe();

    // The well-behaved caller never noticed.
    auto result = caller->WaitForPrefix("{", Millis(240000));
    EXPECT_TRUE(result.has_value()) << caller->Describe();
    if (!result) return *report;
    EXPECT_TRUE(ExitedWith(caller->WaitExit(Millis(30000)), 0)) << *result << "\n"
                                                                << caller->Describe();
    EXPECT_EQ(Field(*result, "ok"), 10000u) << *result;
    EXPECT_EQ(Field(*result, "failed"), 0u) << *result;
    EXPECT_EQ(Field(*result, "mismatch"), 0u) << *result;
    EXPECT_TRUE(DaemonAlive());
    EXPECT_TRUE(server->Alive()) << server->Describe();

    // And a new caller after the fact passes too.
    Child* after = StartApp("call", {"--service", "echo", "--threads", "2", "--calls", "500",
                                     "--max-payload", "65536"});
    EXPECT_NE(after, nullptr);
    if (after == nullptr) return *report;
    auto r2 = after->WaitForPrefix("{", Millis(60000));
    EXPECT_TRUE(r2.has_value()) << after->Describe();
    EXPECT_TRUE(ExitedWith(after->WaitExit(Millis(30000)), 0))
        << r2.value_or("") << after->Describe();
    return *report;
  }

  v1::StatusReply Status() {
    v1::StatusReply status;
    EXPECT_TRUE(CtlJson("status", &status));
    std::cerr << "daemon counted ring_faults=" << status.ring_faults()
              << " invalid_descriptors=" << status.invalid_descriptors() << "\n";
    return status;
  }

  void ExpectGarbageSessionGone() {
    EXPECT_TRUE(PollUntil(
        [&] {
          v1::SessionsReply sessions;
          if (!CtlJson("sessions", &sessions)) return false;
          for (const auto& s : sessions.sessions()) {
            if (s.app_name() == "testapp-garbage") return false;
          }
          return true;
        },
        Millis(10000)));
  }
};

// Random bytes over the whole mailbox (indices, bells, rings, arena).
TEST_F(Garbage, GarbageMailboxDoesNotHurtOthers) {
  std::string report = RunScenario("mailbox");
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(report.empty());
  // The scribbler's own operations failed with named errors.
  EXPECT_GT(Field(report, "errors").value_or(0), 0u) << report;
  REQUIRE_MCDMACTL();
  v1::StatusReply status = Status();
  EXPECT_GT(status.ring_faults() + status.invalid_descriptors(), 0u)
      << "the daemon counted no fault for a mailbox full of random bytes";
  ExpectGarbageSessionGone();
}

// Sane ring indices, random descriptors (many with real opcodes and ids):
// each is rejected on its own, and nobody else's call or memory is touched.
TEST_F(Garbage, RandomDescriptorsAreRejectedAndHurtNobody) {
  std::string report = RunScenario("descriptors");
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_FALSE(report.empty());
  REQUIRE_MCDMACTL();
  v1::StatusReply status = Status();
  EXPECT_GT(status.invalid_descriptors(), 0u) << "random descriptors were not counted as invalid";
  ExpectGarbageSessionGone();
}

}  // namespace
}  // namespace mcdma::itest
