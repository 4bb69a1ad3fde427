// Local calls and notifications between two real clients of an in-process
// daemon: every byte, handler errors and missing services.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "inproc_daemon.hpp"
#include "pattern.hpp"

namespace mcdma::itest {
namespace {

class InprocCalls : public InprocDaemonTest {
 protected:
  // Serves "reverse": the reply is the request's bytes in reverse order.
  Client* ServeReverse() {
    Client* server = Connect("server");
    if (server == nullptr) return nullptr;
    auto served = server->Serve("reverse", [](ServerCall& call) {
      std::vector<std::byte> reply(call.payload().rbegin(), call.payload().rend());
      (void)call.Reply(reply);
    });
    EXPECT_TRUE(served.ok()) << served.status().ToString();
    return served.ok() ? server : nullptr;
  }
};

TEST_F(InprocCalls, LocalCallRoundTripsEveryByte) {
  ASSERT_NE(ServeReverse(), nullptr);
  Client* caller = Connect("caller");
  ASSERT_NE(caller, nullptr);
  const std::vector<uint64_t> sizes = {0, 1, 7, 4096, 65536, 1 << 20};
  for (uint64_t size : sizes) {
    std::vector<std::byte> request(size);
    FillPattern(request.data(), size, 40 + size);
    auto reply = caller->Call("reverse", std::span<const std::byte>(request));
    ASSERT_TRUE(reply.ok()) << size << " bytes: " << reply.status().ToString();
    ASSERT_EQ(reply->size(), size);
    EXPECT_TRUE(std::equal(request.rbegin(), request.rend(), reply->data())) << size << " bytes";
  }
  auto status = AdminStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(Op(*status, "call").ok(), sizes.size());
  EXPECT_EQ(Op(*status, "call").failed(), 0u);
  EXPECT_EQ(Op(*status, "reply").ok(), sizes.size());
  EXPECT_EQ(status->inflight(), 0u);
  EXPECT_EQ(status->services(), 1u);
}

TEST_F(InprocCalls, HandlerErrorsAndMissingServicesReachTheCaller) {
  Client* server = Connect("server");
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server
                  ->Serve("strict",
                          [](ServerCall& call) {
                            (void)call.ReplyError(Status(Code::kPermissionDenied, "not for you"));
                          })
                  .ok());
  Client* caller = Connect("caller");
  ASSERT_NE(caller, nullptr);
  auto refused = caller->Call("strict", std::string_view("hello"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("not for you"), std::string::npos)
      << refused.status().ToString();
  auto missing = caller->Call("nobody", std::string_view("hello"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("nobody"), std::string::npos)
      << missing.status().ToString();
}

// A cached service id whose server went away: the completion says so with
// a reason (the text is for people), and Call looks the name up again.
TEST_F(InprocCalls, AStaleServiceIdCompletesWithItsReason) {
  Client* server = Connect("server");
  ASSERT_NE(server, nullptr);
  auto id = server->Serve("fleeting", [](ServerCall& call) { (void)call.Reply(call.payload()); });
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  Client* caller = Connect("caller");
  ASSERT_NE(caller, nullptr);
  ASSERT_TRUE(caller->Call("fleeting", std::string_view("once")).ok());  // caches the id
  ASSERT_TRUE(server->Unserve(*id).ok());
  const std::string text = "twice";
  auto stale =
      caller
          ->CallAsync("fleeting", std::span<const std::byte>(
                                      reinterpret_cast<const std::byte*>(text.data()), text.size()))
          .Wait();
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), Code::kNotFound) << stale.status().ToString();
  EXPECT_EQ(stale.status().reason(), Reason::kNoSuchService) << stale.status().ToString();
  // Served again under a new id: Call retries the lookup once and gets through.
  ASSERT_TRUE(
      server->Serve("fleeting", [](ServerCall& call) { (void)call.Reply(call.payload()); }).ok());
  auto again = caller->Call("fleeting", std::string_view("thrice"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(again->data()), again->size()),
            "thrice");
  // A peer this daemon has no link to: NOT_FOUND with NOT_LINKED, over gRPC.
  auto remote = caller->Resolve("x", "no-such-host");
  ASSERT_FALSE(remote.ok());
  EXPECT_EQ(remote.status().code(), Code::kNotFound) << remote.status().ToString();
  EXPECT_EQ(remote.status().reason(), Reason::kNotLinked) << remote.status().ToString();
}

TEST_F(InprocCalls, NotificationsArriveInOrder) {
  std::mutex mu;
  std::condition_variable arrived;
  std::vector<std::string> got;
  Client* server = Connect("server");
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server
                  ->Serve("inbox",
                          [&](ServerCall& call) {
                            EXPECT_TRUE(call.one_way());
                            std::lock_guard lock(mu);
                            got.emplace_back(call.view());
                            arrived.notify_all();
                          })
                  .ok());
  Client* sender = Connect("sender");
  ASSERT_NE(sender, nullptr);
  constexpr int kCount = 50;
  for (int i = 0; i < kCount; ++i) {
    std::string text = "note " + std::to_string(i);
    Status st = sender->Notify(
        "inbox",
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()), text.size()));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::unique_lock lock(mu);
  ASSERT_TRUE(
      arrived.wait_for(lock, std::chrono::seconds(10), [&] { return got.size() == kCount; }))
      << got.size() << " of " << kCount << " arrived";
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(got[i], "note " + std::to_string(i));
}

}  // namespace
}  // namespace mcdma::itest
