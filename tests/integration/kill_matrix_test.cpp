// The kill matrix: SIGKILL of {the app, the daemon} on {the initiator's
// side (host-a), the target's side (host-b)} during sustained {calls, reads,
// writes} from host-a's app to host-b's app, over the tcp transport between
// two network namespaces: 12 cases, each a test
// KillMatrix/KillMatrix.SurvivorsRecoverVerifiedWithNothingLeftOrStuck/CASE
// (CASE: victim_side_traffic, e.g. daemon_target_reads). Needs root (the
// netns variant of two_hosts.hpp); skips, saying why, otherwise.
//
// The apps are mcdma_testapp's resilient roles (testapp_resilient.cpp): they
// connect again, with a new session, when their daemon ends theirs. Every
// case ends with:
//   - recovery: a killed daemon is started again with the same flags and
//     socket (as systemd would restart it) and the surviving app on it gets
//     a new session; a killed app is replaced by a fresh one; then the load
//     app's next operation passes with every byte verified (a write also
//     checked in the target app's own memory);
//   - no /dev/shm entry of either daemon left (names carry their daemon's
//     socket tag, daemon/src/socket_path.hpp), and no session of a killed
//     app listed;
//   - nothing stuck: every operation the survivors had in flight ends within
//     its deadline plus slack, each failure with a code expected for the
//     case, and both daemons' in-flight counts return to 0 once the apps
//     stop.
// Each test prints its row of the table; a run of several prints the whole
// table at the end:
//   mcdma_integration_tests --gtest_filter='KillMatrix/*'
#include <google/protobuf/util/json_util.h>
#include <signal.h>

#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "socket_path.hpp"
#include "test_util.hpp"
#include "two_hosts.hpp"

namespace mcdma::itest {
namespace {

enum class Victim { kApp, kDaemon };
enum class Side { kInitiator, kTarget };
enum class Traffic { kCalls, kReads, kWrites };

struct KillCase {
  Victim victim;
  Side side;
  Traffic traffic;
};

const char* Name(Victim v) { return v == Victim::kApp ? "app" : "daemon"; }
const char* Name(Side s) { return s == Side::kInitiator ? "initiator" : "target"; }
const char* Name(Traffic t) {
  return t == Traffic::kCalls ? "calls" : t == Traffic::kReads ? "reads" : "writes";
}

std::string KillCaseName(const ::testing::TestParamInfo<KillCase>& info) {
  return std::string(Name(info.param.victim)) + "_" + Name(info.param.side) + "_" +
         Name(info.param.traffic);
}

void PrintTo(const KillCase& c, std::ostream* os) {
  *os << Name(c.victim) << "/" << Name(c.side) << "/" << Name(c.traffic);
}

std::vector<KillCase> AllCases() {
  std::vector<KillCase> out;
  for (Victim v : {Victim::kApp, Victim::kDaemon}) {
    for (Side s : {Side::kInitiator, Side::kTarget}) {
      for (Traffic t : {Traffic::kCalls, Traffic::kReads, Traffic::kWrites})
        out.push_back({v, s, t});
    }
  }
  return out;
}

constexpr int kThreads = 3;
constexpr uint64_t kRegion = 256 << 10;  // bytes per read or write
constexpr int64_t kMatrixOpTimeoutMs = 3000;
// How long past its deadline an operation may take to end: libmcdma gives
// up on a silent daemon 2 s past the deadline.
constexpr int64_t kMatrixSlackMs = 2500;
const Millis kWait(20000);

using SteadyClock = std::chrono::steady_clock;
std::string Header() {
  std::ostringstream os;
  os << std::left << std::setw(8) << "victim" << std::setw(11) << "side" << std::setw(8)
     << "traffic" << std::setw(11) << "recovered" << std::setw(16) << "verified_bytes"
     << std::setw(14) << "leftover_shm" << std::setw(11) << "stuck_ops" << std::setw(12)
     << "recover_ms"
     << "survivors' failures";
  return os.str();
}

struct Row {
  KillCase c{};
  bool recovered = false;
  uint64_t verified_bytes = 0;
  size_t leftover_shm = 0;
  uint64_t stuck = 0;
  int64_t recover_ms = -1;
  std::string codes;  // the survivors' failed operations: CODE:n
  std::string Format() const {
    std::ostringstream os;
    os << std::left << std::setw(8) << Name(c.victim) << std::setw(11) << Name(c.side)
       << std::setw(8) << Name(c.traffic) << std::setw(11) << (recovered ? "yes" : "no")
       << std::setw(16) << verified_bytes << std::setw(14) << leftover_shm << std::setw(11) << stuck
       << std::setw(12) << recover_ms << (codes.empty() ? "none" : codes);
    return os.str();
  }
};

class KillMatrix : public TwoHostsBase, public ::testing::WithParamInterface<KillCase> {
 protected:
  HostVariant variant() const override { return HostVariant::kNetns; }

  static void TearDownTestSuite() {
    if (rows_.size() < 2) return;
    std::cout << "\nKill matrix (" << rows_.size() << " cases):\n" << Header() << "\n";
    for (const auto& r : rows_) std::cout << r << "\n";
    std::cout.flush();
  }

  // Every case prints its row, passed or not.
  void TearDown() override {
    row_.c = kase();
    row_.recovered = row_.recovered && !HasFailure();
    rows_.push_back(row_.Format());
    std::cout << "KILL-MATRIX " << Header() << "\nKILL-MATRIX " << row_.Format() << "\n";
    std::cout.flush();
    TwoHostsBase::TearDown();
  }

  // A line starting with `prefix` seen already, or within `timeout`.
  static bool SawLine(Child* c, const std::string& prefix, Millis timeout) {
    return !c->LastLineWith(prefix).empty() || c->WaitForPrefix(prefix, timeout).has_value();
  }

  const KillCase& kase() const { return GetParam(); }
  Host& init() { return a(); }
  Host& target() { return b(); }

  std::vector<std::string> ServeArgs() const {
    return {"--service", "echo",   "--export",
            "km",        "--size", std::to_string((kThreads + 1) * kRegion),
            "--seed",    "11",     "--allowed-peers",
            "host-a"};
  }
  std::vector<std::string> LoadArgs() const {
    return {"--traffic",      Name(kase().traffic),
            "--service",      "host-b/echo",
            "--export",       "km",
            "--peer",         "host-b",
            "--threads",      std::to_string(kThreads),
            "--region-bytes", std::to_string(kRegion),
            "--seed",         "11",
            "--timeout-ms",   std::to_string(kMatrixOpTimeoutMs)};
  }

  std::string LoadStatus() {
    if (load_ == nullptr || !load_->WriteStdin("status\n")) return "";
    return load_->WaitForPrefix("STATUS", Millis(10000)).value_or("");
  }

  // The load has passed `n` more operations than it had.
  bool LoadProgresses(uint64_t n) {
    uint64_t before = Field(LoadStatus(), "ok").value_or(0);
    return PollUntil([&] { return Field(LoadStatus(), "ok").value_or(0) >= before + n; }, kWait,
                     Millis(100));
  }

  bool Note(const std::string& command, const std::string& answer) {
    return load_ != nullptr && load_->WriteStdin(command + "\n") &&
           load_->WaitForPrefix(answer, Millis(10000)).has_value();
  }

  // /dev/shm entries carrying either daemon's tag.
  std::set<std::string> DaemonShm() {
    std::set<std::string> out;
    for (Host* h : {&a(), &b()}) {
      const std::string tag = daemon::SegmentTag(h->socket);
      for (const auto& n : ListShm()) {
        if (n.size() > 9 && n.compare(8, 8, tag) == 0) out.insert(n);
      }
    }
    return out;
  }

  std::optional<v1::StatusReply> DaemonStatus(Host& h) {
    CommandResult r = Ctl(h, {"status", "--json"}, Millis(10000));
    if (r.exit_code() != 0) return std::nullopt;
    google::protobuf::util::JsonParseOptions po;
    po.ignore_unknown_fields = true;
    v1::StatusReply reply;
    if (!google::protobuf::util::JsonStringToMessage(r.out, &reply, po).ok()) return std::nullopt;
    return reply;
  }

  bool SessionOfPidListed(Host& h, pid_t pid) {
    CommandResult r = Ctl(h, {"sessions", "--json"}, Millis(10000));
    google::protobuf::util::JsonParseOptions po;
    po.ignore_unknown_fields = true;
    v1::SessionsReply reply;
    if (r.exit_code() != 0 || !google::protobuf::util::JsonStringToMessage(r.out, &reply, po).ok())
      return true;
    for (const auto& s : reply.sessions()) {
      if (s.pid() == static_cast<uint32_t>(pid)) return true;
    }
    return false;
  }

  // What a failed operation of the survivors may end with: in flight when
  // the victim died (pre), or started after (post).
  std::set<std::string> PreCodes() const {
    if (kase().victim == Victim::kApp) return {"PEER_GONE", "REVOKED", "NOT_FOUND"};
    if (kase().side == Side::kInitiator) return {"UNAVAILABLE"};
    return {"LINK_DOWN", "PEER_GONE"};
  }
  std::set<std::string> PostCodes() const {
    if (kase().victim == Victim::kApp) return {"PEER_GONE", "REVOKED", "NOT_FOUND"};
    return {"UNAVAILABLE", "LINK_DOWN", "PEER_GONE", "NOT_FOUND", "REVOKED"};
  }

  Child* server_ = nullptr;
  Child* load_ = nullptr;
  Row row_;
  static std::vector<std::string> rows_;
};

std::vector<std::string> KillMatrix::rows_;

TEST_P(KillMatrix, SurvivorsRecoverVerifiedWithNothingLeftOrStuck) {
  const KillCase& c = kase();
  Row& row = row_;
  server_ = StartReady(target(), "resilient-serve", ServeArgs());
  ASSERT_NE(server_, nullptr);
  load_ = StartReady(init(), "resilient-load", LoadArgs());
  ASSERT_NE(load_, nullptr);
  ASSERT_TRUE(LoadProgresses(10)) << "no traffic before the kill: " << LoadStatus();
  ASSERT_TRUE(Note("mark", "MARKED"));

  // ---- the kill ----
  Child*& victim_app = c.side == Side::kInitiator ? load_ : server_;
  Host& victim_host = c.side == Side::kInitiator ? init() : target();
  const pid_t victim_pid = c.victim == Victim::kApp ? victim_app->pid() : 0;
  const auto killed = SteadyClock::now();
  if (c.victim == Victim::kApp) {
    victim_app->Kill();
    victim_app = nullptr;
  } else {
    KillDaemon(victim_host);
  }
  if (load_ != nullptr) {
    ASSERT_TRUE(Note("broken", "BROKEN"));
  }

  // ---- nothing stuck: what the survivors had in flight ends in time ----
  std::string seen;
  if (load_ != nullptr) {
    bool ended = PollUntil(
        [&] {
          seen = LoadStatus();
          return Field(seen, "pre_inflight") == 0u;
        },
        Millis(kMatrixOpTimeoutMs + kMatrixSlackMs), Millis(100));
    EXPECT_TRUE(ended) << "operations in flight at the kill did not end in time: " << seen;
    row.stuck += Field(seen, "pre_inflight").value_or(0);
  }
  if (c.victim == Victim::kDaemon) {
    std::set<std::string> left = DaemonShm();
    std::cerr << "after the kill, before the restart: " << left.size()
              << " /dev/shm entries of the daemons\n";
  }

  // ---- recovery ----
  if (c.victim == Victim::kApp) {
    // The daemon reaps the killed app's session.
    EXPECT_TRUE(PollUntil([&] { return !SessionOfPidListed(victim_host, victim_pid); }, kWait))
        << "the killed app's session is still listed on " << victim_host.id;
    if (c.side == Side::kInitiator) {
      load_ = StartReady(init(), "resilient-load", LoadArgs());
      ASSERT_NE(load_, nullptr);
    } else {
      server_ = StartReady(target(), "resilient-serve", ServeArgs());
      ASSERT_NE(server_, nullptr);
    }
  } else {
    ASSERT_TRUE(StartDaemon(victim_host));
    Child* survivor = c.side == Side::kInitiator ? load_ : server_;
    EXPECT_TRUE(SawLine(survivor, "RECONNECTED", kWait))
        << "the surviving app on " << victim_host.id << " did not get a new session\n"
        << survivor->Describe();
    std::string why;
    EXPECT_TRUE(WaitLinked(kWait, &why)) << "the link did not come back: " << why;
  }
  ASSERT_TRUE(load_->WriteStdin("verify\n"));
  auto verified = load_->WaitForLine(
      [](const std::string& l) {
        return l.rfind("VERIFIED", 0) == 0 || l.rfind("VERIFY_", 0) == 0;
      },
      Millis(30000));
  ASSERT_TRUE(verified.has_value()) << load_->Describe();
  row.recover_ms = MsSince(killed);
  bool recovered = verified->rfind("VERIFIED", 0) == 0;
  EXPECT_TRUE(recovered) << *verified << "\n" << load_->Describe();
  uint64_t verify_bytes = Field(*verified, "bytes").value_or(0);
  if (recovered && c.traffic == Traffic::kWrites) {
    // The bytes landed in the target app's own memory.
    std::string wrote = load_->LastLineWith("WROTE");
    ASSERT_FALSE(wrote.empty());
    ASSERT_TRUE(server_->WriteStdin("check " + std::to_string(Field(wrote, "offset").value_or(0)) +
                                    " " + std::to_string(Field(wrote, "length").value_or(0)) + " " +
                                    std::to_string(Field(wrote, "seed").value_or(0)) + "\n"));
    auto checked = server_->WaitForPrefix("CHECKED", Millis(10000));
    recovered = checked && Field(*checked, "ok") == 1u;
    EXPECT_TRUE(recovered) << checked.value_or("no CHECKED line") << "\n" << server_->Describe();
  }
  // Sustained traffic passes again too.
  EXPECT_TRUE(LoadProgresses(5)) << LoadStatus();

  // ---- nothing left ----
  std::set<std::string> left;
  PollUntil(
      [&] {
        left = DaemonShm();
        return left.empty();
      },
      Millis(5000));
  row.leftover_shm = left.size();
  std::string names;
  for (const auto& n : left) names += " " + n;
  EXPECT_TRUE(left.empty()) << "/dev/shm still holds the daemons' entries:" << names;

  // ---- the survivors' accounts ----
  load_->CloseStdin();
  auto summary = load_->WaitForPrefix("{", Millis(kMatrixOpTimeoutMs + 15000));
  ASSERT_TRUE(summary.has_value()) << "the load app did not finish\n" << load_->Describe();
  EXPECT_TRUE(ExitedWith(load_->WaitExit(Millis(10000)), 0)) << load_->Describe();
  std::cerr << "load: " << *summary << "\n";
  EXPECT_EQ(Field(*summary, "mismatch"), 0u) << *summary;
  EXPECT_TRUE(CodeCounts(*summary, "early").empty())
      << "operations failed before the kill: " << *summary;
  uint64_t pre_total = 0;
  for (const auto& [code, n] : CodeCounts(*summary, "pre")) {
    EXPECT_TRUE(PreCodes().count(code) != 0)
        << n << " operation(s) in flight at the kill ended " << code << ": " << *summary;
    pre_total += n;
    row.codes += (row.codes.empty() ? "" : " ") + code + ":" + std::to_string(n);
  }
  uint64_t post_total = 0;
  for (const auto& [code, n] : CodeCounts(*summary, "post")) {
    EXPECT_TRUE(PostCodes().count(code) != 0)
        << n << " operation(s) started after the kill ended " << code << ": " << *summary;
    post_total += n;
    row.codes += (row.codes.empty() ? "" : " ") + code + ":" + std::to_string(n) + "(after)";
  }
  // The load app kept every thread in an operation: when it survived the
  // kill, it must have seen it, or the case tested nothing. A killed
  // daemon fails what was in flight through it. A killed target app does
  // not have to: a transfer whose bytes landed before its daemon reaped the
  // session (and revoked the export) completes OK, so there the kill shows
  // in the operations in flight or in the next ones (REVOKED, NOT_FOUND).
  if (c.victim == Victim::kDaemon) {
    EXPECT_GT(pre_total, 0u) << "no operation was in flight at the kill: " << *summary;
  } else if (c.side == Side::kTarget) {
    EXPECT_GT(pre_total + post_total, 0u) << "the load app never saw the kill: " << *summary;
  }
  EXPECT_LE(IntField(*summary, "max_overrun_ms").value_or(0), kMatrixSlackMs) << *summary;
  row.verified_bytes = verify_bytes + Field(*summary, "verified_bytes").value_or(0);
  server_->CloseStdin();
  auto served = server_->WaitForPrefix("{", Millis(15000));
  ASSERT_TRUE(served.has_value()) << server_->Describe();
  std::cerr << "server: " << *served << "\n";
  for (const auto& [code, n] : CodeCounts(*served, "reply_errors")) {
    EXPECT_EQ(code, "NOT_FOUND") << n << " replies failed " << code << ": " << *served;
  }
  // Both daemons hold nothing in flight once the apps are gone.
  for (Host* h : {&a(), &b()}) {
    uint64_t inflight = 0;
    bool idle = PollUntil(
        [&] {
          auto st = DaemonStatus(*h);
          inflight = st ? st->inflight() : 1;
          return inflight == 0;
        },
        Millis(kMatrixOpTimeoutMs + kMatrixSlackMs), Millis(100));
    EXPECT_TRUE(idle) << h->id << " still has " << inflight << " operations in flight";
    row.stuck += idle ? 0 : inflight;
  }
  row.recovered = recovered;
}

INSTANTIATE_TEST_SUITE_P(KillMatrix, KillMatrix, ::testing::ValuesIn(AllCases()), KillCaseName);

}  // namespace
}  // namespace mcdma::itest
