// The tcp transport's rails (tcp_transport.hpp, "Rails"): a listener per
// rail address, endpoints made on a rail (CreateEndpointOn) that advertise
// it and dial from it, and Connection::Abandon; and the interface look-ups
// rails use (platform/netif.hpp). Loopback only: 127.0.0.1 and 127.0.0.2
// both reach Linux's lo (only 127.0.0.1 is an address lo holds), so two
// devices in this process stand in for two hosts with a rail each.
// Work completes on the devices' I/O threads: every wait polls with a bound.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_transport.hpp"
#include "driver/transport.hpp"
#include "platform/fd.hpp"
#include "platform/netif.hpp"
#include "tests/unit/tcp_test_device.hpp"
#include "tests/unit/transport_conformance.hpp"

namespace mcdma::driver::tcp {
namespace {

using conformance::kWait;
using conformance::Link;
using conformance::Pattern;
using conformance::Register;
using conformance::TransportConformance;
using conformance::WaitFor;
using conformance::WaitOne;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A rail on an address lo answers for but does not hold (no interface to
// bind to: the source address alone), and one on the address lo holds
// (bound to lo with SO_BINDTODEVICE, as root or on Linux 5.7 and later).
constexpr char kRailUnheld[] = "127.0.0.2";
constexpr char kRailOnLo[] = "127.0.0.1";
constexpr milliseconds kRailConnectTimeout{3000};

TcpOptions RailOptions(std::vector<std::string> rails) {
  TcpOptions options = LocalOptions();
  options.rail_addresses = std::move(rails);
  return options;
}

TcpDevice& AsTcp(Device& device) { return dynamic_cast<TcpDevice&>(device); }

// The conformance suite over rail connections: every connection of the
// rig is made by CreateEndpointOn on both ends, so a rail's connection
// keeps every rule a link's own does (the suite runs per rail).
class TcpRailFactory final : public conformance::TransportFactory {
 public:
  std::string Name() const override { return "tcp_rail"; }
  Caps DefaultCaps() const override { return DefaultTcpCaps(); }
  Result<std::unique_ptr<Device>> MakeDevice(const Caps* caps) override {
    TcpOptions options = LocalOptions(caps);
    options.rail_addresses = {kRailOnLoForSuite};
    return CreateTcpDevice(options);
  }
  bool OneDevice() const override { return false; }
  Link Connect(Device& a, Device& b) override {
    return conformance::ConnectEndpoints(
        AsTcp(a).CreateEndpointOn(kRailOnLoForSuite, std::chrono::milliseconds(5000)),
        AsTcp(b).CreateEndpointOn(kRailOnLoForSuite, std::chrono::milliseconds(5000)));
  }

 private:
  static constexpr char kRailOnLoForSuite[] = "127.0.0.1";
};

INSTANTIATE_TEST_SUITE_P(TcpRail, TransportConformance,
                         ::testing::Values(std::make_shared<TcpRailFactory>()),
                         conformance::FactoryName);

// Connects a rail endpoint of `a` with one of `b`, both on `address`; B's
// Connect runs on a thread of its own (tcp's Connect waits for the peer).
Link ConnectOnRail(Device& a, Device& b, const std::string& address) {
  return conformance::ConnectEndpoints(AsTcp(a).CreateEndpointOn(address, kRailConnectTimeout),
                                       AsTcp(b).CreateEndpointOn(address, kRailConnectTimeout));
}

// A blocking IPv4 socket: listening on ip (any port) when `listen_on`,
// else connected to ip:port; invalid (and a failure) when that fails.
platform::Fd RawIpv4(const std::string& ip, uint16_t port, bool listen_on) {
  platform::Fd fd(socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_TRUE(fd.valid()) << std::strerror(errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip.c_str(), &addr.sin_addr), 1) << ip;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  bool ok = listen_on ? bind(fd.get(), sa, sizeof(addr)) == 0 && listen(fd.get(), 4) == 0
                      : connect(fd.get(), sa, sizeof(addr)) == 0;
  EXPECT_TRUE(ok) << (listen_on ? "listen " : "connect ") << ip << ":" << port << ": "
                  << std::strerror(errno);
  return ok ? std::move(fd) : platform::Fd();
}

uint16_t LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  return ntohs(addr.sin_port);
}

std::string PeerAddress(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return text;
}

// SEND/RECV, WRITE and READ over a link made on the rail `address`: the
// bytes that arrive are the bytes sent.
void ExpectRailMovesBytes(const std::string& address) {
  auto a_dev = MakeDevice(RailOptions({kRailUnheld, kRailOnLo}));
  auto b_dev = MakeDevice(RailOptions({kRailUnheld, kRailOnLo}));
  ASSERT_NE(a_dev, nullptr);
  ASSERT_NE(b_dev, nullptr);
  Link link = ConnectOnRail(*a_dev, *b_dev, address);
  ASSERT_NE(link.a, nullptr);
  ASSERT_NE(link.b, nullptr);

  constexpr size_t kBytes = 256 << 10;
  auto a_buf = Pattern(kBytes, 3);
  auto b_buf = std::vector<uint8_t>(kBytes, 0);
  auto a_mr = Register(*a_dev, a_buf, kAccessLocal);
  auto b_mr = Register(*b_dev, b_buf, kAccessRemoteRead | kAccessRemoteWrite);
  ASSERT_NE(a_mr, nullptr);
  ASSERT_NE(b_mr, nullptr);

  // SEND: the first 4 KiB of A's pattern lands in B's RECV.
  ASSERT_TRUE(link.b->PostRecv(1, {b_mr.get(), 0, 4096}).ok());
  ASSERT_TRUE(link.a->PostSend(2, {a_mr.get(), 0, 4096}).ok());
  WorkCompletion recv = WaitOne(*link.b);
  EXPECT_EQ(recv.code, Code::kOk) << recv.detail;
  EXPECT_EQ(recv.wr_id, 1u);
  EXPECT_EQ(recv.byte_len, 4096u);
  WorkCompletion send = WaitOne(*link.a);
  EXPECT_EQ(send.code, Code::kOk) << send.detail;
  EXPECT_EQ(send.wr_id, 2u);
  EXPECT_EQ(std::memcmp(b_buf.data(), a_buf.data(), 4096), 0);

  // WRITE: A's pattern from 4 KiB on, into B at 64 KiB.
  constexpr uint64_t kWriteBytes = 128 << 10;
  ASSERT_TRUE(link.a
                  ->PostWrite(3, {a_mr.get(), 4096, kWriteBytes},
                              {b_mr->RemoteAddr(64 << 10), b_mr->rkey()})
                  .ok());
  WorkCompletion write = WaitOne(*link.a);
  EXPECT_EQ(write.code, Code::kOk) << write.detail;
  EXPECT_EQ(write.byte_len, kWriteBytes);
  EXPECT_EQ(std::memcmp(b_buf.data() + (64 << 10), a_buf.data() + 4096, kWriteBytes), 0);

  // READ: those bytes back from B into A's tail, which held other bytes.
  constexpr uint64_t kTail = kBytes - kWriteBytes;
  ASSERT_NE(std::memcmp(a_buf.data() + kTail, a_buf.data() + 4096, kWriteBytes), 0);
  ASSERT_TRUE(link.a
                  ->PostRead(4, {a_mr.get(), kTail, kWriteBytes},
                             {b_mr->RemoteAddr(64 << 10), b_mr->rkey()})
                  .ok());
  WorkCompletion read = WaitOne(*link.a);
  EXPECT_EQ(read.code, Code::kOk) << read.detail;
  EXPECT_EQ(read.byte_len, kWriteBytes);
  EXPECT_EQ(std::memcmp(a_buf.data() + kTail, b_buf.data() + (64 << 10), kWriteBytes), 0);
}

TEST(TcpRails, DeviceListensOnEachRailAddress) {
  auto device = MakeDevice(RailOptions({kRailUnheld}));
  ASSERT_NE(device, nullptr);
  TcpDevice& tcp = AsTcp(*device);
  std::optional<uint16_t> port = tcp.rail_port(kRailUnheld);
  ASSERT_TRUE(port.has_value());
  // The device listens on 127.0.0.1 only, so its port is free on 127.0.0.2.
  EXPECT_EQ(*port, tcp.port()) << "the device's port where it is free at the rail address";
  EXPECT_FALSE(tcp.rail_port(kRailOnLo).has_value()) << "not a rail of this device";
  EXPECT_TRUE(RawIpv4(kRailUnheld, *port, /*listen_on=*/false).valid());

  // Listening on every address, the device's port is taken at the rail's:
  // the rail listens on a port of its own.
  TcpOptions wildcard;
  wildcard.rail_addresses = {kRailUnheld};
  auto other = MakeDevice(wildcard);
  ASSERT_NE(other, nullptr);
  std::optional<uint16_t> other_port = AsTcp(*other).rail_port(kRailUnheld);
  ASSERT_TRUE(other_port.has_value());
  EXPECT_NE(*other_port, 0);
  EXPECT_TRUE(RawIpv4(kRailUnheld, *other_port, /*listen_on=*/false).valid());
}

TEST(TcpRails, BadRailAddressesFailCreateNamingThem) {
  struct Case {
    std::vector<std::string> rails;
    Code code;
    std::string named;
  };
  const std::vector<Case> cases = {
      {{"rail-one"}, Code::kInvalid, "rail-one"},                 // not an IP literal
      {{"127.0.0.2 "}, Code::kInvalid, "127.0.0.2 "},             // nor is this
      {{"0.0.0.0"}, Code::kInvalid, "0.0.0.0"},                   // a wildcard: no interface
      {{"::"}, Code::kInvalid, "::"},                             // likewise
      {{"127.0.0.2", "127.0.0.2"}, Code::kInvalid, "127.0.0.2"},  // twice
      {{"192.0.2.1"}, Code::kSystem, "192.0.2.1"},                // TEST-NET-1: not local
  };
  for (const Case& c : cases) {
    auto device = CreateTcpDevice(RailOptions(c.rails));
    ASSERT_FALSE(device.ok()) << "rails " << c.rails[0];
    EXPECT_EQ(device.status().code(), c.code) << device.status().ToString();
    EXPECT_NE(device.status().message().find("'" + c.named + "'"), std::string::npos)
        << device.status().ToString();
  }
}

TEST(TcpRails, EndpointOnARailAdvertisesItsAddressAndPort) {
  auto device = MakeDevice(RailOptions({kRailUnheld}));
  ASSERT_NE(device, nullptr);
  auto ep = AsTcp(*device).CreateEndpointOn(kRailUnheld, kRailConnectTimeout);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  auto info = ParseEndpointInfo((*ep)->LocalInfo());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->address, kRailUnheld);
  EXPECT_EQ(info->port, AsTcp(*device).rail_port(kRailUnheld).value_or(0));
  auto plain = device->CreateEndpoint();
  ASSERT_TRUE(plain.ok());
  auto plain_info = ParseEndpointInfo((*plain)->LocalInfo());
  ASSERT_TRUE(plain_info.ok());
  EXPECT_EQ(plain_info->address, "127.0.0.1") << "CreateEndpoint still advertises the device's";
  EXPECT_NE(plain_info->token, info->token);
}

TEST(TcpRails, EndpointOffTheRailsOrWithoutTimeoutIsInvalid) {
  auto device = MakeDevice(RailOptions({kRailUnheld}));
  ASSERT_NE(device, nullptr);
  TcpDevice& tcp = AsTcp(*device);
  EXPECT_EQ(tcp.CreateEndpointOn("127.0.0.1", kRailConnectTimeout).status().code(), Code::kInvalid)
      << "the device's own listen address is not a rail";
  EXPECT_EQ(tcp.CreateEndpointOn("127.0.0.3", kRailConnectTimeout).status().code(), Code::kInvalid);
  EXPECT_EQ(tcp.CreateEndpointOn("", kRailConnectTimeout).status().code(), Code::kInvalid);
  EXPECT_EQ(tcp.CreateEndpointOn(kRailUnheld, milliseconds(0)).status().code(), Code::kInvalid);
  auto plain = MakeDevice();
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(AsTcp(*plain).CreateEndpointOn(kRailUnheld, kRailConnectTimeout).status().code(),
            Code::kInvalid)
      << "a device without rails has none to make endpoints on";
}

TEST(TcpRails, SendWriteReadMoveBytesOverARail) { ExpectRailMovesBytes(kRailUnheld); }

TEST(TcpRails, SendWriteReadMoveBytesOverARailBoundToItsInterface) {
  ExpectRailMovesBytes(kRailOnLo);
}

TEST(TcpRails, DialLeavesFromTheRailAddress) {
  auto device = MakeDevice(RailOptions({kRailUnheld}));
  ASSERT_NE(device, nullptr);
  // A stand-in peer on 127.0.0.1 with the highest token: our endpoint dials it.
  platform::Fd listener = RawIpv4("127.0.0.1", 0, /*listen_on=*/true);
  ASSERT_TRUE(listener.valid());
  Token high{};
  high.fill(0xff);
  std::string peer = EncodeEndpointInfo(
      {.address = "127.0.0.1", .port = LocalPort(listener.get()), .token = high});
  auto ep = AsTcp(*device).CreateEndpointOn(kRailUnheld, kRailConnectTimeout);
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  Result<std::unique_ptr<Connection>> connected = Status(Code::kInternal, "not run");
  std::thread dialer([&] { connected = (*ep)->Connect(peer); });
  pollfd pfd{.fd = listener.get(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "the rail endpoint did not dial";
  platform::Fd accepted(accept(listener.get(), nullptr, nullptr));
  ASSERT_TRUE(accepted.valid());
  EXPECT_EQ(PeerAddress(accepted.get()), kRailUnheld);
  accepted.Reset();  // no HELLO back: refused
  dialer.join();
  EXPECT_EQ(connected.status().code(), Code::kLinkDown) << connected.status().ToString();
}

TEST(TcpRails, RailConnectGivesUpAtItsOwnTimeout) {
  TcpOptions options = RailOptions({kRailUnheld});
  options.connect_timeout = std::chrono::seconds(30);
  auto device = MakeDevice(options);
  ASSERT_NE(device, nullptr);
  auto ep = AsTcp(*device).CreateEndpointOn(kRailUnheld, milliseconds(200));
  ASSERT_TRUE(ep.ok());
  // The all-zero token is lower than ours: the named peer would dial us.
  std::string info = EncodeEndpointInfo({.address = "127.0.0.1", .port = 9, .token = Token{}});
  auto started = steady_clock::now();
  EXPECT_EQ((*ep)->Connect(info).status().code(), Code::kTimeout);
  EXPECT_LT(steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(TcpAbandon, PostedRequestsCompleteLinkDownAndThePeerGoesDown) {
  auto a_dev = MakeDevice(RailOptions({kRailUnheld}));
  auto b_dev = MakeDevice(RailOptions({kRailUnheld}));
  ASSERT_NE(a_dev, nullptr);
  ASSERT_NE(b_dev, nullptr);
  Link link = ConnectOnRail(*a_dev, *b_dev, kRailUnheld);
  ASSERT_NE(link.a, nullptr);
  ASSERT_NE(link.b, nullptr);
  auto a_buf = Pattern(8192, 5);
  auto b_buf = std::vector<uint8_t>(8192, 0);
  auto a_mr = Register(*a_dev, a_buf, kAccessLocal);
  auto b_mr = Register(*b_dev, b_buf, kAccessLocal);
  ASSERT_NE(a_mr, nullptr);
  ASSERT_NE(b_mr, nullptr);

  // B has posted no RECV, so A's SEND waits for a credit, queued.
  ASSERT_TRUE(link.a->PostSend(10, {a_mr.get(), 0, 4096}).ok());
  ASSERT_TRUE(link.a->PostRecv(11, {a_mr.get(), 4096, 4096}).ok());
  link.a->Abandon();
  link.a->Abandon();  // idempotent
  EXPECT_EQ(link.a->PostSend(12, {a_mr.get(), 0, 16}).code(), Code::kLinkDown)
      << "down at once for later posts";
  std::vector<WorkCompletion> done = WaitFor(*link.a, 2);
  ASSERT_EQ(done.size(), 2u);
  for (const WorkCompletion& wc : done) {
    EXPECT_EQ(wc.code, Code::kLinkDown) << wc.wr_id;
    EXPECT_EQ(wc.byte_len, 0u);
  }
  EXPECT_EQ(link.a->outstanding(), 0u);

  // The peer sees the reset: its connection goes down, and the SEND that
  // was queued at A never arrives, however B's RECV ends.
  std::vector<WorkCompletion> b_done;
  Status b_recv = link.b->PostRecv(20, {b_mr.get(), 0, 4096});
  if (b_recv.ok()) {
    b_done = WaitFor(*link.b, 1);
    ASSERT_EQ(b_done.size(), 1u);
    EXPECT_EQ(b_done[0].code, Code::kLinkDown) << b_done[0].detail;
  } else {
    EXPECT_EQ(b_recv.code(), Code::kLinkDown) << b_recv.ToString();
  }
  // Down for later posts too (a post racing the I/O thread's mark is
  // queued and completes kLinkDown; the next one fails at once).
  auto deadline = steady_clock::now() + kWait;
  Status b_send = Status::Ok();
  for (uint64_t wr_id = 21; steady_clock::now() < deadline; ++wr_id) {
    b_send = link.b->PostSend(wr_id, {b_mr.get(), 0, 16});
    if (!b_send.ok()) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(b_send.code(), Code::kLinkDown) << "B did not see A's connection go";
  EXPECT_EQ(std::vector<uint8_t>(b_buf.begin(), b_buf.begin() + 4096),
            std::vector<uint8_t>(4096, 0))
      << "the abandoned SEND's bytes reached the peer";
  link.a.reset();  // destroying an abandoned connection sends nothing more
  link.b.reset();
}

TEST(PlatformNetif, InterfaceOfAddressNamesTheInterfaceHoldingIt) {
  auto lo = platform::InterfaceOfAddress("127.0.0.1");
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_EQ(*lo, "lo");
  auto lo6 = platform::InterfaceOfAddress("::1");
  if (lo6.ok()) {
    EXPECT_EQ(*lo6, "lo");
    auto scoped = platform::InterfaceOfAddress("::1%lo");
    ASSERT_TRUE(scoped.ok()) << scoped.status().ToString();
    EXPECT_EQ(*scoped, "lo");
    EXPECT_EQ(platform::InterfaceOfAddress("::1%eth-none").status().code(), Code::kNotFound)
        << "the scope names the interface that must hold it";
  } else {
    EXPECT_EQ(lo6.status().code(), Code::kNotFound) << "IPv6 disabled here";
  }
  // lo answers for all of 127/8 but holds only 127.0.0.1.
  for (const char* unheld : {"127.0.0.2", "192.0.2.1", "2001:db8::1"}) {
    auto none = platform::InterfaceOfAddress(unheld);
    EXPECT_EQ(none.status().code(), Code::kNotFound) << unheld;
    EXPECT_NE(none.status().message().find(unheld), std::string::npos) << none.status().ToString();
  }
  for (const char* bad : {"", "lo", "127.0.0.1:80", "::1%"}) {
    EXPECT_EQ(platform::InterfaceOfAddress(bad).status().code(), Code::kInvalid) << bad;
  }
}

TEST(PlatformNetif, InterfaceRunningSaysUpWithCarrier) {
  auto lo = platform::InterfaceRunning("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_TRUE(*lo);
  for (const char* unknown : {"mcdma-no-if0", ""}) {
    auto none = platform::InterfaceRunning(unknown);
    EXPECT_EQ(none.status().code(), Code::kNotFound) << unknown;
    EXPECT_NE(none.status().message().find(std::string("'") + unknown + "'"), std::string::npos)
        << none.status().ToString();
  }
}

}  // namespace
}  // namespace mcdma::driver::tcp
