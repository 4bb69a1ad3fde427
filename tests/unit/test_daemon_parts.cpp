// Parts the Daemon owns, on their own: the control socket's file
// (socket_path.hpp) and the service manager's watchdog (watchdog.hpp).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "peer/peer_channel.hpp"
#include "rpc/rpc_status.hpp"
#include "socket_path.hpp"
#include "watchdog.hpp"

namespace mcdma::daemon {
namespace {

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/daemon_parts_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

// A bound Unix socket of `type` at `path`; -1 on failure. Caller closes it.
int BindUnix(const std::string& path, int type) {
  int fd = ::socket(AF_UNIX, type, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(SocketPath, MakesThePrivateDirectoryAndRemovesTheSocketWhenDestroyed) {
  std::string dir = FreshDir("make");
  std::string path = dir + "/sub/rpcd.sock";
  {
    auto prepared = SocketPath::Prepare(path, "");
    ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
    EXPECT_EQ(prepared->path(), path);
    struct stat st {};
    ASSERT_EQ(stat((dir + "/sub").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, geteuid() == 0 ? 0750u : 0700u);
    // What the gRPC server would bind, then the mode from the directory.
    int fd = BindUnix(path, SOCK_STREAM);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    close(fd);
    EXPECT_TRUE(prepared->SetModeFromDirectory().ok());
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, geteuid() == 0 ? 0660u : 0600u);
    SocketPath moved = std::move(prepared).value();
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "the socket file outlived its SocketPath";
  std::filesystem::remove_all(dir);
}

TEST(SocketPath, SocketTakesTheGroupOfAGroupDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the directory another group";
  constexpr gid_t kGroup = 64740;  // need not exist in /etc/group
  std::string dir = FreshDir("group");
  std::filesystem::create_directories(dir);
  ASSERT_EQ(chown(dir.c_str(), static_cast<uid_t>(-1), kGroup), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0750), 0);
  std::string path = dir + "/rpcd.sock";
  auto prepared = SocketPath::Prepare(path, "");
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  int fd = BindUnix(path, SOCK_STREAM);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  close(fd);
  // Before: root's group, which the directory's members are not in.
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_NE(st.st_gid, kGroup);
  Status set = prepared->SetModeFromDirectory();
  EXPECT_TRUE(set.ok()) << set.ToString();
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, kGroup);
  std::filesystem::remove_all(dir);
}

TEST(SocketPath, ReplacesAStaleSocketButNotALiveOne) {
  std::string dir = FreshDir("stale");
  std::filesystem::create_directories(dir);
  std::string path = dir + "/rpcd.sock";
  int stale = BindUnix(path, SOCK_STREAM);
  ASSERT_GE(stale, 0) << std::strerror(errno);
  close(stale);  // the file stays, nobody listens: a crashed daemon's
  {
    auto prepared = SocketPath::Prepare(path, "");
    ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
    EXPECT_FALSE(std::filesystem::exists(path)) << "the stale socket file is still there";
  }
  int live = BindUnix(path, SOCK_STREAM);
  ASSERT_GE(live, 0) << std::strerror(errno);
  ASSERT_EQ(listen(live, 4), 0);
  auto refused = SocketPath::Prepare(path, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kAlreadyExists);
  EXPECT_NE(refused.status().message().find(path), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(path)) << "a refused Prepare removed a live socket";
  close(live);
  std::filesystem::remove_all(dir);
}

TEST(SocketPath, RefusesAPathLongerThanMacOsAllows) {
  auto r = SocketPath::Prepare(::testing::TempDir() + "/" + std::string(120, 's'), "");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("103"), std::string::npos) << r.status().ToString();
}

// The service manager's side: a datagram socket named by NOTIFY_SOCKET.
class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDir("watchdog");
    std::filesystem::create_directories(dir_);
    std::string path = dir_ + "/notify";
    fd_ = BindUnix(path, SOCK_DGRAM);
    ASSERT_GE(fd_, 0) << std::strerror(errno);
    setenv("NOTIFY_SOCKET", path.c_str(), 1);
    unsetenv("WATCHDOG_PID");
  }
  void TearDown() override {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    if (fd_ >= 0) close(fd_);
    std::filesystem::remove_all(dir_);
  }
  // The next datagram within `timeout`; "" if none came.
  std::string Receive(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return "";
    char buf[256];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

  std::string dir_;
  int fd_ = -1;
};

TEST_F(WatchdogTest, PingsWhileTheEngineMovesAndNotWhenItIsStuck) {
  setenv("WATCHDOG_USEC", "40000", 1);  // a ping every 20 ms
  std::atomic<uint64_t> rounds{0};
  {
    Watchdog moving([&] { return rounds.fetch_add(1) + 1; });
    EXPECT_EQ(Receive(std::chrono::milliseconds(2000)), "WATCHDOG=1");
  }
  while (!Receive(std::chrono::milliseconds(0)).empty()) {
  }
  {
    Watchdog stuck([] { return uint64_t{7}; });
    EXPECT_EQ(Receive(std::chrono::milliseconds(200)), "") << "a stuck engine earned a ping";
  }
}

TEST_F(WatchdogTest, StopsAtOnceAndRunsNoThreadWithoutAWatchdog) {
  setenv("WATCHDOG_USEC", "20000000", 1);  // would sleep 10 s between looks
  auto t0 = std::chrono::steady_clock::now();
  {
    Watchdog w([] { return uint64_t{0}; });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  unsetenv("WATCHDOG_USEC");
  std::atomic<int> looks{0};
  {
    Watchdog off([&] { return static_cast<uint64_t>(++looks); });
  }
  EXPECT_EQ(looks.load(), 0) << "no watchdog asked for, yet the engine was looked at";
}

// A peer's refusal reaches apps as a named code: a full authentication
// gate is BUSY (retry later), never INTERNAL.
TEST(FromPeerGrpc, NamesEachRefusal) {
  auto code = [](grpc::StatusCode c) {
    return FromPeerGrpc(grpc::Status(c, "why"), "host-a").code();
  };
  EXPECT_EQ(code(grpc::StatusCode::RESOURCE_EXHAUSTED), Code::kBusy);
  EXPECT_EQ(code(grpc::StatusCode::UNAUTHENTICATED), Code::kPermissionDenied);
  EXPECT_EQ(code(grpc::StatusCode::UNAVAILABLE), Code::kLinkDown);
  EXPECT_EQ(code(grpc::StatusCode::FAILED_PRECONDITION), Code::kLinkDown);
  // Without mcdma details a failure came from gRPC on the way: the path
  // to the peer failed, never an INTERNAL of ours.
  for (grpc::StatusCode c : {grpc::StatusCode::UNKNOWN, grpc::StatusCode::INTERNAL,
                             grpc::StatusCode::ABORTED, grpc::StatusCode::DATA_LOSS,
                             grpc::StatusCode::UNIMPLEMENTED, grpc::StatusCode::OUT_OF_RANGE,
                             grpc::StatusCode::NOT_FOUND, grpc::StatusCode::ALREADY_EXISTS}) {
    EXPECT_EQ(code(c), Code::kLinkDown) << rpc::GrpcCodeName(c);
  }
  EXPECT_NE(FromPeerGrpc(grpc::Status(grpc::StatusCode::UNKNOWN, "Stream removed"), "host-a")
                .message()
                .find("UNKNOWN"),
            std::string::npos);
  Status busy =
      FromPeerGrpc(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "gate full"), "host-a");
  EXPECT_NE(busy.message().find("host-a"), std::string::npos) << busy.ToString();
  EXPECT_TRUE(FromPeerGrpc(grpc::Status::OK, "host-a").ok());
}

// A Peer server whose calls fail the way gRPC itself fails them when the
// stream is torn down under load: UNKNOWN "Stream removed", no mcdma
// details. A fresh channel's first lookup (an app's first call to a peer's
// service, on the host that did not dial the link) authenticates first,
// so this is what such an app saw as INTERNAL.
class TornStreamPeer final : public v1::Peer::Service {
 public:
  grpc::Status Authenticate(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::AuthResponse, v1::AuthRequest>* stream) override {
    v1::AuthRequest hello;
    (void)stream->Read(&hello);
    return grpc::Status(grpc::StatusCode::UNKNOWN, "Stream removed");
  }
};

TEST(PeerChannel, AStreamTornDownInGrpcIsALinkFailureNotInternal) {
  TornStreamPeer service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(port, 0);
  auto key = FabricKey::Generate();
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  PeerChannel channel("127.0.0.1:" + std::to_string(port), "host-a", "host-b",
                      std::make_shared<const FabricKey>(std::move(key).value()),
                      grpc::InsecureChannelCredentials());
  v1::PeerLookupServiceRequest req;
  req.set_service("echo");
  auto r = channel.LookupService(req, std::chrono::milliseconds(5000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kLinkDown) << r.status().ToString();
  EXPECT_NE(r.status().message().find("UNKNOWN"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("host-a"), std::string::npos) << r.status().ToString();
  server->Shutdown();
}

}  // namespace
}  // namespace mcdma::daemon
