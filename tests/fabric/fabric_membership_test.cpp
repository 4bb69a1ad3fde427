// Fabric membership with a real etcd: daemons in network namespaces find
// each other through the store and link over the cables they share, a
// killed host is evicted within one lease, a host that joins is linked
// within 2 s, and a store that goes away changes nothing for the links.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "fabric_hosts.hpp"

namespace mcdma::ftest {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

class FabricMembership : public FabricHosts {};

TEST_F(FabricMembership, LinksFollowTheStoreAndTheCablesOnly) {
  // a-b-c-d in a line, plus a-c: d reaches a only through c.
  ASSERT_NO_FATAL_FAILURE(MakeFabric(4, {"ab", "bc", "cd", "ac"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(15000))) << why;

  std::string raw;
  auto f = Fabric(0, &raw);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const v1::FabricReply& a = f.value();
  EXPECT_EQ(a.source(), "etcd");
  EXPECT_EQ(a.store_state(), "connected");
  EXPECT_NE(a.lease_id(), 0);
  ASSERT_EQ(a.hosts_size(), 4) << raw;
  EXPECT_EQ(a.hosts(0).host(), "host-a");
  EXPECT_EQ(a.hosts(0).state(), "self");
  // host-a's fabric addresses are its two cables' (not the bridge's).
  EXPECT_EQ(a.addresses_size(), 2) << raw;
  for (const char* peer : {"host-b", "host-c"}) {
    const auto* h = HostIn(a, peer);
    ASSERT_NE(h, nullptr) << peer;
    EXPECT_EQ(h->state(), "member");
    EXPECT_EQ(h->reach(), "direct") << peer << ": " << h->reach_detail();
    EXPECT_EQ(h->link_state(), "up");
    EXPECT_FALSE(h->dial_address().empty()) << "host-a has the lower id and dials " << peer;
  }
  const auto* d = HostIn(a, "host-d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->reach(), "none");
  EXPECT_TRUE(d->link_state().empty());
  // Each host's record lists its links: host-d's shows host-c up.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto g = Fabric(0);
        if (!g.ok()) return false;
        const auto* dd = HostIn(g.value(), "host-d");
        return dd != nullptr && dd->links_size() == 1 && dd->links(0).peer() == "host-c" &&
               dd->links(0).state() == "up";
      },
      Millis(10000)));
  // The picture: an edge per cable.
  harness::CommandResult dot = harness::RunCommand(
      {MCDMA_CTL_PATH, "--socket", host(0).socket, "fabric", "graph"}, Millis(15000));
  ASSERT_EQ(dot.exit_code(), 0) << dot.Describe();
  for (const char* edge : {"\"host-a\" -- \"host-b\"", "\"host-a\" -- \"host-c\"",
                           "\"host-b\" -- \"host-c\"", "\"host-c\" -- \"host-d\""})
    EXPECT_NE(dot.out.find(edge), std::string::npos) << edge << " missing:\n" << dot.out;
  EXPECT_EQ(dot.out.find("\"host-a\" -- \"host-d\""), std::string::npos) << dot.out;
  harness::CommandResult table =
      harness::RunCommand({MCDMA_CTL_PATH, "--socket", host(0).socket, "fabric"}, Millis(15000));
  ASSERT_EQ(table.exit_code(), 0) << table.Describe();
  std::cout << "mcdmactl fabric on host-a:\n" << table.out << "mcdmactl fabric graph:\n" << dot.out;
}

TEST_F(FabricMembership, AKilledHostIsEvictedWithinALeaseAndAJoiningOneLinkedWithin2s) {
  ASSERT_NO_FATAL_FAILURE(MakeFabric(3, {"ab", "bc"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(15000))) << why;

  auto killed_at = harness::Clock::now();
  KillDaemon(2);
  auto evicted = [&] {
    auto f = Fabric(1);
    if (!f.ok()) return false;
    const auto* c = HostIn(f.value(), "host-c");
    return c != nullptr && c->state() == "evicted";
  };
  ASSERT_TRUE(WaitFor(evicted, Millis(lease_ttl_ms_ + 3000)))
      << "host-c not evicted on host-b within the lease and 3 s";
  auto evict_ms = duration_cast<milliseconds>(harness::Clock::now() - killed_at).count();
  std::cout << "eviction after kill -9: " << evict_ms << " ms (lease " << lease_ttl_ms_ << " ms)\n";
  EXPECT_LE(evict_ms, lease_ttl_ms_) << "evicted later than one lease TTL";
  // host-a, one hop away, sees it evicted too (no link of its own to it).
  auto fa = Fabric(0);
  ASSERT_TRUE(fa.ok());
  const auto* ca = HostIn(fa.value(), "host-c");
  ASSERT_NE(ca, nullptr);
  EXPECT_EQ(ca->state(), "evicted");
  auto lb = Links(1);
  ASSERT_TRUE(lb.ok());
  EXPECT_EQ(harness::FindLink(lb.value(), "host-c"), nullptr) << "host-b kept a link to host-c";

  // host-c comes back under a new instance: linked within 2 s of its lease
  // (measured from when its daemon answers, which is after the lease).
  ASSERT_NO_FATAL_FAILURE(StartDaemon(2));
  auto started = harness::Clock::now();
  ASSERT_TRUE(WaitFor([&] { return LinkUp(1, "host-c") && LinkUp(2, "host-b"); }, Millis(5000)));
  auto join_ms = duration_cast<milliseconds>(harness::Clock::now() - started).count();
  std::cout << "join: link up " << join_ms << " ms after the daemon answered\n";
  EXPECT_LE(join_ms, 2000);
  auto fb = Fabric(1);
  ASSERT_TRUE(fb.ok());
  const auto* cb = HostIn(fb.value(), "host-c");
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(cb->state(), "member");
}

TEST_F(FabricMembership, TheStoreGoingAwayChangesNothingForTheLinks) {
  ASSERT_NO_FATAL_FAILURE(MakeFabric(3, {"ab", "bc"}));
  ASSERT_NO_FATAL_FAILURE(StartAll());
  std::string why;
  ASSERT_TRUE(WaitFor([&] { return LinksAreTheCables(&why); }, Millis(15000))) << why;
  auto before = Links(1);
  ASSERT_TRUE(before.ok());
  // Traffic through the relay all along: host-a calls host-c's echo and
  // writes and reads back a slot of its export, every byte checked.
  ASSERT_TRUE(WaitRoute(0, "host-c", 2, Millis(15000)));
  harness::Child* server = App(2, "serve", {"--service", "echo"});
  harness::Child* exporter = App(2, "fill",
                                 {"--export", "shared", "--size", std::to_string(2 << 20), "--seed",
                                  "11", "--allowed-peers", "host-a"});
  ASSERT_NE(server, nullptr);
  ASSERT_NE(exporter, nullptr);
  ASSERT_TRUE(server->WaitForPrefix("READY", Millis(15000)));
  ASSERT_TRUE(exporter->WaitForPrefix("READY", Millis(15000)));
  harness::Child* load = App(0, "peer-load",
                             {"--service", "host-c/echo", "--export", "shared", "--peer", "host-c",
                              "--slot", "1", "--slot-bytes", std::to_string(1 << 20), "--read-seed",
                              "11", "--call-threads", "2", "--timeout-ms", "5000"});
  ASSERT_NE(load, nullptr);
  ASSERT_TRUE(load->WaitForPrefix("READY", Millis(15000)));
  // calls_ok and xfers_ok from the app's STATUS line.
  auto progress = [&]() -> std::pair<uint64_t, uint64_t> {
    if (!load->WriteStdin("status\n")) return {0, 0};
    auto line = load->WaitForPrefix("STATUS", Millis(10000));
    unsigned long long calls = 0, xfers = 0;
    int pre = 0;
    if (!line || std::sscanf(line->c_str(), "STATUS pre_inflight=%d calls_ok=%llu xfers_ok=%llu",
                             &pre, &calls, &xfers) != 3)
      return {0, 0};
    return {calls, xfers};
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        auto [calls, xfers] = progress();
        return calls > 0 && xfers > 0;
      },
      Millis(20000)))
      << "no routed calls and transfers before the store went away";
  const auto at_stop = progress();

  store_->Stop();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto f = Fabric(1);
        return f.ok() && f.value().store_state() == "down";
      },
      Millis(10000)))
      << "host-b does not say the store is down";
  // Longer than a lease: nobody is evicted, every link stays up under the
  // same generation.
  std::this_thread::sleep_for(Millis(lease_ttl_ms_ + 1000));
  auto during = Fabric(1);
  ASSERT_TRUE(during.ok());
  for (const char* h : {"host-a", "host-c"}) {
    const auto* v = HostIn(during.value(), h);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->state(), "member") << h;
  }
  EXPECT_TRUE(LinksAreTheCables(&why)) << why;

  ASSERT_TRUE(store_->Restart().ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        for (size_t i = 0; i < 3; ++i) {
          auto f = Fabric(i);
          if (!f.ok() || f.value().store_state() != "connected") return false;
        }
        return true;
      },
      Millis(15000)))
      << "the daemons did not reconnect to the store";
  auto after = Links(1);
  ASSERT_TRUE(after.ok());
  for (const auto& l : before.value().links()) {
    const v1::LinkInfo* n = harness::FindLink(after.value(), l.peer());
    ASSERT_NE(n, nullptr) << l.peer();
    EXPECT_EQ(n->state(), "up");
    EXPECT_EQ(n->generation(), l.generation()) << l.peer() << "'s link was re-made";
  }
  auto f = Fabric(1);
  ASSERT_TRUE(f.ok());
  EXPECT_GE(f.value().relists(), 2u);
  for (const char* h : {"host-a", "host-c"}) EXPECT_EQ(HostIn(f.value(), h)->state(), "member");

  // The apps saw nothing: calls and transfers went on through the store's
  // absence and return, none failed, every byte matched.
  const auto at_restart = progress();
  EXPECT_GT(at_restart.first, at_stop.first) << "no calls while the store was away";
  EXPECT_GT(at_restart.second, at_stop.second) << "no transfers while the store was away";
  ASSERT_TRUE(WaitFor([&] { return progress().second > at_restart.second; }, Millis(10000)));
  load->CloseStdin();
  load->ReadToEof(Millis(30000));
  const std::string sum = load->LastLineWith("{\"calls_ok\":");
  EXPECT_NE(sum.find("\"mismatch\":0,\"early\":{},\"pre\":{},\"post\":{},\"lookup_errors\":{},"
                     "\"resolve_errors\":{}"),
            std::string::npos)
      << sum;
  std::cout << "routed traffic while the store stopped and restarted: " << sum << "\n";
}

TEST_F(FabricMembership, AHostWithoutTheKeyIsListedButNeverLinked) {
  ASSERT_NO_FATAL_FAILURE(MakeFabric(3, {"ab", "bc"}));
  ASSERT_NO_FATAL_FAILURE(StartDaemon(0));
  ASSERT_NO_FATAL_FAILURE(StartDaemon(1));
  // host-c holds another key: it publishes itself, host-b dials it, and
  // the key check refuses the link both ways.
  std::string other = dir_ + "/other.key";
  ASSERT_TRUE(harness::WriteFabricKey(other).ok());
  host(2).key = other;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(2));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto f = Fabric(1);
        if (!f.ok()) return false;
        const auto* c = HostIn(f.value(), "host-c");
        return c != nullptr && c->state() == "member";
      },
      Millis(10000)));
  ASSERT_TRUE(WaitFor([&] { return LinkUp(0, "host-b"); }, Millis(10000)));
  std::this_thread::sleep_for(Millis(2000));
  auto lb = Links(1);
  ASSERT_TRUE(lb.ok());
  const v1::LinkInfo* l = harness::FindLink(lb.value(), "host-c");
  ASSERT_NE(l, nullptr) << "host-b should dial host-c (it is listed)";
  EXPECT_NE(l->state(), "up");
  EXPECT_FALSE(l->last_error().empty());
  std::cout << "host-b > host-c: " << l->state() << ": " << l->last_error() << "\n";
  EXPECT_FALSE(LinkUp(2, "host-b"));
}

}  // namespace
}  // namespace mcdma::ftest
