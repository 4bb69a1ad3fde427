// Bulk through relays: apps READ and WRITE exports on hosts their daemon
// has no link to, byte-verified at both ends; a route cut under a transfer
// is replaced with nothing lost; an export is only for the hosts it names,
// whichever daemons carry the request (docs/architecture.md §23.1).
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>

#include "fabric_hosts.hpp"

namespace mcdma::ftest {
namespace {

class FabricBulk : public FabricHosts {
 protected:
  // The JSON line a write / verify-read app prints at its end.
  static std::string Summary(harness::Child& app) {
    app.ReadToEof(Millis(180000));
    return app.LastLineWith("{\"ok\":");
  }
  // A fill app on host i exporting `size` bytes of pattern `seed` as
  // `name` to `peers`; waits for its READY.
  harness::Child* Fill(size_t i, const std::string& name, uint64_t size, uint64_t seed,
                       const std::string& peers) {
    harness::Child* f = App(i, "fill",
                            {"--export", name, "--size", std::to_string(size), "--seed",
                             std::to_string(seed), "--allowed-peers", peers});
    if (f == nullptr || !f->WaitForPrefix("READY", Millis(15000))) return nullptr;
    return f;
  }
  // Whether the fill app's own memory holds pattern `seed`.
  static std::string VerifyAt(harness::Child& fill, uint64_t seed) {
    if (!fill.WriteStdin("verify " + std::to_string(seed) + "\n")) return "stdin closed";
    auto line = fill.WaitForPrefix("VERIFY", Millis(60000));
    return line ? *line : "no answer";
  }
  // Bytes host i's relay forwarded.
  uint64_t Forwarded(size_t i) {
    auto f = Fabric(i);
    return f.ok() ? f.value().relay().forwarded_bytes() : 0;
  }
};

TEST_F(FabricBulk, WritesAndReadsCrossOneAndTwoRelaysByteForByte) {
  // a - b - c - d: host-a reaches host-c through host-b, host-d through
  // host-b and host-c.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "cd"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-d", 3, Millis(15000))) << "no 3-hop route from host-a to host-d";
  ASSERT_TRUE(WaitRoute(3, "host-a", 3, Millis(15000))) << "no route back";

  constexpr uint64_t kBytes = 48ull << 20;
  for (size_t dest : {2u, 3u}) {
    const std::string host = "host-" + std::string(1, static_cast<char>('a' + dest));
    harness::Child* fill = Fill(dest, "kv", kBytes, 11, "host-a");
    ASSERT_NE(fill, nullptr) << host;
    // host-a writes pattern 21 over it, in 12 pieces submitted in reverse.
    harness::Child* w =
        App(0, "write", {"--export", "kv", "--peer", host, "--seed", "21", "--pieces", "12"});
    ASSERT_NE(w, nullptr);
    const std::string wrote = Summary(*w);
    EXPECT_EQ(wrote.rfind("{\"ok\":1,\"bytes\":" + std::to_string(kBytes), 0), 0u)
        << host << ": " << wrote;
    EXPECT_EQ(VerifyAt(*fill, 21).rfind("VERIFY ok", 0), 0u) << host;
    // ... and reads it back.
    harness::Child* r =
        App(0, "verify-read", {"--export", "kv", "--peer", host, "--seed", "21", "--pieces", "16"});
    ASSERT_NE(r, nullptr);
    const std::string read = Summary(*r);
    EXPECT_EQ(read.rfind("{\"ok\":1", 0), 0u) << host << ": " << read;
    std::cout << "host-a > " << host << ": write " << wrote << ", read " << read << "\n";
    fill->CloseStdin();
    EXPECT_EQ(fill->WaitExit(Millis(15000)).value_or(-1), 0);
  }
  // Each relay carried both ways of both transfers to host-d; host-b
  // also those to host-c.
  EXPECT_GT(Forwarded(1), 4 * kBytes);
  EXPECT_GT(Forwarded(2), 2 * kBytes);
  auto fb = Fabric(1);
  ASSERT_TRUE(fb.ok());
  EXPECT_EQ(fb.value().relay().dropped_refused(), 0u);
  EXPECT_EQ(fb.value().relay().dropped_hop_limit(), 0u);
}

TEST_F(FabricBulk, ARouteCutUnderAWriteIsReplacedWithNothingLost) {
  // A ring a-b-c-d-a, each cable limited to 200 Mbit/s so the write runs
  // long enough to cut the cable its route crosses.
  cable_rate_ = "200mbit";
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "cd", "ad"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));

  constexpr uint64_t kBytes = 128ull << 20;  // about 6 s at 200 Mbit/s
  harness::Child* fill = Fill(2, "big", kBytes, 3, "host-a");
  ASSERT_NE(fill, nullptr);
  harness::Child* w =
      App(0, "write", {"--export", "big", "--peer", "host-c", "--seed", "4", "--pieces", "8"});
  ASSERT_NE(w, nullptr);
  // Cut the relay the write goes through once it is well under way. Which
  // one is the route's choice: while the links' first round trips are
  // measured the two equal routes may swap, so the relay that carries the
  // bytes says it, not the route read before.
  char cut = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (char relay : {'b', 'd'}) {
          if (Forwarded(relay - 'a') > (24ull << 20)) cut = relay;
        }
        return cut != 0;
      },
      Millis(30000)))
      << "the write did not start over host-b or host-d";
  const char other = cut == 'b' ? 'd' : 'b';
  ASSERT_TRUE(w->Alive()) << "the write ended before the cut";
  Cable("cut-cable", 'a', cut);
  const auto cut_at = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor(
      [&] {
        auto f = Fabric(0);
        return f.ok() && HostIn(f.value(), "host-c")->route(0) == std::string("host-") + other;
      },
      Millis(15000)))
      << "the route to host-c did not move to host-" << other;
  const auto moved_ms =
      std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - cut_at);
  const std::string wrote = Summary(*w);
  const auto done_ms =
      std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - cut_at);
  EXPECT_EQ(wrote.rfind("{\"ok\":1,\"bytes\":" + std::to_string(kBytes), 0), 0u) << wrote;
  EXPECT_EQ(VerifyAt(*fill, 4).rfind("VERIFY ok", 0), 0u);
  EXPECT_GT(Forwarded(other - 'a'), 0u) << "nothing went over host-" << other;
  auto after = Fabric(0);
  ASSERT_TRUE(after.ok());
  for (const auto& r : after.value().relay().routed()) {
    if (r.peer() != "host-c") continue;
    EXPECT_GE(r.route_changes(), 1u);
    std::cout << "a 128 MiB write over a route cut under it: " << wrote << "; next hop "
              << r.next_hop() << ", " << r.route_changes() << " route changes, " << r.resent()
              << " messages sent again; route moved " << moved_ms.count()
              << " ms after the cut, write done " << done_ms.count() << " ms after it\n";
  }
  Cable("restore-cable", 'a', cut);
}

TEST_F(FabricBulk, AnExportIsOnlyForTheHostsItNamesWhoeverRelays) {
  // A star around host-b: host-a, host-c and host-d each cabled to it only.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "bd"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));
  ASSERT_TRUE(WaitRoute(3, "host-c", 2, Millis(15000)));
  // host-c's export is for host-a alone; host-b (the relay) and host-d
  // (another keyed member) get nothing of it.
  harness::Child* fill = Fill(2, "only-a", 4ull << 20, 5, "host-a");
  ASSERT_NE(fill, nullptr);
  for (size_t from : {3u, 1u}) {
    harness::Child* r =
        App(from, "verify-read", {"--export", "only-a", "--peer", "host-c", "--seed", "5"});
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(Summary(*r), "{\"ok\":0,\"error\":\"resolve: PERMISSION_DENIED\"}") << from;
  }
  harness::Child* w = App(0, "write", {"--export", "only-a", "--peer", "host-c", "--seed", "6"});
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(Summary(*w).rfind("{\"ok\":1", 0), 0u);
  EXPECT_EQ(VerifyAt(*fill, 6).rfind("VERIFY ok", 0), 0u);
}

TEST_F(FabricBulk, AKvHandOffCrossesTwoRelays) {
  // a - b - c - d: the prefill host (a) hands its KV cache to the decode
  // host (d), which it has no link to; the apps do not know.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "cd"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-d", 3, Millis(15000)));
  ASSERT_TRUE(WaitRoute(3, "host-a", 3, Millis(15000)));
  harness::Child* producer =
      Tool(0, MCDMA_KV_HANDOFF_PATH, "produce",
           {"--id", "relay-kv", "--layers", "8", "--layer-bytes", std::to_string(3 << 20),
            "--allow", "host-d", "--checksum", "--timeout-ms", "60000"});
  ASSERT_NE(producer, nullptr);
  ASSERT_TRUE(producer->WaitForPrefix("READY relay-kv", Millis(15000)));
  harness::Child* consumer =
      Tool(3, MCDMA_KV_HANDOFF_PATH, "consume",
           {"--peer", "host-a", "--id", "relay-kv", "--timeout-ms", "60000"});
  ASSERT_NE(consumer, nullptr);
  auto verified = consumer->WaitForPrefix("VERIFIED", Millis(90000));
  ASSERT_TRUE(verified.has_value()) << "the consumer did not verify the hand-off";
  EXPECT_EQ(
      verified->rfind("VERIFIED " + std::to_string(8ull * (3 << 20)) + " bytes in 8 layers", 0), 0u)
      << *verified;
  EXPECT_EQ(consumer->WaitExit(Millis(30000)).value_or(-1), 0);
  EXPECT_TRUE(producer->WaitForPrefix("CONSUMED by host-d", Millis(30000)).has_value());
  EXPECT_EQ(producer->WaitExit(Millis(30000)).value_or(-1), 0);
  EXPECT_GT(Forwarded(1), 8ull * (3 << 20));
  EXPECT_GT(Forwarded(2), 8ull * (3 << 20));
  std::cout << "KV hand-off host-a > host-d over two relays: " << *verified << "\n";
}

TEST_F(FabricBulk, AHostWhoseOwnLinkIsDownIsReachedAroundIt) {
  // A ring a-b-c-d-a: host-a's cable to host-b is cut; host-a still
  // resolves, writes, reads and calls host-b, the long way round.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "cd", "ad"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  harness::Child* fill = Fill(1, "b-data", 8ull << 20, 9, "host-a");
  ASSERT_NE(fill, nullptr);
  harness::Child* server = App(1, "serve", {"--service", "echo"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->WaitForPrefix("READY", Millis(15000)));
  Cable("cut-cable", 'a', 'b');
  ASSERT_TRUE(WaitFor([&] { return !LinkUp(0, "host-b"); }, Millis(15000)));
  ASSERT_TRUE(WaitRoute(0, "host-b", 3, Millis(15000))) << "no route around the cut cable";
  harness::Child* w =
      App(0, "write", {"--export", "b-data", "--peer", "host-b", "--seed", "10", "--pieces", "4"});
  ASSERT_NE(w, nullptr);
  const std::string wrote = Summary(*w);
  EXPECT_EQ(wrote.rfind("{\"ok\":1,\"bytes\":" + std::to_string(8ull << 20), 0), 0u) << wrote;
  EXPECT_EQ(VerifyAt(*fill, 10).rfind("VERIFY ok", 0), 0u);
  harness::Child* r =
      App(0, "verify-read",
          {"--export", "b-data", "--peer", "host-b", "--seed", "10", "--pieces", "8"});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(Summary(*r).rfind("{\"ok\":1", 0), 0u);
  harness::Child* calls = App(0, "call",
                              {"--service", "host-b/echo", "--threads", "2", "--calls", "200",
                               "--depth", "2", "--max-payload", "16384", "--seed", "3"});
  ASSERT_NE(calls, nullptr);
  const std::string sum = Summary(*calls);
  EXPECT_EQ(sum.rfind("{\"ok\":400,\"failed\":0,\"mismatch\":0", 0), 0u) << sum;
  EXPECT_GT(Forwarded(3), 8ull << 20) << "host-d did not carry the traffic";
  Cable("restore-cable", 'a', 'b');
}

TEST_F(FabricBulk, ARouteThatBreaksWithNoOtherFailsTheTransferByName) {
  // a - b - c at 200 Mbit/s: the only cable to host-c is cut under a write
  // from host-a; the write ends LINK_DOWN, named, in bounded time.
  cable_rate_ = "200mbit";
  ASSERT_NO_FATAL_FAILURE(MakeFabric(3, {"ab", "bc"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));
  harness::Child* fill = Fill(2, "far", 96ull << 20, 2, "host-a");
  ASSERT_NE(fill, nullptr);
  harness::Child* w = App(0, "write",
                          {"--export", "far", "--peer", "host-c", "--seed", "8", "--pieces", "4",
                           "--timeout-ms", "60000"});
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(WaitFor([&] { return Forwarded(1) > (8ull << 20); }, Millis(30000)));
  Cable("cut-cable", 'b', 'c');
  const auto cut_at = std::chrono::steady_clock::now();
  const std::string wrote = Summary(*w);
  const auto failed_ms =
      std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - cut_at).count();
  EXPECT_EQ(wrote, "{\"ok\":0,\"error\":\"LINK_DOWN\"}");
  EXPECT_LT(failed_ms, 15000) << "the write hung on a broken route";
  std::cout << "a write whose only route broke: " << wrote << " " << failed_ms
            << " ms after the cut\n";
  auto fa = Fabric(0);
  ASSERT_TRUE(fa.ok());
  EXPECT_TRUE(HostIn(fa.value(), "host-c")->route().empty());
  Cable("restore-cable", 'b', 'c');
}

}  // namespace
}  // namespace mcdma::ftest
