// The tcp transport's own behaviour: two devices in one process over
// 127.0.0.1. Its default caps, ports and tokens, credits, completion order,
// teardown of sockets and devices, bulk throughput, the notifier. What every
// transport must do is the conformance suite (transport_conformance.hpp),
// instantiated here for tcp; hostile peers are test_tcp_hostile_peer.cpp.
// Work completes on the devices' I/O threads, so every wait polls with a
// bound (sleeping between polls) and fails loudly when it runs out.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
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

using conformance::Bytes;
using conformance::ExpectQuiet;
using conformance::kMiB;
using conformance::kWait;
using conformance::Link;
using conformance::Pattern;
using conformance::Register;
using conformance::TransportConformance;
using conformance::WaitFor;
using conformance::WaitOne;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class TcpFactory final : public conformance::TransportFactory {
 public:
  std::string Name() const override { return "tcp"; }
  Caps DefaultCaps() const override { return DefaultTcpCaps(); }
  Result<std::unique_ptr<Device>> MakeDevice(const Caps* caps) override {
    return CreateTcpDevice(LocalOptions(caps));
  }
  bool OneDevice() const override { return false; }
  Link Connect(Device& a, Device& b) override { return conformance::ConnectTogether(a, b); }
};

INSTANTIATE_TEST_SUITE_P(Tcp, TransportConformance,
                         ::testing::Values(std::make_shared<TcpFactory>()),
                         conformance::FactoryName);

Link Connect(Device& a, Device& b) { return conformance::ConnectTogether(a, b); }

using TcpTransport = conformance::LinkedRig<TcpFactory>;

TEST(TcpCaps, DefaultsDescribeTheTcpTransport) {
  auto device = MakeDevice();
  ASSERT_NE(device, nullptr);
  const Caps& caps = device->caps();
  EXPECT_EQ(caps.name, "tcp");
  EXPECT_EQ(caps.profile, "tcp");
  EXPECT_TRUE(caps.one_sided);
  EXPECT_EQ(caps.max_outstanding, 256u);
  EXPECT_EQ(caps.max_outstanding_reads, 64u);
  EXPECT_EQ(caps.max_read_bytes, 64 * kMiB);
  EXPECT_EQ(caps.max_transfer_bytes, 64 * kMiB);
  EXPECT_EQ(caps.max_registration_bytes, 1ULL << 40);
  EXPECT_EQ(caps.max_registrations, 0u);
  EXPECT_EQ(caps.max_inline_bytes, 0u);
}

TEST(TcpCaps, CreateRejectsCapsNoWorkCouldPassAndForcedNameIsTcp) {
  Caps caps = DefaultTcpCaps();
  caps.max_outstanding = 0;
  EXPECT_EQ(CreateTcpDevice(LocalOptions(&caps)).status().code(), Code::kInvalid);
  caps = DefaultTcpCaps();
  caps.profile.clear();
  EXPECT_EQ(CreateTcpDevice(LocalOptions(&caps)).status().code(), Code::kInvalid);
  caps = DefaultTcpCaps();
  caps.name = "verbs";
  caps.profile = "mcdma-cx5";
  auto device = MakeDevice(&caps);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->caps().name, "tcp") << "the transport is reported, not the forced name";
  EXPECT_EQ(device->caps().profile, "mcdma-cx5");
}

TEST(TcpDevice, ReportsBoundPortAndAdvertisesIt) {
  TcpOptions options;  // 0.0.0.0, ephemeral port
  auto device = MakeDevice(options);
  ASSERT_NE(device, nullptr);
  auto* tcp = dynamic_cast<TcpDevice*>(device.get());
  ASSERT_NE(tcp, nullptr);
  EXPECT_NE(tcp->port(), 0);
  EXPECT_EQ(tcp->advertise_address(), "127.0.0.1");
  auto ep = device->CreateEndpoint();
  ASSERT_TRUE(ep.ok());
  auto info = ParseEndpointInfo((*ep)->LocalInfo());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->address, "127.0.0.1");
  EXPECT_EQ(info->port, tcp->port());
  auto other = device->CreateEndpoint();
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->LocalInfo(), (*ep)->LocalInfo()) << "each endpoint has its own token";
}

TEST(TcpDevice, TakenPortFailsCreate) {
  auto first = MakeDevice();
  ASSERT_NE(first, nullptr);
  TcpOptions options = LocalOptions();
  options.listen_port = dynamic_cast<TcpDevice&>(*first).port();
  EXPECT_EQ(CreateTcpDevice(options).status().code(), Code::kSystem);
}

TEST(TcpConnect, MalformedAndSelfInfoAreInvalidAndConsumeTheEndpoint) {
  auto device = MakeDevice();
  auto ep = device->CreateEndpoint();
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ((*ep)->Connect("loop/abc/1").status().code(), Code::kInvalid);
  EXPECT_EQ((*ep)->Connect((*ep)->LocalInfo()).status().code(), Code::kInvalid)
      << "an endpoint is consumed by its first Connect";
  auto self = device->CreateEndpoint();
  ASSERT_TRUE(self.ok());
  EXPECT_EQ((*self)->Connect((*self)->LocalInfo()).status().code(), Code::kInvalid);
}

TEST(TcpConnect, PeerThatNeverDialsTimesOut) {
  TcpOptions options = LocalOptions();
  options.connect_timeout = milliseconds(200);
  auto device = MakeDevice(options);
  auto ep = device->CreateEndpoint();
  ASSERT_TRUE(ep.ok());
  // The all-zero token is lower than ours: the named peer would dial us.
  std::string info = EncodeEndpointInfo({.address = "127.0.0.1", .port = 9, .token = Token{}});
  auto started = steady_clock::now();
  EXPECT_EQ((*ep)->Connect(info).status().code(), Code::kTimeout);
  EXPECT_LT(steady_clock::now() - started, std::chrono::seconds(3));
}

TEST(TcpConnect, WrongTokenIsRefused) {
  auto device = MakeDevice();
  ASSERT_NE(device, nullptr);
  const uint16_t port = dynamic_cast<TcpDevice&>(*device).port();

  // A dial presenting a token no endpoint has: the device closes the socket.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  Token bogus{};
  bogus.fill(0x5a);
  auto hello = EncodeHello(bogus, Token{});
  ASSERT_EQ(platform::SendNoSignal(fd, hello.data(), hello.size(), 0), ssize_t(hello.size()));
  pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "the device kept a socket with a wrong token open";
  char byte = 0;
  EXPECT_LE(recv(fd, &byte, 1, 0), 0) << "closed without an answer";
  close(fd);

  // Our Connect dials (our token is lower than all-ones) and is refused.
  auto ep = device->CreateEndpoint();
  ASSERT_TRUE(ep.ok());
  Token high{};
  high.fill(0xff);
  std::string info = EncodeEndpointInfo({.address = "127.0.0.1", .port = port, .token = high});
  EXPECT_EQ((*ep)->Connect(info).status().code(), Code::kLinkDown);

  // The acceptor refuses a dialler that is not the endpoint its Connect names.
  auto acceptor = device->CreateEndpoint();
  ASSERT_TRUE(acceptor.ok());
  auto acceptor_info = ParseEndpointInfo((*acceptor)->LocalInfo());
  ASSERT_TRUE(acceptor_info.ok());
  fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  Token impostor{};
  impostor[15] = 1;
  hello = EncodeHello(acceptor_info->token, impostor);
  ASSERT_EQ(platform::SendNoSignal(fd, hello.data(), hello.size(), 0), ssize_t(hello.size()));
  std::string expected = EncodeEndpointInfo({.address = "127.0.0.1", .port = 9, .token = Token{}});
  EXPECT_EQ((*acceptor)->Connect(expected).status().code(), Code::kPermissionDenied);
  close(fd);
}

TEST_F(TcpTransport, RegionDestroyedWhileQueuedIsNotTouched) {
  // Against the contract, but a NIC reports a protection error rather than
  // write freed memory; so does tcp. The SEND waits for a credit, so its
  // source is gone when it is issued.
  std::vector<uint8_t> src = Pattern(32, 2);
  std::vector<uint8_t> inbox(32, 0);
  auto src_region = Register(*rig_.a_dev, src, kAccessLocal);
  auto inbox_region = Register(*rig_.b_dev, inbox, kAccessLocal);
  ASSERT_TRUE(rig_.link.a->PostSend(1, {src_region.get(), 0, 32}).ok());
  ExpectQuiet(*rig_.link.a, milliseconds(20));
  src_region.reset();
  ASSERT_TRUE(rig_.link.b->PostRecv(2, {inbox_region.get(), 0, 32}).ok());
  EXPECT_EQ(WaitOne(*rig_.link.a).code, Code::kPermissionDenied);
  EXPECT_EQ(WaitOne(*rig_.link.b).code, Code::kPermissionDenied);
  EXPECT_EQ(inbox, std::vector<uint8_t>(32, 0));
}

TEST_F(TcpTransport, CompletionsArriveInPostOrder) {
  // A SEND completes when written, a WRITE only on its ACK: the SEND's
  // completion still waits for the WRITE posted before it.
  std::vector<uint8_t> buf = Pattern(4 * kMiB, 3);
  std::vector<uint8_t> remote(4 * kMiB, 0);
  std::vector<uint8_t> inbox(64, 0);
  auto region = Register(*rig_.a_dev, buf, kAccessLocal);
  auto remote_region = Register(*rig_.b_dev, remote, kAccessRemoteWrite);
  auto inbox_region = Register(*rig_.b_dev, inbox, kAccessLocal);
  ASSERT_TRUE(rig_.link.b->PostRecv(100, {inbox_region.get(), 0, 64}).ok());
  std::this_thread::sleep_for(milliseconds(20));  // the credit reaches A
  constexpr uint64_t kPiece = kMiB / 2;
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(
        rig_.link.a
            ->PostWrite(i, {region.get(), i * kPiece, kPiece}, {i * kPiece, remote_region->rkey()})
            .ok());
  }
  ASSERT_TRUE(rig_.link.a->PostSend(8, {region.get(), 0, 64}).ok());
  auto wcs = WaitFor(*rig_.link.a, 9);
  ASSERT_EQ(wcs.size(), 9u);
  for (uint64_t i = 0; i < 9; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].code, Code::kOk) << wcs[i].detail;
  }
  EXPECT_EQ(remote, buf);
  EXPECT_EQ(WaitOne(*rig_.link.b).code, Code::kOk);
}

TEST_F(TcpTransport, PeerCloseFailsOutstandingWithLinkDown) {
  std::vector<uint8_t> buf = Pattern(64, 1);
  auto region = Register(*rig_.a_dev, buf, kAccessRemoteWrite);
  ASSERT_TRUE(rig_.link.a->PostSend(1, {region.get(), 0, 8}).ok());  // waits for a credit
  ASSERT_TRUE(rig_.link.a->PostSend(2, {region.get(), 8, 8}).ok());
  ASSERT_TRUE(rig_.link.a->PostRecv(3, {region.get(), 16, 8}).ok());
  ExpectQuiet(*rig_.link.a, milliseconds(20));
  rig_.link.b.reset();

  auto wcs = WaitFor(*rig_.link.a, 3);
  ASSERT_EQ(wcs.size(), 3u);
  std::map<uint64_t, Code> codes;
  for (const auto& wc : wcs) codes[wc.wr_id] = wc.code;
  EXPECT_EQ(codes, (std::map<uint64_t, Code>{
                       {1, Code::kLinkDown}, {2, Code::kLinkDown}, {3, Code::kLinkDown}}));
  EXPECT_EQ(rig_.link.a->outstanding(), 0u);
  EXPECT_EQ(rig_.link.a->PostSend(4, {region.get(), 0, 8}).code(), Code::kLinkDown);
  EXPECT_EQ(rig_.link.a->PostRecv(5, {region.get(), 0, 8}).code(), Code::kLinkDown);
  EXPECT_EQ(rig_.link.a->PostWrite(6, {region.get(), 0, 8}, {0, 1}).code(), Code::kLinkDown);
  EXPECT_EQ(rig_.link.a->PostRead(7, {region.get(), 0, 8}, {0, 1}).code(), Code::kLinkDown);
}

TEST_F(TcpTransport, DestroyedDeviceTakesItsConnectionsDown) {
  std::vector<uint8_t> buf(64);
  auto region = Register(*rig_.a_dev, buf, kAccessLocal);
  auto b_region = Register(*rig_.b_dev, buf, kAccessLocal);
  ASSERT_TRUE(rig_.link.a->PostRecv(1, {region.get(), 0, 8}).ok());
  ASSERT_TRUE(rig_.link.b->PostRecv(2, {b_region.get(), 0, 8}).ok());
  b_region.reset();
  rig_.b_dev.reset();  // the connection and nothing else outlives it
  EXPECT_EQ(WaitOne(*rig_.link.b).code, Code::kLinkDown);
  EXPECT_EQ(WaitOne(*rig_.link.a).code, Code::kLinkDown);
  EXPECT_EQ(rig_.link.b->PostRecv(3, {region.get(), 0, 8}).code(), Code::kLinkDown);
  rig_.link.b.reset();
}

// Both devices live in this process, but b's I/O thread and this thread
// meet only through the kernel's socket, which ThreadSanitizer does not
// model. Before this thread touches memory b's I/O thread wrote or sent
// from, a message from a completes on b: b's I/O thread handles it after
// everything it did before (one thread), and its completion reaches this
// thread through b's completion queue, an order TSan sees.
void SettleB(conformance::Rig& rig, uint64_t wr_id) {
  std::vector<uint8_t> a_bytes(8, 1);
  std::vector<uint8_t> b_bytes(8, 0);
  auto a_region = Register(*rig.a_dev, a_bytes, kAccessLocal);
  auto b_region = Register(*rig.b_dev, b_bytes, kAccessLocal);
  ASSERT_TRUE(rig.link.b->PostRecv(wr_id, {b_region.get(), 0, 8}).ok());
  ASSERT_TRUE(rig.link.a->PostSend(wr_id, {a_region.get(), 0, 8}).ok());
  EXPECT_EQ(WaitOne(*rig.link.b).code, Code::kOk);
  EXPECT_EQ(WaitOne(*rig.link.a).code, Code::kOk);
}

TEST_F(TcpTransport, ManyPipelinedTransfersAllVerified) {
  // 64 MiB each way per round, in pieces of uneven size, 8 in flight:
  // 2 rounds of WRITE then READ back = 256 MiB moved, every byte checked.
  constexpr uint64_t kBytes = 64 * kMiB;
  constexpr size_t kInFlight = 8;
  std::vector<uint8_t> src = Pattern(kBytes, 17);
  std::vector<uint8_t> back(kBytes, 0);
  std::vector<uint8_t> remote(kBytes, 0);
  auto src_region = Register(*rig_.a_dev, src, kAccessLocal);
  auto back_region = Register(*rig_.a_dev, back, kAccessLocal);
  auto remote_region = Register(*rig_.b_dev, remote, kAccessRemoteRead | kAccessRemoteWrite);
  uint64_t moved = 0;
  auto started = steady_clock::now();
  for (int round = 0; round < 2; ++round) {
    for (WorkOp op : {WorkOp::kWrite, WorkOp::kRead}) {
      const uint64_t piece = round == 0 ? 4 * kMiB - 4096 + 3 : kMiB + 511;
      uint64_t offset = 0;
      uint64_t wr_id = 0;
      size_t in_flight = 0;
      while (offset < kBytes || in_flight > 0) {
        while (offset < kBytes && in_flight < kInFlight) {
          uint64_t n = std::min(piece, kBytes - offset);
          RemoteSlice remote_slice{offset, remote_region->rkey()};
          Status posted =
              op == WorkOp::kWrite
                  ? rig_.link.a->PostWrite(wr_id++, {src_region.get(), offset, n}, remote_slice)
                  : rig_.link.a->PostRead(wr_id++, {back_region.get(), offset, n}, remote_slice);
          ASSERT_TRUE(posted.ok()) << posted.ToString();
          offset += n;
          ++in_flight;
        }
        for (const WorkCompletion& wc : WaitFor(*rig_.link.a, 1)) {
          ASSERT_EQ(wc.code, Code::kOk) << wc.detail;
          moved += wc.byte_len;
          --in_flight;
        }
        if (HasFailure()) return;
      }
      ASSERT_NO_FATAL_FAILURE(SettleB(rig_, 1000 + wr_id));
      if (op == WorkOp::kWrite) {
        ASSERT_TRUE(remote == src) << "round " << round << ": WRITE bytes differ";
        std::fill(back.begin(), back.end(), 0);
      } else {
        ASSERT_TRUE(back == src) << "round " << round << ": READ bytes differ";
        std::fill(remote.begin(), remote.end(), 0);
      }
    }
  }
  double seconds = std::chrono::duration<double>(steady_clock::now() - started).count();
  EXPECT_EQ(moved, 4 * kBytes);
  std::printf("[ info     ] %llu MiB pipelined over tcp loopback (incl. checks): %.2f GB/s\n",
              static_cast<unsigned long long>(moved / kMiB),
              static_cast<double>(moved) / seconds / 1e9);
}

TEST(TcpNotifier, NotifierIsCalled) {
  auto a = MakeDevice();
  auto b = MakeDevice();
  std::atomic<int> a_calls{0};
  std::atomic<int> b_calls{0};
  a->SetNotifier([&] { a_calls.fetch_add(1); });
  b->SetNotifier([&] { b_calls.fetch_add(1); });
  Link link = Connect(*a, *b);
  ASSERT_NE(link.a, nullptr);
  std::vector<uint8_t> src = Pattern(64, 1);
  std::vector<uint8_t> dst(64, 0);
  auto src_region = Register(*a, src, kAccessLocal);
  auto dst_region = Register(*b, dst, kAccessRemoteWrite);
  EXPECT_EQ(a_calls.load(), 0);
  ASSERT_TRUE(link.b->PostRecv(1, {dst_region.get(), 0, 64}).ok());
  ASSERT_TRUE(link.a->PostWrite(2, {src_region.get(), 0, 64}, {0, dst_region->rkey()}).ok());
  ASSERT_TRUE(link.a->PostSend(3, {src_region.get(), 0, 32}).ok());
  // Wait on the notifier, not on Poll: a sleeping engine would.
  auto deadline = steady_clock::now() + kWait;
  while ((a_calls.load() == 0 || b_calls.load() == 0) && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_GT(a_calls.load(), 0);
  EXPECT_GT(b_calls.load(), 0);
  EXPECT_EQ(WaitFor(*link.a, 2).size(), 2u);
  EXPECT_EQ(WaitOne(*link.b).code, Code::kOk);
}

}  // namespace
}  // namespace mcdma::driver::tcp
