// Calls across a link: many processes and threads on host-a call an echo
// service on host-b ("host-b/echo"), payloads from 0 B to 1 MiB, every byte
// compared, none lost or answered twice; host-b's apps call back over the
// same (incoming) link; notifications arrive once each; and both daemons'
// link counters agree with what the apps did.
#include "test_util.hpp"
#include "two_hosts.hpp"

namespace mcdma::itest {
namespace {

class LinkCalls : public TwoHosts {};

constexpr int kProcesses = 4;
constexpr int kThreads = 8;
// Sequence numbers 0, 1 and 2 of every thread are 0 B, 1 B and exactly
// kMaxPayload (pattern.hpp, CallSize), the rest spread over 2^0..2^20 bytes
// (testapp --log-sizes): about 2,000 calls and 250 MiB each way.
constexpr int kCallsPerThread = 64;
constexpr uint64_t kMaxPayload = 1 << 20;
constexpr uint64_t kForwardCalls = uint64_t{kProcesses} * kThreads * kCallsPerThread;
// host-b -> host-a over the link host-b did not dial.
constexpr int kReverseThreads = 4;
constexpr int kReverseCalls = 32;
constexpr uint64_t kReverseTotal = uint64_t{kReverseThreads} * kReverseCalls;
constexpr int kNotifies = 50;

// Asks a serve app for its counts ("COUNT calls=.. notifies=.. bytes=..").
std::string ServerCount(Child* server) {
  if (!server->WriteStdin("count\n")) return "";
  return server->WaitForPrefix("COUNT", Millis(10000)).value_or("");
}

TEST_P(LinkCalls, ManyProcessesAndThreadsCallPeerServiceAllVerified) {
  Child* server_b = StartReady(b(), "serve", {"--service", "echo"});
  Child* server_a = StartReady(a(), "serve", {"--service", "echo"});
  ASSERT_TRUE(server_a && server_b);
  std::vector<Child*> callers;
  for (int p = 0; p < kProcesses; ++p) {
    Child* c = StartApp(a(), "call",
                        {"--service", "host-b/echo", "--threads", std::to_string(kThreads),
                         "--calls", std::to_string(kCallsPerThread), "--depth", "2",
                         "--max-payload", std::to_string(kMaxPayload), "--log-sizes", "--seed",
                         std::to_string(100 + p), "--timeout-ms", "60000"});
    ASSERT_NE(c, nullptr);
    callers.push_back(c);
  }
  Child* reverse =
      StartApp(b(), "call",
               {"--service", "host-a/echo", "--threads", std::to_string(kReverseThreads), "--calls",
                std::to_string(kReverseCalls), "--depth", "2", "--max-payload", "262144",
                "--log-sizes", "--seed", "200", "--timeout-ms", "60000"});
  ASSERT_NE(reverse, nullptr);

  uint64_t forward_ok = 0;
  uint64_t forward_bytes = 0;
  for (Child* c : callers) {
    auto result = c->WaitForPrefix("{", Millis(150000));
    ASSERT_TRUE(result.has_value()) << "a caller on host-a printed no result\n" << c->Describe();
    EXPECT_TRUE(ExitedWith(c->WaitExit(Millis(30000)), 0)) << *result << "\n" << c->Describe();
    EXPECT_EQ(Field(*result, "ok"), uint64_t{kThreads} * kCallsPerThread) << *result;
    EXPECT_EQ(Field(*result, "failed"), 0u) << *result;
    EXPECT_EQ(Field(*result, "mismatch"), 0u) << *result;
    forward_ok += Field(*result, "ok").value_or(0);
    forward_bytes += Field(*result, "bytes").value_or(0);
  }
  EXPECT_EQ(forward_ok, kForwardCalls);
  auto rev = reverse->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(rev.has_value()) << "the caller on host-b printed no result\n" << reverse->Describe();
  EXPECT_TRUE(ExitedWith(reverse->WaitExit(Millis(30000)), 0)) << *rev;
  EXPECT_EQ(Field(*rev, "ok"), kReverseTotal) << *rev;
  EXPECT_EQ(Field(*rev, "mismatch"), 0u) << *rev;
  const uint64_t reverse_bytes = Field(*rev, "bytes").value_or(0);
  std::cerr << "forward: " << forward_ok << " calls, " << forward_bytes
            << " request bytes; reverse: " << *rev << "\n";

  // Each server handled exactly the calls made: none lost, none delivered twice.
  std::string count_b = ServerCount(server_b);
  EXPECT_EQ(Field(count_b, "calls"), kForwardCalls) << count_b;
  EXPECT_EQ(Field(count_b, "bytes"), forward_bytes) << count_b;
  std::string count_a = ServerCount(server_a);
  EXPECT_EQ(Field(count_a, "calls"), kReverseTotal) << count_a;

  // Notifications: OK once each is in the server's inbox, delivered once.
  auto app = Connect(a(), "notifier");
  ASSERT_NE(app, nullptr);
  for (int i = 0; i < kNotifies; ++i) {
    std::string note = "note " + std::to_string(i);
    Status st = app->Notify("host-b/echo", std::as_bytes(std::span(note.data(), note.size())));
    ASSERT_TRUE(st.ok()) << "notify " << i << ": " << st.ToString();
  }
  EXPECT_TRUE(
      PollUntil([&] { return Field(ServerCount(server_b), "notifies").value_or(0) >= kNotifies; },
                Millis(10000)));
  EXPECT_EQ(Field(ServerCount(server_b), "notifies"), uint64_t{kNotifies});

  // The daemons' view of the same traffic.
  auto la = LinkTo(a(), "host-b");
  auto lb = LinkTo(b(), "host-a");
  ASSERT_TRUE(la && lb);
  std::cerr << "host-a link: " << LinkSummary(*la) << "\nhost-b link: " << LinkSummary(*lb) << "\n";
  EXPECT_EQ(la->state(), "up");
  EXPECT_EQ(lb->state(), "up");
  EXPECT_EQ(la->transport(), transport());
  const v1::LinkCounters& ca = la->counters();
  const v1::LinkCounters& cb = lb->counters();
  EXPECT_GE(ca.calls_out(), kForwardCalls + kNotifies);
  EXPECT_GE(ca.calls_in(), kReverseTotal);
  EXPECT_GE(cb.calls_in(), kForwardCalls + kNotifies);
  EXPECT_GE(cb.calls_out(), kReverseTotal);
  EXPECT_GE(ca.bytes_sent(), forward_bytes + reverse_bytes);
  EXPECT_GE(ca.bytes_received(), forward_bytes + reverse_bytes);
  EXPECT_GE(cb.bytes_sent(), forward_bytes + reverse_bytes);
  EXPECT_GE(cb.bytes_received(), forward_bytes + reverse_bytes);
  EXPECT_GT(ca.messages_sent(), 0u);
  EXPECT_EQ(ca.messages_sent(), cb.messages_received()) << "a message was lost or duplicated";
  EXPECT_EQ(cb.messages_sent(), ca.messages_received()) << "a message was lost or duplicated";
  EXPECT_EQ(ca.ops_failed(), 0u);
  EXPECT_EQ(cb.ops_failed(), 0u);
  EXPECT_EQ(ca.downs(), 0u);
  EXPECT_EQ(cb.downs(), 0u);
  EXPECT_GT(ca.heartbeats_ok(), 0u);
  EXPECT_EQ(la->inflight(), 0u);
  EXPECT_EQ(lb->inflight(), 0u);
  EXPECT_TRUE(server_a->Alive() && server_b->Alive());
}

// What can go wrong with one remote call, each with its own code: no such
// service, the deadline (a stalled server), the serving app killed mid-call,
// and an error the server replies with. None of it harms the link.
TEST_P(LinkCalls, RemoteCallFailuresAreNamedAndBounded) {
  auto app = Connect(a(), "caller");
  auto server_b = Connect(b(), "server-b");
  ASSERT_TRUE(app && server_b);

  auto missing = app->Call("host-b/no-such-service", std::string_view("x"), Millis(3000));
  EXPECT_EQ(missing.status().code(), Code::kNotFound) << missing.status().ToString();

  ASSERT_TRUE(server_b
                  ->Serve("refuse",
                          [](ServerCall& c) {
                            (void)c.ReplyError(Status(Code::kPermissionDenied, "not for you"));
                          })
                  .ok());
  auto refused = app->Call("host-b/refuse", std::string_view("please"), Millis(5000));
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("not for you"), std::string::npos)
      << refused.status().ToString();

  // A server that stops answering after one call: the caller's deadline ends
  // the next call with TIMEOUT, on time.
  Child* slow = StartReady(b(), "serve", {"--service", "slow", "--stall-after", "1"});
  ASSERT_NE(slow, nullptr);
  auto first = app->Call("host-b/slow", std::string_view("first"), Millis(5000));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto t0 = std::chrono::steady_clock::now();
  auto late = app->Call("host-b/slow", std::string_view("second"), Millis(1000));
  auto elapsed = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(late.status().code(), Code::kTimeout) << late.status().ToString();
  EXPECT_GE(elapsed.count(), 900);
  EXPECT_LE(elapsed.count(), 2500) << "TIMEOUT came long after the deadline";
  ASSERT_TRUE(slow->WaitForPrefix("STALLED", Millis(5000))) << slow->Describe();
  ASSERT_TRUE(slow->WriteStdin("unstall\n"));
  ASSERT_TRUE(slow->WaitForPrefix("UNSTALLED", Millis(5000))) << slow->Describe();
  // Its late reply to the expired call is dropped; the next call is answered.
  auto third = app->Call("host-b/slow", std::string_view("third"), Millis(5000));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->view(), "third");

  // The serving app dies while it holds a call: PEER_GONE, long before the
  // deadline.
  Child* doomed = StartReady(b(), "serve", {"--service", "doomed", "--stall-after", "1"});
  ASSERT_NE(doomed, nullptr);
  ASSERT_TRUE(app->Call("host-b/doomed", std::string_view("one"), Millis(5000)).ok());
  auto pending = app->CallAsync("host-b/doomed", std::as_bytes(std::span(std::string_view("two"))),
                                Millis(20000));
  ASSERT_TRUE(doomed->WaitForPrefix("STALLED", Millis(5000))) << doomed->Describe();
  t0 = std::chrono::steady_clock::now();
  doomed->Kill();
  auto gone = pending.Wait();
  elapsed = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(gone.status().code(), Code::kPeerGone) << gone.status().ToString();
  EXPECT_LE(elapsed.count(), 5000)
      << "the call outlived its server by " << elapsed.count() << " ms";

  auto la = LinkTo(a(), "host-b");
  ASSERT_TRUE(la.has_value());
  std::cerr << "host-a link: " << LinkSummary(*la) << "\n";
  EXPECT_EQ(la->state(), "up");
  EXPECT_EQ(la->generation(), 1u) << "failed calls must not take the link down";
  EXPECT_GE(la->counters().ops_failed(), 3u) << LinkSummary(*la);
  EXPECT_EQ(la->inflight(), 0u) << LinkSummary(*la);
}

INSTANTIATE_TEST_SUITE_P(Hosts, LinkCalls, kHostVariants, HostVariantName);

}  // namespace
}  // namespace mcdma::itest
