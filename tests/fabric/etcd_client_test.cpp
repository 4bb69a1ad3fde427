// The daemon's etcd client (daemon/src/fabric/etcd_client.*) against a real
// etcd (harness/etcd_server.hpp) on free loopback ports: bytes in and out,
// leases expiring and kept alive, watches that miss nothing, compaction,
// the store stopped, killed and restarted, a dead endpoint among live ones,
// the bounds, and the store URL. Without etcd every test fails, saying that
// scripts/install-deps.sh installs it.
#include "fabric/etcd_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/etcd_server.hpp"
#include "harness/hosts.hpp"

namespace mcdma::daemon::fabric {
namespace {

using harness::Millis;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr Millis kRpcTimeout(2000);

// Polls `pred` every 20 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(Millis(20));
  }
  return true;
}

Millis Since(Clock::time_point t) { return std::chrono::duration_cast<Millis>(Clock::now() - t); }

// What a watch delivered, from its thread.
struct Recorder {
  std::mutex mu;
  std::vector<EtcdEvent> events;
  std::vector<int64_t> batch_revisions;
  std::optional<Status> end;
  int ends = 0;

  EtcdClient::EventsFn OnEvents() {
    return [this](const std::vector<EtcdEvent>& batch, int64_t revision) {
      std::lock_guard<std::mutex> lock(mu);
      events.insert(events.end(), batch.begin(), batch.end());
      batch_revisions.push_back(revision);
    };
  }
  EtcdClient::EndFn OnEnd() {
    return [this](Status why) {
      std::lock_guard<std::mutex> lock(mu);
      end = std::move(why);
      ++ends;
    };
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return events.size();
  }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu);
    return end.has_value();
  }
};

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = harness::EtcdServer::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(started).value();
    client_ =
        std::make_unique<EtcdClient>(std::vector<std::string>{server_->endpoint()}, kRpcTimeout);
  }
  void TearDown() override {
    if (HasFailure() && server_) std::cerr << "==== etcd ====\n" << server_->LogTail(20);
  }

  EtcdListing MustList(const std::string& prefix) {
    auto listed = client_->List(prefix);
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    return listed.ok() ? std::move(listed).value() : EtcdListing{};
  }
  bool Listed(const std::string& key) {
    for (const auto& kv : MustList(key).kvs) {
      if (kv.key == key) return true;
    }
    return false;
  }

  std::unique_ptr<harness::EtcdServer> server_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClientTest, PutListDeleteKeepTheBytesExactly) {
  const std::string binary("\0\x01\xff\xfe mcdma\n\0", 11);
  const std::string largest(kMaxValueBytes, '\xa5');
  ASSERT_TRUE(client_->Put("/t/b", binary, 0).ok());
  ASSERT_TRUE(client_->Put("/t/a", "", 0).ok());
  ASSERT_TRUE(client_->Put("/t/c", largest, 0).ok());
  ASSERT_TRUE(client_->Put("/t0", "next to the prefix", 0).ok());
  ASSERT_TRUE(client_->Put("/s/a", "before the prefix", 0).ok());
  // A prefix ending in 0xff: its range ends at the byte before it, plus one.
  ASSERT_TRUE(client_->Put(std::string("/u\xff", 3) + "x", "ff", 0).ok());
  ASSERT_TRUE(client_->Put("/v", "after the 0xff prefix", 0).ok());

  EtcdListing listing = MustList("/t/");
  ASSERT_EQ(listing.kvs.size(), 3u);
  EXPECT_EQ(listing.kvs[0].key, "/t/a");
  EXPECT_EQ(listing.kvs[0].value, "");
  EXPECT_EQ(listing.kvs[1].key, "/t/b");
  EXPECT_EQ(listing.kvs[1].value, binary);
  EXPECT_EQ(listing.kvs[2].key, "/t/c");
  EXPECT_EQ(listing.kvs[2].value, largest);
  for (const auto& kv : listing.kvs) {
    EXPECT_GT(kv.create_revision, 0);
    EXPECT_GE(kv.mod_revision, kv.create_revision);
    EXPECT_LE(kv.mod_revision, listing.revision);
    EXPECT_EQ(kv.lease, 0);
  }
  EtcdListing ff = MustList(std::string("/u\xff", 3));
  ASSERT_EQ(ff.kvs.size(), 1u);
  EXPECT_EQ(ff.kvs[0].value, "ff");

  ASSERT_TRUE(client_->Delete("/t/b").ok());
  EXPECT_TRUE(client_->Delete("/t/never").ok()) << "deleting a missing key is not an error";
  listing = MustList("/t/");
  ASSERT_EQ(listing.kvs.size(), 2u);
  EXPECT_EQ(listing.kvs[0].key, "/t/a");
  EXPECT_EQ(listing.kvs[1].key, "/t/c");
}

TEST_F(EtcdClientTest, CreateRefusesAnExistingKey) {
  ASSERT_TRUE(client_->Create("/t/host", "first", 0).ok());
  Status again = client_->Create("/t/host", "second", 0);
  EXPECT_EQ(again.code(), Code::kAlreadyExists) << again.ToString();
  EXPECT_NE(again.message().find("/t/host"), std::string::npos) << again.message();
  EtcdListing listing = MustList("/t/host");
  ASSERT_EQ(listing.kvs.size(), 1u);
  EXPECT_EQ(listing.kvs[0].value, "first");
  ASSERT_TRUE(client_->Delete("/t/host").ok());
  EXPECT_TRUE(client_->Create("/t/host", "third", 0).ok());
}

TEST_F(EtcdClientTest, ALeaseWithoutKeepAlivesExpiresWithItsKeys) {
  auto lease = client_->Grant(seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Put("/t/leased", "v", *lease).ok());
  EtcdListing listing = MustList("/t/leased");
  ASSERT_EQ(listing.kvs.size(), 1u);
  EXPECT_EQ(listing.kvs[0].lease, *lease);
  const auto granted = Clock::now();
  // etcd checks expiry every 500 ms: gone within the TTL and a little.
  ASSERT_TRUE(WaitFor([&] { return !Listed("/t/leased"); }, Millis(4000)))
      << "the key outlived its 2 s lease by more than 2 s";
  EXPECT_GE(Since(granted), Millis(1500));
  auto left = client_->KeepAliveOnce(*lease);
  ASSERT_FALSE(left.ok());
  EXPECT_EQ(left.status().code(), Code::kNotFound) << left.status().ToString();
  EXPECT_EQ(client_->Revoke(*lease).code(), Code::kNotFound);
}

TEST_F(EtcdClientTest, KeepAlivesKeepALeaseAndRevokeEndsIt) {
  auto lease = client_->Grant(seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Put("/t/kept", "v", *lease).ok());
  // Twice the TTL, renewing every 500 ms.
  const auto until = Clock::now() + Millis(4000);
  while (Clock::now() < until) {
    auto left = client_->KeepAliveOnce(*lease);
    ASSERT_TRUE(left.ok()) << left.status().ToString();
    EXPECT_GE(*left, 1);
    EXPECT_LE(*left, 2);
    std::this_thread::sleep_for(Millis(500));
  }
  EXPECT_TRUE(Listed("/t/kept"));
  ASSERT_TRUE(client_->Revoke(*lease).ok());
  EXPECT_FALSE(Listed("/t/kept")) << "a revoked lease's keys go at once";
  EXPECT_EQ(client_->KeepAliveOnce(*lease).status().code(), Code::kNotFound);
}

TEST_F(EtcdClientTest, AWatchFromTheListingMissesNothingInOrder) {
  ASSERT_TRUE(client_->Put("/t/a", "a1", 0).ok());
  ASSERT_TRUE(client_->Put("/t/b", "b1", 0).ok());
  EtcdListing listing = MustList("/t/");
  ASSERT_EQ(listing.kvs.size(), 2u);
  // Changes between the listing and the watch.
  ASSERT_TRUE(client_->Put("/t/c", "c1", 0).ok());
  ASSERT_TRUE(client_->Delete("/t/a").ok());
  ASSERT_TRUE(client_->Put("/other", "not watched", 0).ok());

  Recorder rec;
  auto watch = client_->WatchPrefix("/t/", listing.revision + 1, rec.OnEvents(), rec.OnEnd());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_TRUE(client_->Put("/t/b", "b2", 0).ok());
  ASSERT_TRUE(client_->Put("/t/d", std::string("d\0", 2), 0).ok());
  ASSERT_TRUE(client_->Delete("/t/c").ok());
  ASSERT_TRUE(client_->Put("/t0", "next to the prefix", 0).ok());

  ASSERT_TRUE(WaitFor([&] { return rec.count() >= 5; }, Millis(5000))) << rec.count();
  std::this_thread::sleep_for(Millis(200));  // nothing more may come
  std::lock_guard<std::mutex> lock(rec.mu);
  struct Want {
    EtcdEvent::Type type;
    std::string key, value;
  };
  const std::vector<Want> want = {{EtcdEvent::Type::kPut, "/t/c", "c1"},
                                  {EtcdEvent::Type::kDelete, "/t/a", ""},
                                  {EtcdEvent::Type::kPut, "/t/b", "b2"},
                                  {EtcdEvent::Type::kPut, "/t/d", std::string("d\0", 2)},
                                  {EtcdEvent::Type::kDelete, "/t/c", ""}};
  ASSERT_EQ(rec.events.size(), want.size());
  int64_t last = listing.revision;
  for (size_t i = 0; i < want.size(); ++i) {
    const EtcdEvent& ev = rec.events[i];
    EXPECT_EQ(ev.type, want[i].type) << i;
    EXPECT_EQ(ev.kv.key, want[i].key) << i;
    EXPECT_EQ(ev.kv.value, want[i].value) << i;
    EXPECT_GT(ev.kv.mod_revision, last) << i << ": revisions must rise";
    last = ev.kv.mod_revision;
  }
  EXPECT_GE(rec.batch_revisions.back(), last);
  EXPECT_FALSE(rec.end.has_value()) << rec.end->ToString();
}

TEST_F(EtcdClientTest, AWatchFromACompactedRevisionEndsCompacted) {
  ASSERT_TRUE(client_->Put("/t/k", "1", 0).ok());
  const int64_t old = MustList("/t/").revision;
  ASSERT_TRUE(client_->Put("/t/k", "2", 0).ok());
  ASSERT_TRUE(client_->Put("/t/k", "3", 0).ok());
  const int64_t now = MustList("/t/").revision;
  ASSERT_TRUE(client_->Compact(now).ok());

  Recorder rec;
  auto watch = client_->WatchPrefix("/t/", old, rec.OnEvents(), rec.OnEnd());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return rec.ended(); }, Millis(5000)));
  std::lock_guard<std::mutex> lock(rec.mu);
  EXPECT_EQ(rec.end->code(), kEtcdCompacted) << rec.end->ToString();
  EXPECT_NE(rec.end->message().find(std::to_string(now)), std::string::npos) << rec.end->message();
  EXPECT_TRUE(rec.events.empty());
  EXPECT_EQ(rec.ends, 1);
}

TEST_F(EtcdClientTest, AStoppedStoreFailsCallsInTimeAndEndsTheWatchUntilItIsBack) {
  // A second's timeout: each call below waits that long for the store.
  const Millis timeout(1000);
  client_ = std::make_unique<EtcdClient>(std::vector<std::string>{server_->endpoint()}, timeout);
  ASSERT_TRUE(client_->Put("/t/kept", "across the restart", 0).ok());
  Recorder rec;
  auto watch = client_->WatchPrefix("/t/", 0, rec.OnEvents(), rec.OnEnd());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();

  server_->Stop();
  ASSERT_TRUE(WaitFor([&] { return rec.ended(); }, Millis(5000))) << "the watch did not end";
  {
    std::lock_guard<std::mutex> lock(rec.mu);
    EXPECT_EQ(rec.end->code(), Code::kUnavailable) << rec.end->ToString();
    EXPECT_NE(rec.end->message().find(server_->endpoint()), std::string::npos);
  }
  const auto t = Clock::now();
  Status put = client_->Put("/t/x", "v", 0);
  EXPECT_LE(Since(t), timeout + Millis(500));
  EXPECT_EQ(put.code(), Code::kUnavailable) << put.ToString();
  EXPECT_NE(put.message().find("etcd " + server_->endpoint() + ": Put /t/x: "), std::string::npos)
      << put.message();
  EXPECT_EQ(client_->List("/t/").status().code(), Code::kUnavailable);
  EXPECT_EQ(client_->Grant(seconds(5)).status().code(), Code::kUnavailable);
  auto refused = client_->WatchPrefix("/t/", 0, rec.OnEvents(), rec.OnEnd());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();

  ASSERT_TRUE(server_->Restart().ok());
  Status last_put;
  ASSERT_TRUE(WaitFor(
      [&] {
        last_put = client_->Put("/t/x", "v", 0);
        return last_put.ok();
      },
      Millis(10000)))
      << last_put.ToString() << "no call succeeded within 10 s of the restart";
  EXPECT_TRUE(Listed("/t/kept"));
  Recorder again;
  auto rewatch = client_->WatchPrefix("/t/", 0, again.OnEvents(), again.OnEnd());
  ASSERT_TRUE(rewatch.ok()) << rewatch.status().ToString();
  ASSERT_TRUE(client_->Put("/t/y", "after", 0).ok());
  EXPECT_TRUE(WaitFor([&] { return again.count() == 1; }, Millis(5000)));
  std::lock_guard<std::mutex> lock(rec.mu);
  EXPECT_EQ(rec.ends, 1) << "on_end is called once";
}

TEST_F(EtcdClientTest, AKilledStoreEndsTheWatch) {
  Recorder rec;
  auto watch = client_->WatchPrefix("/t/", 0, rec.OnEvents(), rec.OnEnd());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  server_->Kill();
  ASSERT_TRUE(WaitFor([&] { return rec.ended(); }, Millis(5000)));
  std::lock_guard<std::mutex> lock(rec.mu);
  EXPECT_EQ(rec.end->code(), Code::kUnavailable) << rec.end->ToString();
}

TEST_F(EtcdClientTest, CancelEndsAWatchWithoutCallingOnEnd) {
  Recorder rec;
  auto watch = client_->WatchPrefix("/t/", 0, rec.OnEvents(), rec.OnEnd());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_TRUE(client_->Put("/t/a", "1", 0).ok());
  ASSERT_TRUE(WaitFor([&] { return rec.count() == 1; }, Millis(5000)));
  (*watch)->Cancel();
  ASSERT_TRUE(client_->Put("/t/a", "2", 0).ok());
  watch->reset();
  server_->Stop();
  std::lock_guard<std::mutex> lock(rec.mu);
  EXPECT_EQ(rec.events.size(), 1u);
  EXPECT_EQ(rec.ends, 0);
}

TEST_F(EtcdClientTest, OneDeadEndpointDoesNotStopTheClient) {
  std::vector<uint16_t> free = harness::FreePorts(1);
  ASSERT_EQ(free.size(), 1u);
  EtcdClient client({"127.0.0.1:" + std::to_string(free[0]), server_->endpoint()}, kRpcTimeout);
  // The first call may go to the dead endpoint; the next goes on.
  Status first = client.Put("/t/a", "1", 0);
  if (!first.ok()) {
    EXPECT_EQ(first.code(), Code::kUnavailable) << first.ToString();
    EXPECT_NE(first.message().find(std::to_string(free[0])), std::string::npos);
  }
  for (int i = 0; i < 10; ++i) {
    Status st = client.Put("/t/a", std::to_string(i), 0);
    EXPECT_TRUE(st.ok()) << i << ": " << st.ToString();
  }
  Recorder rec;
  auto watch = client.WatchPrefix("/t/", 0, rec.OnEvents(), rec.OnEnd());
  EXPECT_TRUE(watch.ok()) << watch.status().ToString();
}

TEST_F(EtcdClientTest, BoundsRefuseWhatIsTooLargeByName) {
  Status big = client_->Put("/t/big", std::string(kMaxValueBytes + 1, 'x'), 0);
  EXPECT_EQ(big.code(), Code::kInvalid) << big.ToString();
  EXPECT_NE(big.message().find("over the limit"), std::string::npos) << big.message();
  Status long_key = client_->Put("/t/" + std::string(kMaxKeyBytes, 'k'), "v", 0);
  EXPECT_EQ(long_key.code(), Code::kInvalid) << long_key.ToString();
  EXPECT_EQ(client_->Put("", "v", 0).code(), Code::kInvalid);
  EXPECT_EQ(client_->Grant(seconds(0)).status().code(), Code::kInvalid);

  // Another writer stores a value over the bound: the listing and the
  // watch refuse it by name rather than take it.
  Recorder rec;
  auto watch = client_->WatchPrefix("/t/", 0, rec.OnEvents(), rec.OnEnd());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  harness::CommandResult put =
      server_->Ctl({"put", "/t/huge", std::string(kMaxValueBytes + 100, 'h')}, Millis(10000));
  ASSERT_EQ(put.exit_code(), 0) << put.Describe();
  auto listed = client_->List("/t/");
  EXPECT_EQ(listed.status().code(), Code::kNoMemory) << listed.status().ToString();
  EXPECT_NE(listed.status().message().find("/t/huge"), std::string::npos);
  ASSERT_TRUE(WaitFor([&] { return rec.ended(); }, Millis(5000)));
  std::lock_guard<std::mutex> lock(rec.mu);
  EXPECT_EQ(rec.end->code(), Code::kNoMemory) << rec.end->ToString();
  EXPECT_TRUE(rec.events.empty());
}

TEST(EtcdUrl, AcceptsEtcdAndHttpEndpointLists) {
  auto one = ParseEtcdUrl("etcd://127.0.0.1:2379");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(*one, std::vector<std::string>{"127.0.0.1:2379"});
  auto three = ParseEtcdUrl("http://10.0.0.1:2379,store-b.example:2379,[fd00::3]:12379/");
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(*three,
            (std::vector<std::string>{"10.0.0.1:2379", "store-b.example:2379", "[fd00::3]:12379"}));
}

TEST(EtcdUrl, RefusesOthersByName) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"127.0.0.1:2379", "expected etcd://"},
      {"https://h:2379", "TLS is not supported"},
      {"ftp://h:2379", "unknown scheme 'ftp'"},
      {"etcd://", "an empty endpoint"},
      {"etcd://h", "has no port"},
      {"etcd://h:", "the port must be 1-65535"},
      {"etcd://h:0", "the port must be 1-65535"},
      {"etcd://h:65536", "the port must be 1-65535"},
      {"etcd://h:23x9", "the port must be 1-65535"},
      {"etcd://:2379", "has no host"},
      {"etcd://a:1,,b:2", "an empty endpoint"},
      {"etcd://a:1,", "an empty endpoint"},
      {"etcd://h:2379/v3", "no path"},
      {"etcd://fd00::1:2379", "IPv6 address in brackets"},
      {"etcd://h st:2379", "bad character"},
  };
  for (const auto& [url, why] : bad) {
    auto parsed = ParseEtcdUrl(url);
    ASSERT_FALSE(parsed.ok()) << "'" << url << "' was accepted";
    EXPECT_EQ(parsed.status().code(), Code::kInvalid) << url;
    EXPECT_NE(parsed.status().message().find(why), std::string::npos)
        << "'" << url << "': " << parsed.status().message();
  }
}

}  // namespace
}  // namespace mcdma::daemon::fabric
