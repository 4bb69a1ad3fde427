// The tcp transport against a hostile peer: a raw socket that completes the
// handshake and then sends malformed, unknown or random frames. The device
// takes the connection down and never writes outside its registrations.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_transport.hpp"
#include "driver/transport.hpp"
#include "platform/socket.hpp"
#include "tests/unit/tcp_test_device.hpp"
#include "tests/unit/transport_conformance.hpp"

namespace mcdma::driver::tcp {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A raw socket that completes the handshake with one endpoint of `device`,
// then speaks whatever the test wants.
struct RawPeer {
  int fd = -1;
  std::unique_ptr<Connection> conn;  // the device's side
  ~RawPeer() {
    if (fd >= 0) close(fd);
  }
};

std::unique_ptr<RawPeer> HandshakeRaw(Device& device) {
  auto peer = std::make_unique<RawPeer>();
  auto ep = device.CreateEndpoint();
  EXPECT_TRUE(ep.ok());
  if (!ep.ok()) return nullptr;
  auto info = ParseEndpointInfo((*ep)->LocalInfo());
  EXPECT_TRUE(info.ok());
  if (!info.ok()) return nullptr;
  peer->fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(info->port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(peer->fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // Our token is all zeros, lower than the endpoint's: we are the dialler.
  Token ours{};
  auto hello = EncodeHello(info->token, ours);
  EXPECT_EQ(platform::SendNoSignal(peer->fd, hello.data(), hello.size(), 0), ssize_t(hello.size()));
  auto conn =
      (*ep)->Connect(EncodeEndpointInfo({.address = "127.0.0.1", .port = 9, .token = ours}));
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  if (!conn.ok()) return nullptr;
  peer->conn = std::move(conn).value();
  std::array<std::byte, kHelloFrameBytes> answer{};
  EXPECT_EQ(recv(peer->fd, answer.data(), answer.size(), MSG_WAITALL), ssize_t(answer.size()));
  auto reply = DecodeHello(answer.data());
  EXPECT_TRUE(reply.ok() && reply->target == ours && reply->sender == info->token);
  return peer;
}

// Reads (and drops) whatever the device still sends until it closes the
// socket; false if it stays open for seconds.
bool DrainUntilClosed(int fd) {
  std::array<char, 4096> sink{};
  for (;;) {
    pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&pfd, 1, 5000) != 1) return false;
    if (recv(fd, sink.data(), sink.size(), 0) <= 0) return true;
  }
}

std::vector<std::byte> Frame(const FrameHeader& header, size_t payload = 0) {
  HeaderBytes bytes = EncodeHeader(header);
  std::vector<std::byte> out(bytes.begin(), bytes.end());
  out.resize(out.size() + payload, std::byte{0x42});
  return out;
}

TEST(TcpHostilePeer, MalformedFrameTakesConnectionDownNotProcess) {
  auto device = MakeDevice();
  ASSERT_NE(device, nullptr);
  std::vector<uint8_t> buf(4096, 0);
  auto region = conformance::Register(*device, buf, kAccessRemoteRead | kAccessRemoteWrite);

  std::map<std::string, std::vector<std::byte>> cases;
  cases["garbage"] = std::vector<std::byte>(100, std::byte{0xab});
  auto bad_magic = Frame({.type = FrameType::kHeartbeat});
  bad_magic[0] = std::byte{0};
  cases["bad magic"] = bad_magic;
  auto bad_type = Frame({.type = FrameType::kHeartbeat});
  bad_type[5] = std::byte{77};
  cases["unknown type"] = bad_type;
  auto bad_version = Frame({.type = FrameType::kHeartbeat});
  bad_version[4] = std::byte{2};
  cases["bad version"] = bad_version;
  cases["credit length 5"] = Frame({.type = FrameType::kCredit, .length = 5}, 5);
  cases["huge credit"] = Frame({.type = FrameType::kCredit, .length = 1u << 30});
  cases["send beyond its credit"] = Frame({.type = FrameType::kSend, .length = 65}, 65);
  cases["unsolicited write ack"] = Frame({.type = FrameType::kWriteAck, .wr_id = 1});
  cases["unsolicited read resp"] =
      Frame({.type = FrameType::kReadResp, .wr_id = 1, .length = 8}, 8);
  cases["hello again"] = Frame({.type = FrameType::kHello, .length = 32}, 32);
  cases["close with payload"] = Frame({.type = FrameType::kClose, .length = 1}, 1);

  for (const auto& [name, bytes] : cases) {
    SCOPED_TRACE(name);
    auto peer = HandshakeRaw(*device);
    ASSERT_NE(peer, nullptr);
    ASSERT_TRUE(peer->conn->PostRecv(1, {region.get(), 0, 64}).ok());
    // A valid one-sided WRITE first: the connection works before the garbage.
    auto write = Frame({.type = FrameType::kWrite,
                        .rkey = region->rkey(),
                        .wr_id = 7,
                        .remote_addr = 100,
                        .length = 4},
                       4);
    write.insert(write.end(), bytes.begin(), bytes.end());
    ASSERT_EQ(platform::SendNoSignal(peer->fd, write.data(), write.size(), 0),
              ssize_t(write.size()));
    WorkCompletion wc = conformance::WaitOne(*peer->conn);
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.code, Code::kLinkDown);
    EXPECT_NE(wc.detail.find("protocol violation"), std::string::npos) << wc.detail;
    EXPECT_EQ(peer->conn->PostRecv(2, {region.get(), 0, 64}).code(), Code::kLinkDown);
    EXPECT_EQ(buf[100], 0x42) << "the valid WRITE before the garbage landed";
    EXPECT_TRUE(DrainUntilClosed(peer->fd)) << "the device kept the socket open";
    buf[100] = 0;
  }
  // The device still serves new connections.
  auto other = MakeDevice();
  conformance::Link link = conformance::ConnectTogether(*device, *other);
  ASSERT_NE(link.a, nullptr);
}

TEST(TcpHostilePeer, WriteOfUnknownRkeyIsDrainedAndRefused) {
  auto device = MakeDevice();
  std::vector<uint8_t> buf(64, 0);
  auto region = conformance::Register(*device, buf, kAccessRemoteWrite);
  auto peer = HandshakeRaw(*device);
  ASSERT_NE(peer, nullptr);
  // 1 MiB for a key that does not exist, then one that does: the payload is
  // drained, not applied, and the stream stays in step.
  auto bad =
      Frame({.type = FrameType::kWrite, .rkey = region->rkey() ^ 1, .wr_id = 1, .length = 1 << 20},
            1 << 20);
  auto good =
      Frame({.type = FrameType::kWrite, .rkey = region->rkey(), .wr_id = 2, .length = 8}, 8);
  bad.insert(bad.end(), good.begin(), good.end());
  std::thread writer([&] { (void)platform::SendNoSignal(peer->fd, bad.data(), bad.size(), 0); });
  std::array<std::byte, 2 * kHeaderBytes> acks{};
  ASSERT_EQ(recv(peer->fd, acks.data(), acks.size(), MSG_WAITALL), ssize_t(acks.size()));
  writer.join();
  auto first = DecodeHeader(acks.data());
  auto second = DecodeHeader(acks.data() + kHeaderBytes);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->wr_id, 1u);
  EXPECT_EQ(first->status, Code::kPermissionDenied);
  EXPECT_EQ(second->wr_id, 2u);
  EXPECT_EQ(second->status, Code::kOk);
  EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.begin() + 8), std::vector<uint8_t>(8, 0x42));
}

TEST(TcpHostilePeer, RandomFramesNeverCrashOrWriteOutsideRegions) {
  // Well-formed-looking headers with random fields, some naming the real
  // rkey; the region sits between guard bytes that must never change.
  auto device = MakeDevice();
  std::vector<uint8_t> buf(size_t{3} * 4096, 0xcc);
  auto region = device->Register(conformance::Bytes(buf) + 4096, 4096,
                                 kAccessRemoteRead | kAccessRemoteWrite);
  ASSERT_TRUE(region.ok());
  std::mt19937 rng(12345);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  for (int round = 0; round < 200; ++round) {
    auto peer = HandshakeRaw(*device);
    ASSERT_NE(peer, nullptr);
    std::vector<std::byte> stream;
    for (int i = 0; i < 20; ++i) {
      FrameHeader h;
      h.type = static_cast<FrameType>(1 + pick(9));
      h.status = pick(4) == 0 ? static_cast<Code>(pick(16)) : Code::kOk;
      h.rkey = pick(2) == 0 ? (*region)->rkey() : static_cast<uint32_t>(rng());
      h.wr_id = pick(4);
      h.remote_addr = pick(3) == 0 ? rng() : pick(5000);
      h.length = pick(8) == 0 ? static_cast<uint32_t>(rng()) : pick(300);
      bool payload = h.type != FrameType::kReadReq && h.length <= 300;
      auto frame = Frame(h, payload ? h.length : 0);
      stream.insert(stream.end(), frame.begin(), frame.end());
    }
    (void)platform::SendNoSignal(peer->fd, stream.data(), stream.size(), 0);
    close(std::exchange(peer->fd, -1));
    auto deadline = steady_clock::now() + conformance::kWait;
    while (peer->conn->PostRecv(round, {region->get(), 0, 8}).code() != Code::kLinkDown &&
           steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    ASSERT_LT(steady_clock::now(), deadline) << "round " << round << ": the link stayed up";
  }
  region->reset();
  EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.begin() + 4096),
            std::vector<uint8_t>(4096, 0xcc));
  EXPECT_EQ(std::vector<uint8_t>(buf.end() - 4096, buf.end()), std::vector<uint8_t>(4096, 0xcc));
}

}  // namespace
}  // namespace mcdma::driver::tcp
