// Links that break under load: host-a's apps keep calling host-b's echo
// service and writing/reading host-b's export (testapp peer-load) while the
// test kills host-b's daemon (kill -9) or cuts the wire between the hosts
// (netns only). Every operation in flight when the link broke must end with
// a named link error within its deadline (plus slack), nothing may hang,
// host-a's daemon and its local service must carry on, and once host-b is
// back the link must come up under a new generation and traffic pass again.
#include <signal.h>

#include <cctype>
#include <set>

#include "test_util.hpp"
#include "two_hosts.hpp"

namespace mcdma::itest {
namespace {

constexpr int kLoads = 2;
constexpr uint64_t kSlot = 1 << 20;
constexpr int64_t kOpTimeoutMs = 5000;
// How late past its deadline an operation may end. libmcdma gives up on the
// daemon 2 s past the deadline, so anything near that means the daemon never
// answered.
constexpr int64_t kSlackMs = 1500;
const Millis kProgressWait(30000);

class LinkFailure : public TwoHosts {
 protected:
  // On `server`: an echo server and an exporter of 1 + kLoads slots (slot 0
  // holds seed 11), granted to `client_id`.
  void StartServing(Host& server, const std::string& client_id) {
    server_ = StartReady(server, "serve", {"--service", "echo"});
    ASSERT_NE(server_, nullptr);
    exporter_ = StartReady(server, "fill",
                           {"--export", "shared", "--size", std::to_string((kLoads + 1) * kSlot),
                            "--seed", "11", "--allowed-peers", client_id});
    ASSERT_NE(exporter_, nullptr);
  }

  // On `client`: kLoads peer-load apps using `server_id`'s echo service and
  // export; returns once each has passed calls and transfers.
  void StartLoads(Host& client, const std::string& server_id) {
    for (int k = 1; k <= kLoads; ++k) {
      Child* c =
          StartReady(client, "peer-load",
                     {"--service", server_id + "/echo", "--export", "shared", "--peer", server_id,
                      "--slot", std::to_string(k), "--slot-bytes", std::to_string(kSlot),
                      "--read-seed", "11", "--seed", std::to_string(1000 * k), "--call-threads",
                      "3", "--timeout-ms", std::to_string(kOpTimeoutMs)});
      ASSERT_NE(c, nullptr);
      loads_.push_back(c);
    }
    for (Child* c : loads_) {
      ASSERT_TRUE(c->WaitForPrefix("CALLS", kProgressWait)) << c->Describe();
      ASSERT_TRUE(c->WaitForPrefix("XFERS", kProgressWait)) << c->Describe();
    }
  }

  // The usual world: host-b serves, host-a's apps load it.
  void StartWorld() {
    ASSERT_NO_FATAL_FAILURE(StartServing(b(), "host-a"));
    ASSERT_NO_FATAL_FAILURE(StartLoads(a(), "host-b"));
  }

  // Every load app notes the start ("mark") and the end ("broken") of the
  // window in which the test broke the link (answers MARKED and BROKEN).
  void Note(const std::string& command, const std::string& answer) {
    for (Child* c : loads_) {
      ASSERT_TRUE(c->WriteStdin(command + "\n"));
      ASSERT_TRUE(c->WaitForPrefix(answer, Millis(10000))) << c->Describe();
    }
  }

  // The app's STATUS line (pre_inflight, calls_ok, xfers_ok).
  static std::string LoadStatus(Child* c) {
    if (!c->WriteStdin("status\n")) return "";
    return c->WaitForPrefix("STATUS", Millis(10000)).value_or("");
  }

  // Waits until no operation started before the link broke is still running
  // in any load app; false if one still is after `bound`.
  bool InFlightEnd(Millis bound, std::string* seen) {
    return PollUntil(
        [&] {
          seen->clear();
          bool none = true;
          for (Child* c : loads_) {
            std::string s = LoadStatus(c);
            *seen += s + "; ";
            none = none && Field(s, "pre_inflight") == 0u;
          }
          return none;
        },
        bound, Millis(100));
  }

  // Both calls and transfers of every load app pass again.
  void ExpectTrafficPasses() {
    for (Child* c : loads_) {
      std::string before = LoadStatus(c);
      uint64_t calls = Field(before, "calls_ok").value_or(0);
      uint64_t xfers = Field(before, "xfers_ok").value_or(0);
      EXPECT_TRUE(PollUntil(
          [&] {
            std::string now = LoadStatus(c);
            return Field(now, "calls_ok").value_or(0) > calls &&
                   Field(now, "xfers_ok").value_or(0) > xfers;
          },
          kProgressWait, Millis(200)))
          << "calls or transfers did not pass again after the link came back: " << before << " -> "
          << LoadStatus(c) << "\n"
          << c->Describe();
    }
  }

  // Ends the load apps and checks how every failure ended. `pre_codes`: what
  // an operation in flight when the link broke may end with. `inflight_fail`:
  // whether some such operation must have failed (not after a graceful stop,
  // whose drain lets operations in flight finish).
  void ExpectNamedFailures(const std::set<std::string>& pre_codes, bool inflight_fail = true) {
    const std::set<std::string> post_codes = {"LINK_DOWN", "PEER_GONE", "UNAVAILABLE",
                                              "NOT_FOUND", "REVOKED",   "TIMEOUT"};
    uint64_t pre_total = 0;
    for (Child* c : loads_) {
      c->CloseStdin();
      auto line = c->WaitForPrefix("{", Millis(kOpTimeoutMs + 15000));
      ASSERT_TRUE(line.has_value()) << "a load app did not finish\n" << c->Describe();
      EXPECT_TRUE(ExitedWith(c->WaitExit(Millis(10000)), 0)) << c->Describe();
      std::cerr << "peer-load pid " << c->pid() << ": " << *line << "\n";
      EXPECT_EQ(Field(*line, "mismatch"), 0u) << *line;
      EXPECT_TRUE(CodeCounts(*line, "early").empty())
          << "operations failed while the link was healthy: " << *line;
      for (const auto& [code, n] : CodeCounts(*line, "pre")) {
        EXPECT_TRUE(pre_codes.count(code) != 0)
            << n << " operation(s) in flight when the link broke ended " << code << ": " << *line;
        pre_total += n;
      }
      for (const auto& [code, n] : CodeCounts(*line, "post")) {
        EXPECT_TRUE(post_codes.count(code) != 0)
            << n << " operation(s) started on a broken link ended " << code << ": " << *line;
      }
      EXPECT_EQ(Field(*line, "early_timeouts"), 0u) << "TIMEOUT before the deadline: " << *line;
      EXPECT_LE(IntField(*line, "max_overrun_ms").value_or(0), kSlackMs)
          << "an operation ended more than " << kSlackMs << " ms past its deadline: " << *line;
    }
    loads_.clear();
    // Each app has 4 threads that are almost always inside an operation.
    if (!inflight_fail) return;
    EXPECT_GT(pre_total, 0u) << "no operation was in flight when the link broke: the test "
                                "did not test what it claims";
  }

  // h's daemon and a service local to h still work.
  void ExpectLocalServiceWorks(Host& h) {
    ASSERT_TRUE(DaemonAlive(h));
    auto server = Connect(h, "local-server");
    auto caller = Connect(h, "local-caller");
    ASSERT_TRUE(server && caller);
    ASSERT_TRUE(
        server->Serve("local-echo", [](ServerCall& c) { (void)c.Reply(c.payload()); }).ok());
    auto r = caller->Call("local-echo", std::string_view("local"), Millis(5000));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->view(), "local");
  }

  uint64_t Generation(Host& h, const std::string& peer) {
    auto l = LinkTo(h, peer);
    return l ? l->generation() : 0;
  }

  Child* server_ = nullptr;    // the serving host's echo server
  Child* exporter_ = nullptr;  // and its exporter
  std::vector<Child*> loads_;
};

using SteadyClock = std::chrono::steady_clock;

TEST_P(LinkFailure, KilledPeerFailsInFlightOpsThenLinkComesBack) {
  ASSERT_NO_FATAL_FAILURE(StartWorld());
  const uint64_t gen0 = Generation(a(), "host-b");
  ASSERT_GE(gen0, 1u);

  ASSERT_NO_FATAL_FAILURE(Note("mark", "MARKED"));
  const auto killed = SteadyClock::now();
  KillDaemon(b());
  ASSERT_NO_FATAL_FAILURE(Note("broken", "BROKEN"));
  // host-b's apps lost their daemon with it.
  server_->Kill();
  exporter_->Kill();

  std::string seen;
  EXPECT_TRUE(InFlightEnd(Millis(kOpTimeoutMs + kSlackMs), &seen))
      << "operations in flight on host-a did not end within their deadline after host-b's "
         "daemon was killed: "
      << seen;
  std::cerr << "in-flight operations ended within " << MsSince(killed) << " ms of the kill\n";
  v1::LinkInfo down;
  EXPECT_TRUE(WaitLink(
      a(), "host-b", [](const v1::LinkInfo& l) { return l.state() != "up"; }, Millis(10000), &down))
      << "host-a still reports the link up: " << LinkSummary(down);
  std::cerr << "host-a's link " << MsSince(killed) << " ms after the kill: " << LinkSummary(down)
            << "\n";
  EXPECT_FALSE(down.last_error().empty()) << LinkSummary(down);
  ASSERT_NO_FATAL_FAILURE(ExpectLocalServiceWorks(a()));
  CommandResult test = Ctl(a(), {"link", "test", "host-b", "--count", "1"});
  EXPECT_EQ(test.exit_code(), 1) << "link test over a dead link: " << test.Describe();

  // host-b comes back with the same configuration, and so do its apps.
  const auto restarted = SteadyClock::now();
  ASSERT_TRUE(StartDaemon(b()));
  ASSERT_NO_FATAL_FAILURE(StartServing(b(), "host-a"));
  v1::LinkInfo up;
  EXPECT_TRUE(WaitLink(
      a(), "host-b",
      [&](const v1::LinkInfo& l) { return l.state() == "up" && l.generation() > gen0; },
      Millis(20000), &up))
      << "host-a's link did not come back under a new generation: " << LinkSummary(up);
  std::cerr << "link back " << MsSince(restarted) << " ms after the restart: " << LinkSummary(up)
            << "\n";
  EXPECT_TRUE(WaitLink(
      b(), "host-a", [](const v1::LinkInfo& l) { return l.state() == "up"; }, Millis(20000)));
  EXPECT_GE(up.counters().downs(), 1u);
  ExpectTrafficPasses();
  ExpectNamedFailures({"LINK_DOWN", "PEER_GONE", "TIMEOUT"});
}

// SIGTERM instead of SIGKILL: host-b drains, says Goodbye and exits 0; what
// host-a had in flight ends PEER_GONE (or is answered, or declined while
// host-b drains), and the link comes back when host-b does.
TEST_P(LinkFailure, StoppedPeerSaysGoodbyeThenLinkComesBack) {
  ASSERT_NO_FATAL_FAILURE(StartWorld());
  const uint64_t gen0 = Generation(a(), "host-b");
  ASSERT_GE(gen0, 1u);

  ASSERT_NO_FATAL_FAILURE(Note("mark", "MARKED"));
  const auto stopped = SteadyClock::now();
  b().daemon->Signal(SIGTERM);
  ASSERT_NO_FATAL_FAILURE(Note("broken", "BROKEN"));
  auto st = b().daemon->WaitExit(Millis(15000));
  EXPECT_TRUE(ExitedWith(st, 0)) << "host-b's daemon under load from host-a did not drain and exit "
                                    "0 within 15 s of SIGTERM: "
                                 << (st ? DescribeStatus(*st) : std::string("still running"));
  std::cerr << "host-b's daemon exited " << MsSince(stopped) << " ms after SIGTERM\n";
  KillDaemon(b());
  server_->Kill();
  exporter_->Kill();

  std::string seen;
  EXPECT_TRUE(InFlightEnd(Millis(kOpTimeoutMs + kSlackMs), &seen))
      << "operations in flight on host-a did not end within their deadline after host-b "
         "stopped: "
      << seen;
  v1::LinkInfo down;
  EXPECT_TRUE(WaitLink(
      a(), "host-b", [](const v1::LinkInfo& l) { return l.state() != "up"; }, Millis(10000), &down))
      << "host-a still reports the link up: " << LinkSummary(down);
  std::cerr << "host-a's link " << MsSince(stopped) << " ms after SIGTERM: " << LinkSummary(down)
            << "\n";
  // down_reason keeps why the link went down; last_error may already say
  // why a reconnect attempt failed.
  EXPECT_NE(Lower(down.down_reason()).find("goodbye"), std::string::npos)
      << "down_reason should say the peer said goodbye: " << LinkSummary(down);
  ASSERT_NO_FATAL_FAILURE(ExpectLocalServiceWorks(a()));

  ASSERT_TRUE(StartDaemon(b()));
  ASSERT_NO_FATAL_FAILURE(StartServing(b(), "host-a"));
  v1::LinkInfo up;
  EXPECT_TRUE(WaitLink(
      a(), "host-b",
      [&](const v1::LinkInfo& l) { return l.state() == "up" && l.generation() > gen0; },
      Millis(20000), &up))
      << "host-a's link did not come back under a new generation: " << LinkSummary(up);
  ExpectTrafficPasses();
  ExpectNamedFailures({"PEER_GONE", "LINK_DOWN", "UNAVAILABLE", "TIMEOUT"},
                      /*inflight_fail=*/false);
}

// The dialing side dies: host-b's apps (using host-a over the link host-a
// dialed) see their operations end, and host-a's new instance links again.
TEST_P(LinkFailure, KilledDialerComesBackUnderANewInstance) {
  ASSERT_NO_FATAL_FAILURE(StartServing(a(), "host-b"));
  ASSERT_NO_FATAL_FAILURE(StartLoads(b(), "host-a"));
  auto before = LinkTo(b(), "host-a");
  ASSERT_TRUE(before.has_value());
  const std::string instance0 = before->peer_instance();

  ASSERT_NO_FATAL_FAILURE(Note("mark", "MARKED"));
  const auto killed = SteadyClock::now();
  KillDaemon(a());
  ASSERT_NO_FATAL_FAILURE(Note("broken", "BROKEN"));
  server_->Kill();
  exporter_->Kill();

  std::string seen;
  EXPECT_TRUE(InFlightEnd(Millis(kOpTimeoutMs + kSlackMs), &seen))
      << "operations in flight on host-b did not end within their deadline after host-a's "
         "daemon was killed: "
      << seen;
  v1::LinkInfo down;
  EXPECT_TRUE(WaitLink(
      b(), "host-a", [](const v1::LinkInfo& l) { return l.state() != "up"; }, Millis(10000), &down))
      << "host-b still reports the incoming link up: " << LinkSummary(down);
  std::cerr << "host-b's link " << MsSince(killed) << " ms after the kill: " << LinkSummary(down)
            << "\n";
  ASSERT_NO_FATAL_FAILURE(ExpectLocalServiceWorks(b()));

  ASSERT_TRUE(StartDaemon(a()));
  ASSERT_NO_FATAL_FAILURE(StartServing(a(), "host-b"));
  v1::LinkInfo up;
  EXPECT_TRUE(WaitLink(
      b(), "host-a",
      [&](const v1::LinkInfo& l) { return l.state() == "up" && l.peer_instance() != instance0; },
      Millis(20000), &up))
      << "host-b's link did not come back to host-a's new instance: " << LinkSummary(up);
  EXPECT_TRUE(WaitLink(
      a(), "host-b", [](const v1::LinkInfo& l) { return l.state() == "up"; }, Millis(20000)));
  ExpectTrafficPasses();
  ExpectNamedFailures({"LINK_DOWN", "PEER_GONE", "TIMEOUT"});
}

TEST_P(LinkFailure, CutWireFailsInFlightOpsThenLinkComesBack) {
  if (!netns()) {
    GTEST_SKIP() << "only the netns variant has a veth of its own to cut";
  }
  ASSERT_NO_FATAL_FAILURE(StartWorld());
  const uint64_t gen0 = Generation(a(), "host-b");
  ASSERT_GE(gen0, 1u);

  ASSERT_NO_FATAL_FAILURE(Note("mark", "MARKED"));
  const auto cut = SteadyClock::now();
  CommandResult c = HostsSh("cut");
  ASSERT_EQ(c.exit_code(), 0) << c.Describe();
  ASSERT_NO_FATAL_FAILURE(Note("broken", "BROKEN"));

  v1::LinkInfo down;
  EXPECT_TRUE(WaitLink(
      a(), "host-b", [](const v1::LinkInfo& l) { return l.state() != "up"; }, Millis(10000), &down))
      << "host-a still reports the link up after the cut: " << LinkSummary(down);
  std::cerr << "host-a's link " << MsSince(cut) << " ms after the cut: " << LinkSummary(down)
            << "\n";
  std::string seen;
  EXPECT_TRUE(InFlightEnd(Millis(kOpTimeoutMs + kSlackMs), &seen))
      << "operations in flight on host-a did not end within their deadline after the cut: " << seen;
  std::cerr << "in-flight operations ended within " << MsSince(cut) << " ms of the cut\n";
  EXPECT_TRUE(WaitLink(
      b(), "host-a", [](const v1::LinkInfo& l) { return l.state() != "up"; }, Millis(10000)))
      << "host-b still reports the link up after the cut";
  ASSERT_NO_FATAL_FAILURE(ExpectLocalServiceWorks(a()));

  const auto restored = SteadyClock::now();
  CommandResult r = HostsSh("restore");
  ASSERT_EQ(r.exit_code(), 0) << r.Describe();
  v1::LinkInfo up;
  EXPECT_TRUE(WaitLink(
      a(), "host-b",
      [&](const v1::LinkInfo& l) { return l.state() == "up" && l.generation() > gen0; },
      Millis(20000), &up))
      << "host-a's link did not come back under a new generation: " << LinkSummary(up);
  std::cerr << "link back " << MsSince(restored) << " ms after the restore: " << LinkSummary(up)
            << "\n";
  EXPECT_TRUE(WaitLink(
      b(), "host-a", [](const v1::LinkInfo& l) { return l.state() == "up"; }, Millis(20000)));
  ExpectTrafficPasses();
  // Nothing was killed: only the link went away.
  ExpectNamedFailures({"LINK_DOWN"});
  EXPECT_TRUE(server_->Alive() && exporter_->Alive());
}

INSTANTIATE_TEST_SUITE_P(Hosts, LinkFailure, kHostVariants, HostVariantName);

}  // namespace
}  // namespace mcdma::itest
