// Rails (docs/architecture.md §21): a link striped over several tcp
// connections. Two network namespaces joined by their own veth (the link's
// rail 0, over the daemons' --listen addresses) and by kRails more veth
// pairs (tests/netns/hosts.sh rails), each daemon started with --rail for
// its ends. host-a dials host-b and probes every pair (its rail, host-b's
// rail): the matching pairs connect and become rails, the cross pairs
// (10.241.N.1 -> 10.242.N.2) do not. Tests:
//   - the rails come up only where pairs meet, and a bulk transfer is
//     striped over them (rail 0, the last resort, carries none of it);
//   - a rail cut in the middle of a byte-verified transfer and a stream of
//     verified calls: nothing lost, nothing twice, no error seen by an app,
//     and the rail back (and used again) within 5 s of its restore;
//   - every rail cut: calls and a transfer go on over rail 0, and the rails
//     come back;
//   - a rail whose far end is not ready (its address gone when its cable
//     comes back) is asked again within a second, and is back soon after
//     its end is.
// netns only (needs root, as the netns variant of two_hosts.hpp); skips,
// saying why, otherwise:
//   mcdma_integration_tests --gtest_filter='LinkRails.*'
#include <sstream>
#include <thread>

#include "rails_util.hpp"
#include "test_util.hpp"
#include "two_hosts.hpp"

namespace mcdma::itest {
namespace {

constexpr int kRails = 2;
const Millis kRailsUpWait(20000);
// The acceptance bound: a restored rail carries traffic again within 5 s.
const Millis kRailBackBound(5000);
const Millis kBulkWait(150000);
constexpr uint64_t kSliceBytes = 256 * kKiB;  // the daemon's default link.slice_bytes

using SteadyClock = std::chrono::steady_clock;

std::string TcpName(const std::string& address) { return "tcp:" + address; }

const v1::RailInfo* RailBetween(const v1::LinkInfo& l, const std::string& local,
                                const std::string& remote) {
  for (const v1::RailInfo& r : l.rails())
    if (r.local() == local && r.remote() == remote) return &r;
  return nullptr;
}

class LinkRails : public TwoHostsBase {
 protected:
  HostVariant variant() const override { return HostVariant::kNetns; }
  // The rails must exist before the daemons start: each announces its own.
  bool LinkAtSetUp() const override { return false; }

  struct RailAddresses {
    std::string a;  // host-a's end, 10.(240+K).N.1
    std::string b;  // host-b's end, 10.(240+K).N.2
  };

  // Makes the rails (`rate`: tc tbf rate on each end, "" for none), starts
  // both daemons with them and waits until host-a's link has exactly the
  // matching pairs up.
  void StartWithRails(const std::string& rate) {
    std::vector<std::string> argv = {"/bin/bash", kHostsScript, "rails", netns_prefix(),
                                     std::to_string(kRails)};
    if (!rate.empty()) argv.push_back(rate);
    CommandResult made = RunCommand(argv, Millis(30000));
    ASSERT_EQ(made.exit_code(), 0) << "hosts.sh rails: " << made.Describe();
    std::istringstream lines(made.out);
    RailAddresses r;
    while (lines >> r.a >> r.b) rails_.push_back(r);
    ASSERT_EQ(rails_.size(), size_t{kRails}) << "hosts.sh rails printed:\n" << made.out;
    for (const RailAddresses& addr : rails_) {
      a().extra.insert(a().extra.end(), {"--rail", addr.a});
      b().extra.insert(b().extra.end(), {"--rail", addr.b});
    }
    ASSERT_NO_FATAL_FAILURE(WaitRailInterfacesUp());
    ASSERT_NO_FATAL_FAILURE(StartDaemons());
    v1::LinkInfo last;
    ASSERT_TRUE(WaitLink(
        a(), "host-b", [&](const v1::LinkInfo& l) { return RailsAsPlanned(l); }, kRailsUpWait,
        &last))
        << "host-a's link to host-b did not show rail 0 up (last resort), exactly the " << kRails
        << " matching pairs up and the cross pairs down within 20 s:\n"
        << RailsSummary(last) << Describe();
    std::cerr << "host-a's rails once up:\n" << RailsSummary(last);
  }

  // A new veth has carrier at once, but the kernel reports it running
  // (operstate UP, what the daemons' interface watch reads) up to a second
  // later: a daemon started in between takes a rail out that is only just
  // coming up. Hosts' interfaces are up before their daemons start; so here.
  void WaitRailInterfacesUp() {
    std::string seen;
    bool up = PollUntil(
        [&] {
          seen.clear();
          size_t running = 0;
          for (Host* h : {&a(), &b()}) {
            CommandResult r =
                RunCommand({"/bin/bash", "-c", "ip -n " + h->netns + " -br link"}, Millis(10000));
            seen += h->id + ":\n" + r.out;
            std::istringstream lines(r.out);
            std::string line;
            while (std::getline(lines, line)) {
              std::istringstream words(line);
              std::string name, state;
              words >> name >> state;
              if (name.rfind("r", 0) == 0 && state == "UP") ++running;
            }
          }
          return running == 2 * rails_.size();
        },
        Millis(10000), Millis(50));
    ASSERT_TRUE(up) << "the rail interfaces did not all run within 10 s:\n" << seen;
  }

  // Rail 0 up and the last resort; every matching pair up, every cross
  // pair listed and not up, nothing else.
  bool RailsAsPlanned(const v1::LinkInfo& l) const {
    if (l.state() != "up") return false;
    const v1::RailInfo* zero = RailAt(l, 0);
    if (zero == nullptr || zero->state() != "up" || !zero->last_resort()) return false;
    size_t up = 0;
    for (const v1::RailInfo& r : l.rails())
      if (r.index() != 0 && r.state() == "up") ++up;
    if (up != rails_.size()) return false;
    for (const RailAddresses& mine : rails_) {
      for (const RailAddresses& theirs : rails_) {
        const v1::RailInfo* r = RailBetween(l, TcpName(mine.a), TcpName(theirs.b));
        if (r == nullptr || r->index() == 0) return false;
        bool matching = &mine == &theirs;
        if ((r->state() == "up") != matching) return false;
      }
    }
    return l.rails_size() == static_cast<int>(1 + rails_.size() * rails_.size());
  }

  // host-a's rail between host-a's end of rail K (1-based, as hosts.sh
  // numbers them) and host-b's; nullptr if not listed.
  static const v1::RailInfo* MatchingRail(const v1::LinkInfo& l, const RailAddresses& r) {
    return RailBetween(l, TcpName(r.a), TcpName(r.b));
  }

  v1::LinkInfo LinkAB() {
    auto l = LinkTo(a(), "host-b");
    EXPECT_TRUE(l.has_value()) << "host-a lists no link to host-b";
    return l.value_or(v1::LinkInfo{});
  }

  // hosts.sh cut-rail / restore-rail PREFIX K.
  void RailScript(const std::string& cmd, int k) {
    CommandResult r = RunCommand(
        {"/bin/bash", kHostsScript, cmd, netns_prefix(), std::to_string(k)}, Millis(30000));
    ASSERT_EQ(r.exit_code(), 0) << "hosts.sh " << cmd << " " << k << ": " << r.Describe();
  }

  // Polls (every 100 ms) host-a's rail of hosts.sh rail K until it is up;
  // the delay since `since` when it was first seen up, -1 if not within
  // `bound` (+ 5 s more, to report how late it was).
  int64_t WaitRailBack(int k, SteadyClock::time_point since, Millis bound, v1::LinkInfo* last) {
    int64_t seen_ms = -1;
    (void)WaitLink(
        a(), "host-b",
        [&](const v1::LinkInfo& l) {
          const v1::RailInfo* r = MatchingRail(l, rails_[k - 1]);
          if (r == nullptr || r->state() != "up") return false;
          seen_ms = MsSince(since);
          return true;
        },
        bound + Millis(5000), last);
    return seen_ms;
  }

  // Polls host-a's rail of hosts.sh rail K until it is not up, for 2 s.
  // Takes rail k's cable down and expects host-a to show the rail down.
  void CutRailAndWaitDown(int k) {
    ASSERT_NO_FATAL_FAILURE(RailScript("cut-rail", k));
    v1::LinkInfo down;
    EXPECT_TRUE(WaitRailDown(k, &down))
        << "host-a still shows rail " << k << " up after its interface went down:\n"
        << RailsSummary(down);
  }

  bool WaitRailDown(int k, v1::LinkInfo* last) {
    return WaitLink(
        a(), "host-b",
        [&](const v1::LinkInfo& l) {
          const v1::RailInfo* r = MatchingRail(l, rails_[k - 1]);
          return r != nullptr && r->state() != "up";
        },
        Millis(2000), last);
  }

  // Runs a write/verify-read app to completion; its result line.
  std::string RunToEnd(Child* c) {
    if (c == nullptr) return "";
    auto line = c->WaitForPrefix("{", kBulkWait);
    EXPECT_TRUE(line.has_value()) << "no result line\n" << c->Describe();
    EXPECT_TRUE(ExitedWith(c->WaitExit(Millis(30000)), 0)) << line.value_or("") << "\n"
                                                           << c->Describe();
    return line.value_or("");
  }

  // On host-b: an echo server; on host-a: a peer-load app calling it (no
  // transfers) until its stdin closes. Returns once calls pass.
  void StartCallStream() {
    server_ = StartReady(b(), "serve", {"--service", "echo"});
    ASSERT_NE(server_, nullptr);
    stream_ = StartReady(a(), "peer-load",
                         {"--service", "host-b/echo", "--call-threads", "4", "--seed", "500",
                          "--timeout-ms", "10000"});
    ASSERT_NE(stream_, nullptr);
    ASSERT_TRUE(stream_->WaitForPrefix("CALLS", Millis(20000))) << stream_->Describe();
  }

  uint64_t StreamCalls() { return Field(LoadStatus(stream_), "calls_ok").value_or(0); }

  // Ends the call stream: every call it made passed with its reply
  // verified, and the server handled exactly as many (none lost, none
  // delivered twice).
  void ExpectStreamClean() {
    stream_->CloseStdin();
    auto line = stream_->WaitForPrefix("{", Millis(30000));
    ASSERT_TRUE(line.has_value()) << "the call stream did not finish\n" << stream_->Describe();
    EXPECT_TRUE(ExitedWith(stream_->WaitExit(Millis(10000)), 0)) << stream_->Describe();
    std::cerr << "call stream: " << *line << "\n";
    const uint64_t ok = Field(*line, "calls_ok").value_or(0);
    EXPECT_GT(ok, 0u) << *line;
    EXPECT_EQ(Field(*line, "mismatch"), 0u)
        << "replies that did not match their request: " << *line << "\n"
        << Describe();
    for (const char* cls : {"early", "pre", "post", "lookup_errors"}) {
      EXPECT_TRUE(CodeCounts(*line, cls).empty())
          << "calls failed (" << cls << ") while rails were cut and restored: " << *line << "\n"
          << Describe();
    }
    // With no failure and no mismatch, every call made is in calls_ok.
    std::string count = ServerCount(server_);
    std::cerr << "echo server on host-b: " << count << "\n";
    EXPECT_EQ(Field(count, "calls"), ok)
        << "the server handled another number of calls than the caller made (lost or "
           "delivered twice): "
        << count << " vs " << *line << "\n"
        << Describe();
  }

  std::vector<RailAddresses> rails_;
  Child* server_ = nullptr;
  Child* stream_ = nullptr;
};

TEST_F(LinkRails, RailsComeUpOnlyWherePairsMeetAndStripeBulk) {
  ASSERT_NO_FATAL_FAILURE(StartWithRails(""));
  // host-b sees the same rails from its side.
  v1::LinkInfo lb;
  EXPECT_TRUE(WaitLink(
      b(), "host-a",
      [&](const v1::LinkInfo& l) {
        for (const RailAddresses& r : rails_) {
          const v1::RailInfo* ri = RailBetween(l, TcpName(r.b), TcpName(r.a));
          if (ri == nullptr || ri->state() != "up") return false;
        }
        return true;
      },
      Millis(5000), &lb))
      << "host-b's link to host-a does not show the matching rails up:\n"
      << RailsSummary(lb) << Describe();

  const uint64_t bytes = 256 * kMiB;
  const std::string size_text = std::to_string(bytes);
  const v1::LinkInfo before = LinkAB();
  const v1::RailInfo* zero0 = RailAt(before, 0);
  ASSERT_NE(zero0, nullptr) << RailsSummary(before);
  const uint64_t zero_bytes0 = zero0->bytes_sent();

  Child* exporter = StartReady(
      b(), "fill",
      {"--export", "bulk-b", "--size", size_text, "--no-fill", "--allowed-peers", "host-a"});
  ASSERT_NE(exporter, nullptr);
  std::string w = RunToEnd(StartApp(
      a(), "write", {"--export", "bulk-b", "--peer", "host-b", "--seed", "41", "--pieces", "4"}));
  EXPECT_EQ(Field(w, "ok"), 1u) << w << "\n" << Describe();
  EXPECT_EQ(Field(w, "bytes"), bytes) << w;
  EXPECT_EQ(ExporterVerify(exporter, 41), "VERIFY ok bytes=" + size_text) << Describe();
  const v1::LinkInfo after_write = LinkAB();
  std::cerr << "after the " << (bytes >> 20) << " MiB write (" << Field(w, "ms").value_or(0)
            << " ms):\n"
            << RailsSummary(after_write);
  for (const RailAddresses& r : rails_) {
    const v1::RailInfo* ri = MatchingRail(after_write, r);
    ASSERT_NE(ri, nullptr) << RailsSummary(after_write);
    EXPECT_GT(ri->bytes_sent(), 0u) << "rail " << ri->name() << " carried nothing\n"
                                    << RailsSummary(after_write);
    EXPECT_GT(ri->slices(), 0u) << RailsSummary(after_write);
    EXPECT_GE(ri->share(), 0.2) << "rail " << ri->name() << " took too little of the stripes\n"
                                << RailsSummary(after_write);
    EXPECT_GE(ri->up_for_ms(), Field(w, "ms").value_or(UINT64_MAX))
        << "rail " << ri->name() << " was up before the write began, its up_for_ms says less\n"
        << RailsSummary(after_write);
  }

  std::string rd = RunToEnd(
      StartApp(a(), "verify-read", {"--export", "bulk-b", "--peer", "host-b", "--seed", "41"}));
  EXPECT_EQ(Field(rd, "ok"), 1u) << rd << "\n" << Describe();
  EXPECT_EQ(Field(rd, "bytes"), bytes) << rd;
  EXPECT_EQ(Field(rd, "bad_bytes"), 0u) << rd;
  exporter->CloseStdin();
  EXPECT_TRUE(ExitedWith(exporter->WaitExit(Millis(30000)), 0)) << exporter->Describe();

  const v1::LinkInfo after = LinkAB();
  std::cerr << "after the read back (" << Field(rd, "ms").value_or(0) << " ms):\n"
            << RailsSummary(after);
  for (const RailAddresses& r : rails_) {
    const v1::RailInfo* ri = MatchingRail(after, r);
    ASSERT_NE(ri, nullptr) << RailsSummary(after);
    EXPECT_EQ(ri->state(), "up") << RailsSummary(after);
    EXPECT_GT(ri->bytes_sent(), 0u) << RailsSummary(after);
    EXPECT_GE(ri->share(), 0.2) << RailsSummary(after);
    EXPECT_EQ(ri->downs(), 0u) << RailsSummary(after);
  }
  // Rail 0 is the last resort: while the rails are up it carries no slice.
  const v1::RailInfo* zero = RailAt(after, 0);
  ASSERT_NE(zero, nullptr) << RailsSummary(after);
  EXPECT_TRUE(zero->last_resort()) << RailsSummary(after);
  EXPECT_EQ(zero->slices(), 0u) << "rail 0 carried one-sided bytes while rails were up\n"
                                << RailsSummary(after);
  EXPECT_LT(zero->bytes_sent() - zero_bytes0, kSliceBytes)
      << "rail 0 carried bytes of the transfers\n"
      << RailsSummary(after);
  EXPECT_EQ(after.state(), "up");
  EXPECT_EQ(after.counters().ops_failed(), 0u) << RailsSummary(after);
  EXPECT_EQ(after.counters().downs(), 0u) << RailsSummary(after);
  EXPECT_GE(after.counters().write_bytes(), bytes);
  EXPECT_GE(after.counters().read_bytes(), bytes);
}

TEST_F(LinkRails, CutRailDuringTransferAndCallsLosesNothing) {
  // 200 Mbit/s per rail end: 256 MiB take about 5.5 s over both.
  ASSERT_NO_FATAL_FAILURE(StartWithRails("200mbit"));
  ASSERT_NO_FATAL_FAILURE(StartCallStream());
  const uint64_t bytes = 256 * kMiB;
  const std::string size_text = std::to_string(bytes);
  Child* exporter = StartReady(
      b(), "fill",
      {"--export", "bulk-b", "--size", size_text, "--no-fill", "--allowed-peers", "host-a"});
  ASSERT_NE(exporter, nullptr);

  const auto write_started = SteadyClock::now();
  Child* writer = StartApp(
      a(), "write", {"--export", "bulk-b", "--peer", "host-b", "--seed", "42", "--pieces", "4"});
  ASSERT_NE(writer, nullptr);
  // Until the write's slices are on both rails, then to 1.5 s in.
  v1::LinkInfo busy;
  ASSERT_TRUE(WaitLink(
      a(), "host-b",
      [&](const v1::LinkInfo& l) {
        for (const RailAddresses& r : rails_) {
          const v1::RailInfo* ri = MatchingRail(l, r);
          if (ri == nullptr || ri->inflight_bytes() + ri->slices() == 0) return false;
        }
        return true;
      },
      Millis(20000), &busy))
      << "the write never had slices on both rails:\n"
      << RailsSummary(busy) << writer->Describe();
  while (MsSince(write_started) < 1500) std::this_thread::sleep_for(Millis(20));

  const uint64_t calls_at_cut = StreamCalls();
  const auto cut = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(RailScript("cut-rail", 1));
  const int64_t cut_at_ms = MsSince(write_started);
  writer->Drain();
  const bool write_in_flight = writer->LastLineWith("{").empty();
  v1::LinkInfo down;
  EXPECT_TRUE(WaitRailDown(1, &down))
      << "host-a still shows rail 1 up after its interface went down:\n"
      << RailsSummary(down);
  std::cerr << "rail 1 cut " << cut_at_ms << " ms into the write; host-a " << MsSince(cut)
            << " ms later:\n"
            << RailsSummary(down);
  while (MsSince(cut) < 2000) std::this_thread::sleep_for(Millis(20));
  const uint64_t calls_at_restore = StreamCalls();
  const int64_t cut_ms = MsSince(cut);
  const auto restored = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(RailScript("restore-rail", 1));
  v1::LinkInfo back;
  const int64_t back_ms = WaitRailBack(1, restored, kRailBackBound, &back);
  std::cerr << "RAIL-BACK rail 1 up again " << back_ms << " ms after its restore (cut " << cut_ms
            << " ms)\n"
            << RailsSummary(back);
  EXPECT_GE(back_ms, 0) << "rail 1 not up again even " << (kRailBackBound.count() + 5000)
                        << " ms after its restore:\n"
                        << RailsSummary(back) << Describe();
  EXPECT_LE(back_ms, kRailBackBound.count())
      << "rail 1 came back later than " << kRailBackBound.count() << " ms after its restore\n"
      << RailsSummary(back);

  std::string w = RunToEnd(writer);
  EXPECT_TRUE(write_in_flight) << "the write had ended before the cut: the test did not test "
                                  "what it claims: "
                               << w;
  EXPECT_EQ(Field(w, "ok"), 1u) << "the write failed across a rail cut: " << w << "\n"
                                << Describe();
  EXPECT_EQ(Field(w, "bytes"), bytes) << w;
  EXPECT_EQ(ExporterVerify(exporter, 42), "VERIFY ok bytes=" + size_text)
      << "host-b's memory is not what host-a wrote across the rail cut\n"
      << Describe();
  EXPECT_GT(calls_at_restore, calls_at_cut) << "no call passed while rail 1 was cut ("
                                            << calls_at_cut << " -> " << calls_at_restore << ")";

  const v1::LinkInfo after = LinkAB();
  std::cerr << "after the write (" << Field(w, "ms").value_or(0) << " ms):\n"
            << RailsSummary(after);
  const v1::RailInfo* r1 = MatchingRail(after, rails_[0]);
  ASSERT_NE(r1, nullptr) << RailsSummary(after);
  EXPECT_GE(r1->downs(), 1u) << "rail 1 never counted as down\n" << RailsSummary(after);
  EXPECT_GE(r1->slices_reissued(), 1u)
      << "rail 1 was cut with slices of the write in flight, none reissued\n"
      << RailsSummary(after);
  EXPECT_EQ(after.state(), "up");
  EXPECT_EQ(after.generation(), 1u) << "the link itself went down over a rail cut\n"
                                    << RailsSummary(after);
  EXPECT_EQ(after.counters().downs(), 0u) << RailsSummary(after);
  EXPECT_EQ(after.counters().ops_failed(), 0u) << RailsSummary(after);
  if (auto lb = LinkTo(b(), "host-a")) std::cerr << "host-b's side:\n" << RailsSummary(*lb);

  // The rail is back: the next transfer uses it again.
  const uint64_t r1_bytes = r1->bytes_sent();
  const uint64_t again = 64 * kMiB;
  Child* exporter2 = StartReady(b(), "fill",
                                {"--export", "again-b", "--size", std::to_string(again),
                                 "--no-fill", "--allowed-peers", "host-a"});
  ASSERT_NE(exporter2, nullptr);
  std::string w2 = RunToEnd(StartApp(
      a(), "write", {"--export", "again-b", "--peer", "host-b", "--seed", "43", "--pieces", "4"}));
  EXPECT_EQ(Field(w2, "ok"), 1u) << w2 << "\n" << Describe();
  EXPECT_EQ(ExporterVerify(exporter2, 43), "VERIFY ok bytes=" + std::to_string(again));
  const v1::LinkInfo last = LinkAB();
  std::cerr << "after the second write:\n" << RailsSummary(last);
  const v1::RailInfo* r1b = MatchingRail(last, rails_[0]);
  ASSERT_NE(r1b, nullptr) << RailsSummary(last);
  EXPECT_EQ(r1b->state(), "up") << RailsSummary(last);
  EXPECT_GT(r1b->bytes_sent(), r1_bytes) << "rail 1 carried nothing of a write after it came back\n"
                                         << RailsSummary(last);

  ASSERT_NO_FATAL_FAILURE(ExpectStreamClean());
  for (Child* e : {exporter, exporter2}) {
    e->CloseStdin();
    EXPECT_TRUE(ExitedWith(e->WaitExit(Millis(30000)), 0)) << e->Describe();
  }
}

TEST_F(LinkRails, AllRailsDownFallsBackToTheLinksOwnConnection) {
  ASSERT_NO_FATAL_FAILURE(StartWithRails(""));
  ASSERT_NO_FATAL_FAILURE(StartCallStream());
  const uint64_t bytes = 64 * kMiB;
  const std::string size_text = std::to_string(bytes);
  Child* exporter = StartReady(
      b(), "fill",
      {"--export", "bulk-b", "--size", size_text, "--no-fill", "--allowed-peers", "host-a"});
  ASSERT_NE(exporter, nullptr);
  const v1::LinkInfo before = LinkAB();
  const v1::RailInfo* zero0 = RailAt(before, 0);
  ASSERT_NE(zero0, nullptr) << RailsSummary(before);
  const uint64_t zero_slices0 = zero0->slices();

  const auto cut = SteadyClock::now();
  for (int k = 1; k <= kRails; ++k) ASSERT_NO_FATAL_FAILURE(RailScript("cut-rail", k));
  v1::LinkInfo down;
  EXPECT_TRUE(WaitLink(
      a(), "host-b",
      [&](const v1::LinkInfo& l) {
        for (const RailAddresses& r : rails_) {
          const v1::RailInfo* ri = MatchingRail(l, r);
          if (ri == nullptr || ri->state() == "up") return false;
        }
        return true;
      },
      Millis(2000), &down))
      << "host-a still shows a rail up after every rail interface went down:\n"
      << RailsSummary(down);
  std::cerr << "every rail cut; host-a " << MsSince(cut) << " ms later:\n" << RailsSummary(down);
  const uint64_t calls_at_cut = StreamCalls();

  std::string w = RunToEnd(StartApp(
      a(), "write", {"--export", "bulk-b", "--peer", "host-b", "--seed", "44", "--pieces", "4"}));
  EXPECT_EQ(Field(w, "ok"), 1u) << "a write over rail 0 failed: " << w << "\n" << Describe();
  EXPECT_EQ(Field(w, "bytes"), bytes) << w;
  EXPECT_EQ(ExporterVerify(exporter, 44), "VERIFY ok bytes=" + size_text) << Describe();
  // Calls keep passing with every rail down.
  EXPECT_TRUE(PollUntil([&] { return StreamCalls() > calls_at_cut + 10; }, Millis(5000)))
      << "calls stopped with every rail down\n"
      << stream_->Describe();
  const v1::LinkInfo during = LinkAB();
  std::cerr << "every rail down, after the write (" << Field(w, "ms").value_or(0) << " ms, "
            << MsSince(cut) << " ms after the cut):\n"
            << RailsSummary(during);
  const v1::RailInfo* zero = RailAt(during, 0);
  ASSERT_NE(zero, nullptr) << RailsSummary(during);
  EXPECT_EQ(zero->state(), "up") << RailsSummary(during);
  EXPECT_TRUE(zero->messages()) << "rail 0 does not carry the messages with every rail down\n"
                                << RailsSummary(during);
  EXPECT_GT(zero->slices(), zero_slices0) << "the write did not go over rail 0\n"
                                          << RailsSummary(during);
  for (const RailAddresses& r : rails_) {
    const v1::RailInfo* ri = MatchingRail(during, r);
    ASSERT_NE(ri, nullptr) << RailsSummary(during);
    EXPECT_NE(ri->state(), "up") << RailsSummary(during);
    EXPECT_GE(ri->downs(), 1u) << RailsSummary(during);
    EXPECT_EQ(ri->up_for_ms(), 0u) << "a rail not up says it has been up\n" << RailsSummary(during);
  }

  // Cut as long as in the test above (past the hold-down, so the rails'
  // probes meet interfaces that are still down), the calls going on.
  while (MsSince(cut) < 2000) std::this_thread::sleep_for(Millis(20));
  const auto restored = SteadyClock::now();
  const int64_t cut_ms = MsSince(cut);
  for (int k = 1; k <= kRails; ++k) ASSERT_NO_FATAL_FAILURE(RailScript("restore-rail", k));
  for (int k = 1; k <= kRails; ++k) {
    v1::LinkInfo back;
    const int64_t back_ms = WaitRailBack(k, restored, kRailBackBound, &back);
    std::cerr << "RAIL-BACK rail " << k << " up again " << back_ms << " ms after its restore (cut "
              << cut_ms << " ms)\n";
    EXPECT_GE(back_ms, 0) << "rail " << k << " not up again even "
                          << (kRailBackBound.count() + 5000) << " ms after its restore:\n"
                          << RailsSummary(back) << Describe();
    EXPECT_LE(back_ms, kRailBackBound.count())
        << "rail " << k << " came back later than " << kRailBackBound.count()
        << " ms after its restore\n"
        << RailsSummary(back);
  }
  const v1::LinkInfo after = LinkAB();
  std::cerr << "rails restored:\n" << RailsSummary(after);
  const v1::RailInfo* zero_after = RailAt(after, 0);
  ASSERT_NE(zero_after, nullptr);
  EXPECT_TRUE(zero_after->last_resort()) << RailsSummary(after);
  EXPECT_FALSE(zero_after->messages()) << "messages stayed on rail 0 with rails back\n"
                                       << RailsSummary(after);
  // The link never went down: rail 0 carried on without a reconnect.
  EXPECT_EQ(after.state(), "up");
  EXPECT_EQ(after.generation(), 1u) << RailsSummary(after);
  EXPECT_EQ(after.counters().downs(), 0u) << RailsSummary(after);
  EXPECT_EQ(after.counters().ops_failed(), 0u) << RailsSummary(after);

  ASSERT_NO_FATAL_FAILURE(ExpectStreamClean());
  exporter->CloseStdin();
  EXPECT_TRUE(ExitedWith(exporter->WaitExit(Millis(30000)), 0)) << exporter->Describe();
}

// Rail 1 is cut, and while it is down host-b's end loses its address; the
// cable comes back without it. host-a's end runs again and probes, and
// host-b refuses, its end not ready (RAIL_END_DOWN). That is no pair
// failing to meet: host-a asks again within a second rather than ever less
// often, so once the address is back 10 s after the cut the rail is up
// within the bound. (Counted as failed probes, the 5th would come 15 s
// after the first, 6 s after the address is back.)
TEST_F(LinkRails, ARailWhoseFarEndIsNotReadyIsAskedAgainWithinASecond) {
  ASSERT_NO_FATAL_FAILURE(StartWithRails(""));
  const auto cut = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(CutRailAndWaitDown(1));
  ASSERT_NO_FATAL_FAILURE(RailScript("unaddress-rail", 1));
  ASSERT_NO_FATAL_FAILURE(RailScript("restore-rail", 1));
  v1::LinkInfo refused;
  EXPECT_TRUE(WaitLink(
      a(), "host-b",
      [&](const v1::LinkInfo& l) {
        const v1::RailInfo* r = MatchingRail(l, rails_[0]);
        return r != nullptr && r->state() != "up" &&
               r->last_error().find(rails_[0].b) != std::string::npos;
      },
      Millis(5000), &refused))
      << "host-a's probes of rail 1 were not refused for host-b's end (" << rails_[0].b
      << ") within 5 s of the cable coming back:\n"
      << RailsSummary(refused);
  std::cerr << "rail 1 back without host-b's address; host-a " << MsSince(cut)
            << " ms after the cut:\n"
            << RailsSummary(refused);

  while (MsSince(cut) < 10000) std::this_thread::sleep_for(Millis(50));
  const v1::LinkInfo during = LinkAB();
  const v1::RailInfo* r1 = MatchingRail(during, rails_[0]);
  ASSERT_NE(r1, nullptr) << RailsSummary(during);
  EXPECT_NE(r1->state(), "up") << RailsSummary(during);
  EXPECT_NE(r1->last_error().find(rails_[0].b), std::string::npos)
      << "rail 1's last error does not name host-b's missing address\n"
      << RailsSummary(during);
  // Asked again within a second: never further away than that.
  EXPECT_LE(r1->retry_in_ms(), 1000u) << RailsSummary(during);
  const v1::RailInfo* r2 = MatchingRail(during, rails_[1]);
  ASSERT_NE(r2, nullptr) << RailsSummary(during);
  EXPECT_EQ(r2->state(), "up") << "rail 2 went down with rail 1\n" << RailsSummary(during);

  const auto restored = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(RailScript("readdress-rail", 1));
  v1::LinkInfo back;
  const int64_t back_ms = WaitRailBack(1, restored, kRailBackBound, &back);
  std::cerr << "RAIL-BACK rail 1 up again " << back_ms << " ms after its far end's address\n";
  EXPECT_GE(back_ms, 0) << "rail 1 not up again even " << (kRailBackBound.count() + 5000)
                        << " ms after host-b's end had its address back:\n"
                        << RailsSummary(back) << Describe();
  EXPECT_LE(back_ms, kRailBackBound.count())
      << "rail 1 came back later than " << kRailBackBound.count()
      << " ms after host-b's end had its address back\n"
      << RailsSummary(back);
  const v1::LinkInfo after = LinkAB();
  EXPECT_EQ(after.state(), "up");
  EXPECT_EQ(after.counters().downs(), 0u) << RailsSummary(after);
  const v1::RailInfo* r2_after = MatchingRail(after, rails_[1]);
  ASSERT_NE(r2_after, nullptr) << RailsSummary(after);
  EXPECT_EQ(r2_after->downs(), 0u) << RailsSummary(after);
}

// A pair that was up, whose probes fail once its cable is back (its ends
// unreachable from each other for a while, both up and addressed: as
// routes or neighbour entries lagging a port), is probed again after 200,
// 400, 800 and 1000 ms before the doubling hold-down: whenever host-a
// shows k failed probes (1 to 4), the next is at most 100 * 2^k ms away
// (the old schedule waited a whole hold-down, 1 s, after the first). Once
// reachable, the rail is up again at the next probe.
TEST_F(LinkRails, ARailThatWasUpIsProbedAgainSoonAfterAFailedProbe) {
  ASSERT_NO_FATAL_FAILURE(StartWithRails(""));
  ASSERT_NO_FATAL_FAILURE(CutRailAndWaitDown(1));
  // Back up, then unreachable before its hold-down (1 s) has passed.
  ASSERT_NO_FATAL_FAILURE(RailScript("restore-rail", 1));
  ASSERT_NO_FATAL_FAILURE(RailScript("misroute-rail", 1));
  std::string bad;
  uint32_t most = 0;
  v1::LinkInfo seen;
  EXPECT_TRUE(WaitLink(
      a(), "host-b",
      [&](const v1::LinkInfo& l) {
        const v1::RailInfo* r = MatchingRail(l, rails_[0]);
        if (r == nullptr) return false;
        if (r->state() == "up") {
          bad = "rail 1 up while its ends cannot reach each other";
          return true;
        }
        const uint32_t k = r->failed_probes();
        if (k >= 1 && k <= 4 && r->retry_in_ms() > (100u << k)) {
          bad = "after " + std::to_string(k) + " failed probe(s) the next is " +
                std::to_string(r->retry_in_ms()) + " ms away, more than " +
                std::to_string(100u << k);
          return true;
        }
        most = std::max(most, k);
        return k >= 2;
      },
      Millis(15000), &seen))
      << "host-a did not fail two probes of rail 1 within 15 s of its cable coming back "
         "(most: "
      << most << "):\n"
      << RailsSummary(seen);
  EXPECT_TRUE(bad.empty()) << bad << "\n" << RailsSummary(seen);
  const v1::RailInfo* r1 = MatchingRail(seen, rails_[0]);
  ASSERT_NE(r1, nullptr) << RailsSummary(seen);
  EXPECT_FALSE(r1->last_error().empty()) << "a failed probe without its reason\n"
                                         << RailsSummary(seen);
  std::cerr << "rail 1 with its ends unreachable:\n" << RailsSummary(seen);

  const auto restored = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(RailScript("reroute-rail", 1));
  v1::LinkInfo back;
  const int64_t back_ms = WaitRailBack(1, restored, kRailBackBound, &back);
  std::cerr << "RAIL-BACK rail 1 up again " << back_ms
            << " ms after its ends could reach each other\n";
  EXPECT_GE(back_ms, 0) << "rail 1 not up again even " << (kRailBackBound.count() + 5000)
                        << " ms after its ends could reach each other:\n"
                        << RailsSummary(back) << Describe();
  EXPECT_LE(back_ms, kRailBackBound.count()) << RailsSummary(back);
  const v1::RailInfo* r1_back = MatchingRail(back, rails_[0]);
  ASSERT_NE(r1_back, nullptr) << RailsSummary(back);
  EXPECT_EQ(r1_back->failed_probes(), 0u)
      << "the count of failed probes outlived the rail coming up\n"
      << RailsSummary(back);
  EXPECT_EQ(back.counters().downs(), 0u) << RailsSummary(back);
}

// A peer that holds the fabric key but lies about rails: an AddRail beyond
// the plan, a pair under another pair's index (its rails reordered), a
// rail it never announced, another generation. Each is refused by name;
// the real link, its generation and its rails carry on.
TEST_F(LinkRails, AHostilePeersRailsAreRefusedAndTheRealRailsCarryOn) {
  ASSERT_NO_FATAL_FAILURE(StartWithRails(""));
  auto lb = LinkTo(b(), "host-a");
  ASSERT_TRUE(lb.has_value());
  const uint64_t generation = lb->generation();
  const v1::LinkInfo before = LinkAB();
  // The plan's first and last pairs (canonical order: by names).
  const std::string first = TcpName(rails_[0].a) + "," + TcpName(rails_[0].b);
  const std::string last = TcpName(rails_[1].a) + "," + TcpName(rails_[1].b);
  Child* rogue = StartApp(
      a(), "peer-rogue",
      {"--address", b().listen(), "--key", a().key, "--host-id", "host-a", "--expect", "host-b",
       "--generation", std::to_string(generation), "--pair1", first, "--pair4", last});
  ASSERT_NE(rogue, nullptr);
  auto line = rogue->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(line.has_value()) << rogue->Describe();
  EXPECT_TRUE(ExitedWith(rogue->WaitExit(Millis(10000)), 0)) << *line;
  EXPECT_EQ(Field(*line, "ok"), 1u) << *line;
  const struct {
    const char* what;
    const char* code;
    const char* says;
  } expected[] = {
      {"beyond", "INVALID", "rail 99 is not in the plan of 4 rails"},
      {"reordered", "INVALID", "in the canonical order, not"},
      {"unannounced", "INVALID", "tcp:10.9.9.9"},
      {"generation", "LINK_DOWN", "no link of generation"},
  };
  for (const auto& e : expected) {
    EXPECT_EQ(StrField(*line, e.what), e.code) << e.what << ": " << *line;
    EXPECT_NE(StrField(*line, std::string(e.what) + "_message").find(e.says), std::string::npos)
        << e.what << ": " << *line;
  }
  // Nothing of the real link moved: same generation, the same rails up,
  // and calls still pass over them.
  const v1::LinkInfo after = LinkAB();
  EXPECT_EQ(after.state(), "up") << RailsSummary(after);
  EXPECT_EQ(after.generation(), before.generation()) << RailsSummary(after);
  EXPECT_TRUE(RailsAsPlanned(after)) << RailsSummary(after);
  for (const RailAddresses& r : rails_) {
    const v1::RailInfo* ri = MatchingRail(after, r);
    ASSERT_NE(ri, nullptr) << RailsSummary(after);
    EXPECT_EQ(ri->downs(), 0u) << RailsSummary(after);
  }
  ASSERT_NO_FATAL_FAILURE(StartCallStream());
  ExpectStreamClean();
}

}  // namespace
}  // namespace mcdma::itest
