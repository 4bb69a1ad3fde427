// mcdmactl's JSON views of the daemon agree with what the clients just did.
#include <unistd.h>

#include <condition_variable>
#include <mutex>

#include "daemon_fixture.hpp"
#include "mcdma/client.hpp"
#include "pattern.hpp"

namespace mcdma::itest {
namespace {

class StatusJson : public DaemonTest {};

std::unique_ptr<Client> Connect(const std::string& socket, const std::string& name) {
  ClientOptions o;
  o.socket = socket;
  o.app_name = name;
  auto c = Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

TEST_F(StatusJson, StatusJsonReportsEverything) {
  REQUIRE_MCDMACTL();
  v1::StatusReply fresh;
  std::string raw;
  ASSERT_TRUE(CtlJson("status", &fresh, &raw));
  for (const char* key :
       {"\"version\"", "\"uptime_s\"", "\"sessions\"", "\"buffers\"", "\"exports\"", "\"ops\"",
        "\"invalid_descriptors\"", "\"ring_faults\"", "\"sessions_reaped\""}) {
    EXPECT_NE(raw.find(key), std::string::npos) << key << " missing from status --json:\n" << raw;
  }
  EXPECT_EQ(fresh.version(), MCDMA_VERSION_TEXT);
  EXPECT_EQ(fresh.pid(), static_cast<uint32_t>(daemon()->pid()));
  EXPECT_EQ(fresh.socket(), socket());
  EXPECT_EQ(fresh.state(), "serving");
  EXPECT_GE(fresh.uptime_s(), 0.0);
  EXPECT_EQ(fresh.sessions(), 0u);
  EXPECT_EQ(Op(fresh, "call").submitted(), 0u);

  // Two real sessions (in this process): a server and a client.
  auto server = Connect(socket(), "status-server");
  auto client = Connect(socket(), "status-client");
  ASSERT_TRUE(server && client);
  ASSERT_TRUE(server->Serve("echo", [](ServerCall& c) { (void)c.Reply(c.payload()); }).ok());
  ASSERT_TRUE(server
                  ->Serve("refuse",
                          [](ServerCall& c) {
                            (void)c.ReplyError(Status(Code::kPermissionDenied, "refused"));
                          })
                  .ok());
  std::atomic<int> notes{0};
  ASSERT_TRUE(server->Serve("notes", [&](ServerCall&) { ++notes; }).ok());

  uint64_t reply_bytes = 0;
  for (int i = 0; i < 5; ++i) {
    std::string req(100 * (i + 1), static_cast<char>('a' + i));
    auto r = client->Call("echo", req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(std::string(r->view()), req);
    reply_bytes += req.size();
  }
  auto refused = client->Call("refuse", "x");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied);
  for (int i = 0; i < 3; ++i) {
    std::string m = "note " + std::to_string(i);
    ASSERT_TRUE(client->Notify("notes", std::as_bytes(std::span(m.data(), m.size()))).ok());
  }

  constexpr uint64_t kBytes = 1 << 20;
  auto exported = server->Alloc(kBytes);
  ASSERT_TRUE(exported.ok());
  FillPattern(exported->data(), kBytes, 5);
  ExportOptions eo;
  eo.allow_write = true;
  ASSERT_TRUE(server->Export(*exported, "status-exp", eo).ok());
  auto remote = client->Resolve("status-exp");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  auto local = client->Alloc(kBytes);
  ASSERT_TRUE(local.ok());
  for (int i = 0; i < 2; ++i) {
    auto n = client->Read(*remote, 0, *local, 0, kBytes);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_TRUE(VerifyPattern(local->data(), kBytes, 5).ok);
  }
  auto w = client->Write(*remote, 0, *local, 0, kBytes);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(PollUntil([&] { return notes.load() == 3; }, Millis(10000)));

  v1::StatusReply st;
  ASSERT_TRUE(CtlJson("status", &st));
  EXPECT_EQ(st.sessions(), 2u);
  EXPECT_EQ(st.buffers(), 2u);
  EXPECT_EQ(st.buffer_bytes(), 2 * kBytes);
  EXPECT_EQ(st.exports(), 1u);
  EXPECT_EQ(st.services(), 3u);
  EXPECT_EQ(st.inflight(), 0u);
  EXPECT_GE(st.uptime_s(), fresh.uptime_s());
  v1::OpCounters call = Op(st, "call");
  EXPECT_EQ(call.submitted(), 6u);
  EXPECT_EQ(call.ok(), 5u);
  EXPECT_EQ(call.failed(), 1u);
  EXPECT_EQ(call.bytes(), reply_bytes);
  v1::OpCounters notify = Op(st, "notify");
  EXPECT_EQ(notify.submitted(), 3u);
  EXPECT_EQ(notify.ok(), 3u);
  v1::OpCounters read = Op(st, "read");
  EXPECT_EQ(read.submitted(), 2u);
  EXPECT_EQ(read.ok(), 2u);
  EXPECT_EQ(read.failed(), 0u);
  EXPECT_EQ(read.bytes(), 2 * kBytes);
  v1::OpCounters write = Op(st, "write");
  EXPECT_EQ(write.submitted(), 1u);
  EXPECT_EQ(write.ok(), 1u);
  EXPECT_EQ(write.bytes(), kBytes);
  EXPECT_EQ(st.invalid_descriptors(), 0u);
  EXPECT_EQ(st.ring_faults(), 0u);
  ASSERT_EQ(st.transports_size(), 1);
  EXPECT_EQ(st.transports(0).name(), "loop");

  v1::SessionsReply sessions;
  ASSERT_TRUE(CtlJson("sessions", &sessions));
  ASSERT_EQ(sessions.sessions_size(), 2);
  for (const auto& s : sessions.sessions()) {
    bool is_server = s.session_id() == server->info().session_id;
    EXPECT_EQ(s.app_name(), is_server ? "status-server" : "status-client");
    EXPECT_EQ(s.pid(), static_cast<uint32_t>(getpid()));
    EXPECT_EQ(s.uid(), static_cast<uint32_t>(geteuid()));
    EXPECT_EQ(s.buffers(), 1u);
    EXPECT_EQ(s.buffer_bytes(), kBytes);
    EXPECT_EQ(s.exports(), is_server ? 1u : 0u);
    EXPECT_EQ(s.services(), is_server ? 3u : 0u);
    EXPECT_EQ(s.remote_handles(), is_server ? 0u : 1u);
    EXPECT_EQ(s.inflight(), 0u);
    EXPECT_EQ(s.invalid_descriptors(), 0u);
    EXPECT_FALSE(s.mailbox_linked());
    if (!is_server) {
      EXPECT_EQ(s.session_id(), client->info().session_id);
      EXPECT_GE(s.submitted(), 12u);  // 6 calls + 3 notifications + 3 transfers
    }
  }

  v1::ExportsReply exports;
  ASSERT_TRUE(CtlJson("exports", &exports));
  ASSERT_EQ(exports.exports_size(), 1);
  const auto& e = exports.exports(0);
  EXPECT_EQ(e.name(), "status-exp");
  EXPECT_EQ(e.owner_session(), server->info().session_id);
  EXPECT_EQ(e.buffer_id(), exported->id());
  EXPECT_EQ(e.length(), kBytes);
  EXPECT_TRUE(e.allow_read());
  EXPECT_TRUE(e.allow_write());
  EXPECT_EQ(e.expires_in_ms(), -1);
  EXPECT_EQ(e.resolved_handles(), 1u);

  v1::BuffersReply buffers;
  ASSERT_TRUE(CtlJson("buffers", &buffers));
  ASSERT_EQ(buffers.buffers_size(), 2);
  for (const auto& b : buffers.buffers()) {
    EXPECT_EQ(b.size(), kBytes);
    EXPECT_FALSE(b.segment_linked());
    EXPECT_GE(b.registrations(), 1u);
    EXPECT_TRUE(b.owner_session() == server->info().session_id ||
                b.owner_session() == client->info().session_id);
  }

  // The text form works too.
  CommandResult text = Ctl({"status"});
  EXPECT_EQ(text.exit_code(), 0) << text.Describe();
  EXPECT_NE(text.out.find(MCDMA_VERSION_TEXT), std::string::npos) << text.out;

  // Closing the client reaps its session and what it held.
  *local = Buffer();
  client.reset();
  ASSERT_TRUE(PollUntil(
      [&] {
        v1::StatusReply s;
        return CtlJson("status", &s) && s.sessions() == 1u;
      },
      Millis(10000)));
  ASSERT_TRUE(CtlJson("status", &st));
  EXPECT_EQ(st.buffers(), 1u);
  EXPECT_EQ(st.sessions_reaped(), 1u);
  ASSERT_TRUE(CtlJson("exports", &exports));
  EXPECT_EQ(exports.exports(0).resolved_handles(), 0u);
}

TEST_F(StatusJson, MissingDaemonIsExitOne) {
  REQUIRE_MCDMACTL();
  CommandResult r =
      RunCommand({kCtlPath, "--socket", dir() + "/nobody.sock", "status", "--json"}, Millis(20000));
  EXPECT_EQ(r.exit_code(), 1) << r.Describe();
  EXPECT_NE(r.err.find("nobody.sock"), std::string::npos) << r.Describe();
}

// docs/operations.md: invalid_descriptors means "an app wrote something
// malformed into its mailbox". Apps that only use libmcdma correctly must
// never be counted there, even when their operations fail for runtime
// reasons: a reply that arrives after the caller's deadline, a read through a
// handle whose export was since unexported, a call through a cached service
// id whose server has since unserved.
TEST_F(StatusJson, WellBehavedAppsAreNotCountedAsInvalid) {
  REQUIRE_MCDMACTL();
  ClientOptions so;
  so.socket = socket();
  so.app_name = "slow-server";
  so.handler_threads = 1;
  auto server_r = Client::Connect(so);
  ASSERT_TRUE(server_r.ok()) << server_r.status().ToString();
  std::unique_ptr<Client> server = std::move(server_r).value();
  auto client = Connect(socket(), "caller");
  ASSERT_TRUE(client);

  // 1. A reply after the caller's deadline: the handler replies only once the
  //    caller has seen its call fail with TIMEOUT.
  std::mutex mu;
  std::condition_variable cv;
  bool caller_gave_up = false;
  std::atomic<bool> replied{false};
  ASSERT_TRUE(server
                  ->Serve("slow",
                          [&](ServerCall& c) {
                            std::unique_lock lock(mu);
                            cv.wait_for(lock, std::chrono::seconds(10),
                                        [&] { return caller_gave_up; });
                            (void)c.Reply(c.payload());
                            replied = true;
                          })
                  .ok());
  auto late = client->Call("slow", "late", std::chrono::milliseconds(200));
  ASSERT_EQ(late.status().code(), Code::kTimeout) << late.status().ToString();
  {
    std::lock_guard lock(mu);
    caller_gave_up = true;
  }
  cv.notify_all();
  ASSERT_TRUE(PollUntil([&] { return replied.load(); }, Millis(10000)));

  // 2. A read through a handle whose export was unexported meanwhile.
  auto buf = server->Alloc(4096);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(server->Export(*buf, "short").ok());
  auto remote = client->Resolve("short");
  ASSERT_TRUE(remote.ok());
  auto local = client->Alloc(4096);
  ASSERT_TRUE(local.ok());
  ASSERT_TRUE(server->Unexport("short").ok());
  EXPECT_EQ(client->Read(*remote, 0, *local, 0, 4096).status().code(), Code::kRevoked);

  // 3. A call through a cached service id after the server unserved it.
  auto id = server->Serve("brief", [](ServerCall& c) { (void)c.Reply(c.payload()); });
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(client->Call("brief", "hello").ok());
  ASSERT_TRUE(server->Unserve(*id).ok());
  EXPECT_EQ(client->Call("brief", "hello again").status().code(), Code::kNotFound);

  // Let the late reply's rejection (if any) be processed: a round trip
  // through the same server after it.
  ASSERT_TRUE(server->Serve("echo", [](ServerCall& c) { (void)c.Reply(c.payload()); }).ok());
  ASSERT_TRUE(client->Call("echo", "sync").ok());
  v1::StatusReply st;
  ASSERT_TRUE(CtlJson("status", &st));
  EXPECT_EQ(st.invalid_descriptors(), 0u)
      << "well-formed submissions from libmcdma were counted as invalid descriptors";
  v1::SessionsReply sessions;
  ASSERT_TRUE(CtlJson("sessions", &sessions));
  for (const auto& s : sessions.sessions()) {
    EXPECT_EQ(s.invalid_descriptors(), 0u)
        << "session " << s.session_id() << " (" << s.app_name() << ")";
  }
}

}  // namespace
}  // namespace mcdma::itest
