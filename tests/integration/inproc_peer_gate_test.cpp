// A client without the fabric key against the in-process daemon's peer
// port: it may start authenticating, but only a few exchanges at once from
// its address, each stage ends at its deadline, and a later exchange is
// served again; connections over the per-address cap are closed at once.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "inproc_daemon.hpp"
#include "mcdma/v1/peer.grpc.pb.h"
#include "mcdma_auth/fabric_key.hpp"

namespace mcdma::itest {
namespace {

using std::chrono::milliseconds;
using AuthStream = grpc::ClientReaderWriter<v1::AuthRequest, v1::AuthResponse>;

class InprocPeerGate : public InprocDaemonTest {
 protected:
  void Configure(daemon::Options& o) const override {
    o.fabric_key = dir() + "/fabric.key";
    EXPECT_TRUE(WriteNewFabricKey(o.fabric_key, false).ok());
    o.listen = "127.0.0.1:0";
    o.data_listen = "127.0.0.1:0";
    o.auth_per_address = 3;
    o.auth_timeout_ms = 400;
    o.peer_max_connections_per_address = 8;
  }

  // One stream on its own channel (its own connection): hello sent, proof
  // never. The challenge comes back when the exchange was admitted.
  struct Stalled {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::Peer::Stub> stub;
    grpc::ClientContext ctx;
    std::unique_ptr<AuthStream> stream;
    bool challenged = false;
  };
  std::unique_ptr<Stalled> StallOne() {
    auto s = std::make_unique<Stalled>();
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // no connection sharing
    s->channel = grpc::CreateCustomChannel(daemon()->peer_address(),
                                           grpc::InsecureChannelCredentials(), args);
    s->stub = v1::Peer::NewStub(s->channel);
    s->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    s->stream = s->stub->Authenticate(&s->ctx);
    v1::AuthRequest hello;
    hello.mutable_hello()->set_version(1);
    hello.mutable_hello()->set_host_id("keyless");
    hello.mutable_hello()->set_nonce(std::string(32, 'n'));
    s->stream->Write(hello);
    v1::AuthResponse resp;
    s->challenged = s->stream->Read(&resp) && resp.has_challenge();
    return s;
  }
};

TEST_F(InprocPeerGate, AKeylessClientHoldsFewExchangesAndEachEndsAtItsDeadline) {
  std::vector<std::unique_ptr<Stalled>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(StallOne());
    EXPECT_TRUE(held.back()->challenged) << i;
  }
  // A fourth from the same address is refused at once, not queued.
  auto refused = StallOne();
  EXPECT_FALSE(refused->challenged);
  grpc::Status st = refused->stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  // The stalled ones end at the stage deadline (400 ms), not never.
  for (auto& s : held) {
    v1::AuthResponse resp;
    EXPECT_FALSE(s->stream->Read(&resp));
    grpc::Status end = s->stream->Finish();
    EXPECT_NE(end.error_code(), grpc::StatusCode::OK);
    EXPECT_NE(end.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << "ended by the client's 20 s deadline, not the daemon's";
  }
  // Then the address may authenticate again.
  auto again = StallOne();
  EXPECT_TRUE(again->challenged);
  auto status = AdminStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_GE(status->budgets().auth_refused(), 1u);
  EXPECT_GE(status->budgets().auth_timed_out(), 3u);
}

TEST_F(InprocPeerGate, ConnectionsOverThePerAddressCapAreClosedAtOnce) {
  auto hp = daemon()->peer_address();
  auto colon = hp.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(hp.substr(colon + 1))));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    fds.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(300));
  int closed = 0;
  for (int fd : fds) {
    timeval tv{0, 100'000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[64];
    if (recv(fd, buf, sizeof(buf), 0) == 0) ++closed;
  }
  EXPECT_GE(closed, 12) << "8 per address may stay";
  for (int fd : fds) close(fd);
  auto status = AdminStatus();
  ASSERT_TRUE(status.ok());
  bool found = false;
  for (const auto& l : status->budgets().listeners()) {
    if (l.name() != "peer") continue;
    found = true;
    EXPECT_EQ(l.max_per_source(), 8u);
    EXPECT_GE(l.refused_per_source(), 12u);
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace mcdma::itest
