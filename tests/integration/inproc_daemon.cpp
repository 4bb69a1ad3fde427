#include "inproc_daemon.hpp"

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <filesystem>

#include "daemon_fixture.hpp"
#include "mcdma/v1/admin.grpc.pb.h"

namespace mcdma::itest {

void InprocDaemonTest::SetUp() {
  ASSERT_TRUE(dir_.ok()) << "mkdtemp failed: " << std::strerror(errno);
  socket_ = dir_.path() + "/rpcd.sock";
  daemon::Options options;
  options.socket = socket_;
  options.host_id = kHostId;
  options.log_level = "warn";
  Configure(options);
  Status valid = daemon::Validate(options);
  ASSERT_TRUE(valid.ok()) << valid.ToString();
  auto started = daemon::Daemon::Start(options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  daemon_ = std::move(started).value();
}

void InprocDaemonTest::StopDaemon() {
  if (!daemon_) return;
  daemon_->Drain("the test stops the daemon");
  daemon_.reset();
}

void InprocDaemonTest::TearDown() {
  // This daemon's segments, by name (other processes may make and remove
  // their own in /dev/shm meanwhile).
  std::set<std::string> ours;
  if (daemon_) {
    auto channel = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
    auto admin = v1::Admin::NewStub(channel);
    grpc::ClientContext sessions_context;
    sessions_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::SessionsReply sessions;
    if (admin->Sessions(&sessions_context, v1::SessionsRequest(), &sessions).ok()) {
      for (const auto& s : sessions.sessions()) ours.insert(s.mailbox_segment());
    }
    grpc::ClientContext buffers_context;
    buffers_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::BuffersReply buffers;
    if (admin->Buffers(&buffers_context, v1::BuffersRequest(), &buffers).ok()) {
      for (const auto& b : buffers.buffers()) ours.insert(b.segment());
    }
  }
  clients_.clear();
  StopDaemon();
  EXPECT_FALSE(std::filesystem::exists(socket_)) << "the daemon left its socket behind";
  // Every session's mailbox and every buffer segment is unlinked by now.
  const std::set<std::string> now = ListShm();
  for (std::string name : ours) {
    if (!name.empty() && name[0] == '/') name.erase(0, 1);
    if (now.count(name) != 0) ADD_FAILURE() << "left in /dev/shm: " << name;
  }
}

Client* InprocDaemonTest::Connect(const std::string& app_name) {
  ClientOptions o;
  o.socket = socket_;
  o.app_name = app_name;
  auto c = Client::Connect(o);
  if (!c.ok()) {
    ADD_FAILURE() << "Connect: " << c.status().ToString();
    return nullptr;
  }
  clients_.push_back(std::move(c).value());
  return clients_.back().get();
}

Result<v1::StatusReply> InprocDaemonTest::AdminStatus() {
  auto channel = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
  auto admin = v1::Admin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::StatusReply reply;
  grpc::Status st = admin->Status(&context, v1::StatusRequest(), &reply);
  if (!st.ok()) return Status(Code::kUnavailable, "Admin.Status: " + st.error_message());
  return reply;
}

v1::OpCounters InprocDaemonTest::Op(const v1::StatusReply& status, const std::string& op) {
  for (const auto& c : status.ops()) {
    if (c.op() == op) return c;
  }
  ADD_FAILURE() << "status has no counters for op '" << op << "'";
  return {};
}

}  // namespace mcdma::itest
