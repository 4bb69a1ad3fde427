// Relays: apps call services on hosts their daemon has no link to, over
// routes through other daemons (routed links, docs/architecture.md §23),
// byte for byte, and a route that breaks is replaced.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>

#include "fabric_hosts.hpp"

namespace mcdma::ftest {
namespace {

class FabricRelay : public FabricHosts {
 protected:
  // The JSON summary line a `call` app prints at its end.
  static std::string Summary(harness::Child& app) {
    app.ReadToEof(Millis(120000));
    return app.LastLineWith("{\"ok\":");
  }
  // What a serve app ran: "COUNT calls=N notifies=M" (its bytes left out).
  static std::string ServedCalls(harness::Child& server) {
    if (!server.WriteStdin("count\n")) return "stdin closed";
    auto line = server.WaitForPrefix("COUNT", Millis(10000));
    if (!line) return "no answer";
    return line->substr(0, line->find(" bytes="));
  }
};

TEST_F(FabricRelay, CallsCrossALineOfFiveHostsByteForByte) {
  // a - b - c - d - e: host-a reaches host-e through three relays.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(5, {"ab", "bc", "cd", "de"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-e", 4, Millis(15000))) << "no 4-hop route from host-a to host-e";
  ASSERT_TRUE(WaitRoute(4, "host-a", 4, Millis(15000))) << "no route back";

  harness::Child* server = App(4, "serve", {"--service", "echo"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->WaitForPrefix("READY", Millis(15000)));
  harness::Child* near = App(3, "serve", {"--service", "echo"});
  ASSERT_NE(near, nullptr);
  ASSERT_TRUE(near->WaitForPrefix("READY", Millis(15000)));

  // Byte-checked echo calls of up to 64 KiB, four at a time per thread.
  harness::Child* far_calls = App(0, "call",
                                  {"--service", "host-e/echo", "--threads", "2", "--calls", "300",
                                   "--depth", "4", "--max-payload", "65536", "--seed", "7"});
  harness::Child* near_calls = App(0, "call",
                                   {"--service", "host-d/echo", "--threads", "2", "--calls", "300",
                                    "--depth", "4", "--max-payload", "65536", "--seed", "8"});
  ASSERT_NE(far_calls, nullptr);
  ASSERT_NE(near_calls, nullptr);
  std::string far = Summary(*far_calls);
  std::string nearer = Summary(*near_calls);
  EXPECT_EQ(far.rfind("{\"ok\":600,\"failed\":0,\"mismatch\":0", 0), 0u) << far;
  EXPECT_EQ(nearer.rfind("{\"ok\":600,\"failed\":0,\"mismatch\":0", 0), 0u) << nearer;
  std::cout << "host-a > host-e (3 relays): " << far << "\nhost-a > host-d (2 relays): " << nearer
            << "\n";

  // The relays counted what they forwarded; host-a's routed links say
  // where they go.
  auto fb = Fabric(1);
  ASSERT_TRUE(fb.ok());
  EXPECT_GT(fb.value().relay().forwarded(), 1200u);
  EXPECT_EQ(fb.value().relay().dropped_refused(), 0u);
  auto fa = Fabric(0);
  ASSERT_TRUE(fa.ok());
  bool seen = false;
  for (const auto& r : fa.value().relay().routed()) {
    if (r.peer() != "host-e") continue;
    seen = true;
    EXPECT_EQ(r.next_hop(), "host-b");
    EXPECT_GE(r.calls_out(), 600u);
  }
  EXPECT_TRUE(seen) << "host-a lists no routed link to host-e";
  harness::CommandResult table =
      harness::RunCommand({MCDMA_CTL_PATH, "--socket", host(0).socket, "fabric"}, Millis(15000));
  ASSERT_EQ(table.exit_code(), 0) << table.Describe();
  std::cout << "mcdmactl fabric on host-a:\n" << table.out;
}

TEST_F(FabricRelay, ARouteThatBreaksIsReplacedAndCallsCarryOn) {
  // A ring a-b-c-d-a: host-a reaches host-c through host-b or host-d.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "cd", "ad"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));
  harness::Child* server = App(2, "serve", {"--service", "echo"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->WaitForPrefix("READY", Millis(15000)));
  auto fa = Fabric(0);
  ASSERT_TRUE(fa.ok());
  const std::string via = HostIn(fa.value(), "host-c")->route(0);
  ASSERT_TRUE(via == "host-b" || via == "host-d") << via;
  const char other = via == "host-b" ? 'd' : 'b';
  // Calls for long enough to cut the cable under them.
  harness::Child* calls =
      App(0, "call",
          {"--service", "host-c/echo", "--threads", "2", "--calls", "20000", "--depth", "2",
           "--max-payload", "4096", "--seed", "9", "--timeout-ms", "20000"});
  ASSERT_NE(calls, nullptr);
  ASSERT_TRUE(calls->WaitForPrefix("STARTED", Millis(15000)));
  std::this_thread::sleep_for(Millis(1000));
  const char cut = via[5];  // host-b -> 'b'
  ASSERT_TRUE(calls->Alive()) << "the calls ended before the cut";
  Cable("cut-cable", 'a', cut);
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto f = Fabric(0);
        return f.ok() && HostIn(f.value(), "host-c")->route(0) == std::string("host-") + other;
      },
      Millis(15000)))
      << "the route to host-c did not move to host-" << other;
  std::string sum = Summary(*calls);
  EXPECT_EQ(sum.rfind("{\"ok\":40000,\"failed\":0,\"mismatch\":0", 0), 0u) << sum;
  // The server ran each call once: nothing lost, nothing twice.
  EXPECT_EQ(ServedCalls(*server), "COUNT calls=40000 notifies=0");
  std::cout << "calls over a route cut under them: " << sum << "\n";
  auto after = Fabric(0);
  ASSERT_TRUE(after.ok());
  for (const auto& r : after.value().relay().routed()) {
    if (r.peer() != "host-c") continue;
    EXPECT_GE(r.route_changes(), 1u);
    std::cout << "host-a's routed link to host-c: next hop " << r.next_hop() << ", "
              << r.route_changes() << " route changes, " << r.resent() << " messages sent again\n";
  }
  Cable("restore-cable", 'a', cut);
}

TEST_F(FabricRelay, AKilledRelayIsEvictedAndRoutedAround) {
  // A ring a-b-c-d-a; the daemon relaying host-a's calls to host-c is
  // killed (-9) under them.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "cd", "ad"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));
  harness::Child* server = App(2, "serve", {"--service", "echo"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->WaitForPrefix("READY", Millis(15000)));
  auto fa = Fabric(0);
  ASSERT_TRUE(fa.ok());
  const std::string via = HostIn(fa.value(), "host-c")->route(0);
  ASSERT_TRUE(via == "host-b" || via == "host-d") << via;
  const size_t relay = via == "host-b" ? 1 : 3;
  const std::string other = via == "host-b" ? "host-d" : "host-b";
  harness::Child* calls =
      App(0, "call",
          {"--service", "host-c/echo", "--threads", "2", "--calls", "20000", "--depth", "2",
           "--max-payload", "4096", "--seed", "13", "--timeout-ms", "20000"});
  ASSERT_NE(calls, nullptr);
  ASSERT_TRUE(calls->WaitForPrefix("STARTED", Millis(15000)));
  std::this_thread::sleep_for(Millis(1000));
  ASSERT_TRUE(calls->Alive()) << "the calls ended before the kill";
  const auto killed_at = harness::Clock::now();
  KillDaemon(relay);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto f = Fabric(0);
        return f.ok() && HostIn(f.value(), "host-c")->route(0) == other;
      },
      Millis(15000)))
      << "the route to host-c did not move to " << other;
  const auto moved_ms =
      std::chrono::duration_cast<Millis>(harness::Clock::now() - killed_at).count();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto f = Fabric(0);
        return f.ok() && HostIn(f.value(), via)->state() == "evicted";
      },
      Millis(lease_ttl_ms_ + 3000)))
      << via << " was not evicted";
  const auto evicted_ms =
      std::chrono::duration_cast<Millis>(harness::Clock::now() - killed_at).count();
  EXPECT_LE(evicted_ms, lease_ttl_ms_ + 500);
  std::string sum = Summary(*calls);
  EXPECT_EQ(sum.rfind("{\"ok\":40000,\"failed\":0,\"mismatch\":0", 0), 0u) << sum;
  EXPECT_EQ(ServedCalls(*server), "COUNT calls=40000 notifies=0");
  std::cout << "calls through a relay killed under them: " << sum << "; route moved " << moved_ms
            << " ms after the kill, relay evicted after " << evicted_ms << " ms\n";
}

TEST_F(FabricRelay, AStaticFabricFileLinksItsCablesAndRoutesOverThem) {
  // No store: the same file on every host, a line a-b-c, calls a > c.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(3, {"ab", "bc"}));
  fabric_file_ = WriteFabricFile(true);
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(20000))) << why;
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));
  auto f = Fabric(0);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f.value().source(), "file");
  EXPECT_EQ(HostIn(f.value(), "host-c")->reach(), "none");
  EXPECT_EQ(HostIn(f.value(), "host-c")->reach_detail(), "no cable to it in the fabric file");
  harness::Child* server = App(2, "serve", {"--service", "echo"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->WaitForPrefix("READY", Millis(15000)));
  harness::Child* calls = App(0, "call",
                              {"--service", "host-c/echo", "--threads", "2", "--calls", "200",
                               "--depth", "2", "--max-payload", "32768", "--seed", "5"});
  ASSERT_NE(calls, nullptr);
  std::string sum = Summary(*calls);
  EXPECT_EQ(sum.rfind("{\"ok\":400,\"failed\":0,\"mismatch\":0", 0), 0u) << sum;
}

TEST_F(FabricRelay, EightHostsOfAPartialMeshAllReachEachOther) {
  // A ring of eight with two chords: no host has more than three cables,
  // and the farthest pairs are three links apart.
  ASSERT_NO_FATAL_FAILURE(
      MakeFabric(8, {"ab", "bc", "cd", "de", "ef", "fg", "gh", "ah", "ae", "cg"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(30000))) << why;
  // Every host has a route to every other (in its own view).
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(WaitFor(
        [&] {
          auto f = Fabric(i);
          if (!f.ok()) return false;
          for (const auto& h : f.value().hosts()) {
            if (h.state() != "self" && h.route().empty()) return false;
          }
          return f.value().hosts_size() == 8;
        },
        Millis(20000)))
        << host(i).id << " lacks a route";
  }
  for (size_t i = 0; i < 8; ++i) {
    harness::Child* s = App(i, "serve", {"--service", "echo"});
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->WaitForPrefix("READY", Millis(15000)));
  }
  // From every host to every other: 20 byte-checked calls of up to 16 KiB
  // each, the seven from one host at once.
  size_t pairs = 0;
  for (size_t i = 0; i < 8; ++i) {
    std::vector<std::pair<std::string, harness::Child*>> batch;
    for (size_t j = 0; j < 8; ++j) {
      if (i == j) continue;
      harness::Child* c =
          App(i, "call",
              {"--service", host(j).id + "/echo", "--threads", "1", "--calls", "20", "--depth", "2",
               "--max-payload", "16384", "--seed", std::to_string(i * 8 + j)});
      ASSERT_NE(c, nullptr);
      batch.emplace_back(host(i).id + " > " + host(j).id, c);
    }
    for (auto& [what, c] : batch) {
      std::string sum = Summary(*c);
      EXPECT_EQ(sum.rfind("{\"ok\":20,\"failed\":0,\"mismatch\":0", 0), 0u) << what << ": " << sum;
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 56u);

  // Bulk: every host reads every other host's 2 MiB export back byte for
  // byte (up to three links away), and writes 1 MiB into the export of
  // the host opposite it on the ring, which checks its own memory.
  std::vector<std::string> everyone;
  for (size_t j = 0; j < 8; ++j) everyone.push_back(host(j).id);
  std::vector<harness::Child*> fills(8, nullptr);
  std::vector<harness::Child*> inboxes(8, nullptr);
  for (size_t j = 0; j < 8; ++j) {
    std::string peers;
    for (size_t k = 0; k < 8; ++k)
      if (k != j) peers += (peers.empty() ? "" : ",") + host(k).id;
    fills[j] = App(j, "fill",
                   {"--export", "shared", "--size", std::to_string(2 << 20), "--seed",
                    std::to_string(100 + j), "--allowed-peers", peers});
    inboxes[j] = App(j, "fill",
                     {"--export", "inbox", "--size", std::to_string(1 << 20), "--seed", "1",
                      "--allowed-peers", host((j + 4) % 8).id});
    ASSERT_NE(fills[j], nullptr);
    ASSERT_NE(inboxes[j], nullptr);
    ASSERT_TRUE(fills[j]->WaitForPrefix("READY", Millis(15000)));
    ASSERT_TRUE(inboxes[j]->WaitForPrefix("READY", Millis(15000)));
  }
  size_t reads = 0;
  for (size_t i = 0; i < 8; ++i) {
    std::vector<std::pair<std::string, harness::Child*>> batch;
    for (size_t j = 0; j < 8; ++j) {
      if (i == j) continue;
      harness::Child* r = App(i, "verify-read",
                              {"--export", "shared", "--peer", host(j).id, "--seed",
                               std::to_string(100 + j), "--pieces", "4"});
      ASSERT_NE(r, nullptr);
      batch.emplace_back(host(i).id + " reads " + host(j).id, r);
    }
    harness::Child* w = App(i, "write",
                            {"--export", "inbox", "--peer", host((i + 4) % 8).id, "--seed",
                             std::to_string(200 + i), "--pieces", "4"});
    ASSERT_NE(w, nullptr);
    batch.emplace_back(host(i).id + " writes " + host((i + 4) % 8).id, w);
    for (auto& [what, c] : batch) {
      std::string sum = Summary(*c);
      EXPECT_EQ(sum.rfind("{\"ok\":1", 0), 0u) << what << ": " << sum;
      ++reads;
    }
  }
  EXPECT_EQ(reads, 64u);
  for (size_t j = 0; j < 8; ++j) {
    ASSERT_TRUE(inboxes[j]->WriteStdin("verify " + std::to_string(200 + (j + 4) % 8) + "\n"));
    auto v = inboxes[j]->WaitForPrefix("VERIFY", Millis(30000));
    EXPECT_TRUE(v && v->rfind("VERIFY ok", 0) == 0) << host(j).id << ": " << v.value_or("none");
  }

  uint64_t forwarded = 0;
  for (size_t i = 0; i < 8; ++i) {
    auto f = Fabric(i);
    ASSERT_TRUE(f.ok());
    forwarded += f.value().relay().forwarded();
    EXPECT_EQ(f.value().relay().dropped_refused() + f.value().relay().dropped_looped(), 0u)
        << host(i).id;
  }
  EXPECT_GT(forwarded, 0u);
  harness::CommandResult table =
      harness::RunCommand({MCDMA_CTL_PATH, "--socket", host(0).socket, "fabric"}, Millis(15000));
  harness::CommandResult graph = harness::RunCommand(
      {MCDMA_CTL_PATH, "--socket", host(0).socket, "fabric", "graph"}, Millis(15000));
  EXPECT_EQ(graph.exit_code(), 0) << graph.Describe();
  std::cout << "56 pairs of hosts, 20 calls and a 2 MiB read each, 8 writes of 1 MiB, all "
               "verified; relayed messages "
            << forwarded << "\nmcdmactl fabric on host-a:\n"
            << table.out << "mcdmactl fabric graph on host-a:\n"
            << graph.out;
}

}  // namespace
}  // namespace mcdma::ftest
