// The tcp transport: two devices in one process over 127.0.0.1. Byte
// movement, the responder's checks, credits, limits, teardown, hostile
// peers. Work completes on the devices' I/O threads, so every wait polls
// with a bound (sleeping between polls) and fails loudly when it runs out.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_transport.hpp"
#include "driver/transport.hpp"
#include "platform/socket.hpp"

namespace mcdma::driver::tcp {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint64_t kMiB = 1ULL << 20;
constexpr auto kWait = std::chrono::seconds(10);

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 12));
  return v;
}

std::byte* Bytes(std::vector<uint8_t>& v) { return reinterpret_cast<std::byte*>(v.data()); }

TcpOptions LocalOptions(const Caps* caps = nullptr) {
  TcpOptions options;
  options.listen_address = "127.0.0.1";
  if (caps != nullptr) options.caps = *caps;
  options.connect_timeout = milliseconds(5000);
  return options;
}

std::unique_ptr<Device> MakeDevice(const TcpOptions& options) {
  auto device = CreateTcpDevice(options);
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return device.ok() ? std::move(device).value() : nullptr;
}

std::unique_ptr<Device> MakeDevice(const Caps* caps = nullptr) {
  return MakeDevice(LocalOptions(caps));
}

std::unique_ptr<MemoryRegion> Register(Device& device, std::vector<uint8_t>& buf, uint32_t access) {
  auto region = device.Register(Bytes(buf), buf.size(), access);
  EXPECT_TRUE(region.ok()) << region.status().ToString();
  return region.ok() ? std::move(region).value() : nullptr;
}

struct Link {
  std::unique_ptr<Connection> a;
  std::unique_ptr<Connection> b;
};

// Connect blocks until both sides have called it, so B's runs on a thread.
Link Connect(Device& a, Device& b) {
  auto ea = a.CreateEndpoint();
  auto eb = b.CreateEndpoint();
  EXPECT_TRUE(ea.ok() && eb.ok());
  if (!ea.ok() || !eb.ok()) return {};
  std::string info_a = (*ea)->LocalInfo();
  std::string info_b = (*eb)->LocalInfo();
  Result<std::unique_ptr<Connection>> cb = Status(Code::kInternal, "not run");
  std::thread other([&] { cb = (*eb)->Connect(info_a); });
  auto ca = (*ea)->Connect(info_b);
  other.join();
  EXPECT_TRUE(ca.ok()) << ca.status().ToString();
  EXPECT_TRUE(cb.ok()) << cb.status().ToString();
  if (!ca.ok() || !cb.ok()) return {};
  return Link{std::move(ca).value(), std::move(cb).value()};
}

// Polls until `n` completions arrived or kWait passed; returns what came.
std::vector<WorkCompletion> WaitFor(Connection& c, size_t n, steady_clock::duration limit = kWait) {
  std::vector<WorkCompletion> got;
  auto deadline = steady_clock::now() + limit;
  std::array<WorkCompletion, 64> out;
  while (got.size() < n && steady_clock::now() < deadline) {
    size_t k = c.Poll(std::span(out).first(std::min(out.size(), n - got.size())));
    for (size_t i = 0; i < k; ++i) got.push_back(std::move(out[i]));
    if (k == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(got.size(), n) << "timed out waiting for completions";
  return got;
}

WorkCompletion WaitOne(Connection& c) {
  auto wcs = WaitFor(c, 1);
  if (wcs.empty()) return WorkCompletion{.code = Code::kInternal, .detail = "none"};
  return wcs.front();
}

// Polls for a while and expects nothing.
void ExpectQuiet(Connection& c, milliseconds how_long = milliseconds(100)) {
  auto deadline = steady_clock::now() + how_long;
  std::array<WorkCompletion, 8> out;
  while (steady_clock::now() < deadline) {
    size_t n = c.Poll(out);
    ASSERT_EQ(n, 0u) << "unexpected completion wr_id " << out[0].wr_id << ": "
                     << CodeName(out[0].code) << " " << out[0].detail;
    std::this_thread::sleep_for(milliseconds(2));
  }
}

class TcpTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    a_dev_ = MakeDevice();
    b_dev_ = MakeDevice();
    ASSERT_NE(a_dev_, nullptr);
    ASSERT_NE(b_dev_, nullptr);
    link_ = Connect(*a_dev_, *b_dev_);
    ASSERT_NE(link_.a, nullptr);
    ASSERT_NE(link_.b, nullptr);
  }

  std::unique_ptr<Device> a_dev_;
  std::unique_ptr<Device> b_dev_;
  Link link_;
};

// ---------------------------------------------------------------- device --

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

TEST(TcpRegister, AssignsDistinctNonzeroKeysAndOffsetAddresses) {
  auto device = MakeDevice();
  std::vector<uint8_t> buf(4096);
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  std::set<uint32_t> keys;
  for (int i = 0; i < 64; ++i) {
    regions.push_back(Register(*device, buf, kAccessRemoteRead));
    ASSERT_NE(regions.back(), nullptr);
    EXPECT_NE(regions.back()->lkey(), 0u);
    EXPECT_NE(regions.back()->rkey(), 0u);
    keys.insert(regions.back()->lkey());
    keys.insert(regions.back()->rkey());
  }
  EXPECT_EQ(keys.size(), 128u);
  EXPECT_EQ(regions[0]->RemoteAddr(123), 123u);
  EXPECT_EQ(regions[0]->addr(), Bytes(buf));
  EXPECT_EQ(regions[0]->access(), kAccessRemoteRead);
}

TEST(TcpRegister, EnforcesRegistrationLimits) {
  Caps caps = DefaultTcpCaps();
  caps.max_registration_bytes = 4096;
  caps.max_registrations = 2;
  auto device = MakeDevice(&caps);
  std::vector<uint8_t> buf(4097);
  EXPECT_EQ(device->Register(Bytes(buf), 4097, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_EQ(device->Register(nullptr, 64, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_EQ(device->Register(Bytes(buf), 64, 1u << 7).status().code(), Code::kInvalid);
  auto r1 = device->Register(Bytes(buf), 64, kAccessLocal);
  auto r2 = device->Register(Bytes(buf), 64, kAccessLocal);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(device->Register(Bytes(buf), 64, kAccessLocal).status().code(), Code::kNoMemory);
  r1.value().reset();
  EXPECT_TRUE(device->Register(Bytes(buf), 64, kAccessLocal).ok());
}

// --------------------------------------------------------------- connect --

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

// -------------------------------------------------------------- one-sided --

TEST_F(TcpTransport, WriteCopiesBytesIntoRemoteRegion) {
  std::vector<uint8_t> src = Pattern(256, 1);
  std::vector<uint8_t> dst(256, 0xee);
  auto src_region = Register(*a_dev_, src, kAccessLocal);
  auto dst_region = Register(*b_dev_, dst, kAccessRemoteWrite);
  ASSERT_TRUE(link_.a
                  ->PostWrite(7, {src_region.get(), 10, 100},
                              {dst_region->RemoteAddr(30), dst_region->rkey()})
                  .ok());
  EXPECT_EQ(link_.a->outstanding(), 1u);
  WorkCompletion wc = WaitOne(*link_.a);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.op, WorkOp::kWrite);
  EXPECT_EQ(wc.code, Code::kOk) << wc.detail;
  EXPECT_EQ(wc.byte_len, 100u);
  EXPECT_EQ(link_.a->outstanding(), 0u);
  for (size_t i = 0; i < dst.size(); ++i) {
    uint8_t want = (i >= 30 && i < 130) ? src[i - 30 + 10] : 0xee;
    ASSERT_EQ(dst[i], want) << "byte " << i;
  }
  ExpectQuiet(*link_.b);  // one-sided: the target side sees nothing
}

TEST_F(TcpTransport, ReadCopiesBytesFromRemoteRegion) {
  std::vector<uint8_t> remote = Pattern(6 * kMiB + 123, 9);
  std::vector<uint8_t> local(8 * kMiB, 0);
  auto remote_region = Register(*b_dev_, remote, kAccessRemoteRead);
  auto local_region = Register(*a_dev_, local, kAccessLocal);
  const uint64_t length = 5 * kMiB + 77;
  ASSERT_TRUE(link_.a
                  ->PostRead(8, {local_region.get(), 1000, length},
                             {remote_region->RemoteAddr(46), remote_region->rkey()})
                  .ok());
  WorkCompletion wc = WaitOne(*link_.a);
  EXPECT_EQ(wc.op, WorkOp::kRead);
  EXPECT_EQ(wc.code, Code::kOk) << wc.detail;
  EXPECT_EQ(wc.byte_len, length);
  EXPECT_TRUE(std::equal(remote.begin() + 46, remote.begin() + 46 + length, local.begin() + 1000));
  EXPECT_EQ(local[999], 0);
  EXPECT_EQ(local[1000 + length], 0);
}

TEST_F(TcpTransport, RejectsRemoteAccessWithoutPermission) {
  std::vector<uint8_t> local = Pattern(64, 1);
  std::vector<uint8_t> private_buf(64, 0x55);
  std::vector<uint8_t> read_only(64, 0x66);
  auto local_region = Register(*a_dev_, local, kAccessLocal);
  auto private_region = Register(*b_dev_, private_buf, kAccessLocal);
  auto read_only_region = Register(*b_dev_, read_only, kAccessRemoteRead);
  LocalSlice slice{local_region.get(), 0, 64};

  ASSERT_TRUE(link_.a->PostWrite(1, slice, {0, private_region->rkey()}).ok());
  ASSERT_TRUE(link_.a->PostRead(2, slice, {0, private_region->rkey()}).ok());
  ASSERT_TRUE(link_.a->PostWrite(3, slice, {0, read_only_region->rkey()}).ok());
  ASSERT_TRUE(link_.a->PostRead(4, slice, {0, read_only_region->rkey()}).ok());
  auto wcs = WaitFor(*link_.a, 4);
  ASSERT_EQ(wcs.size(), 4u);
  EXPECT_EQ(wcs[0].code, Code::kPermissionDenied);
  EXPECT_EQ(wcs[1].code, Code::kPermissionDenied);
  EXPECT_EQ(wcs[2].code, Code::kPermissionDenied);
  EXPECT_FALSE(wcs[2].detail.empty());
  EXPECT_EQ(wcs[3].code, Code::kOk) << wcs[3].detail;
  EXPECT_EQ(wcs[0].byte_len, 0u);
  EXPECT_EQ(private_buf, std::vector<uint8_t>(64, 0x55));
  EXPECT_EQ(read_only, std::vector<uint8_t>(64, 0x66));
  EXPECT_EQ(local, std::vector<uint8_t>(64, 0x66));  // the permitted READ landed
  // A refused request does not hurt the connection.
  ASSERT_TRUE(link_.a->PostRead(5, slice, {0, read_only_region->rkey()}).ok());
  EXPECT_EQ(WaitOne(*link_.a).code, Code::kOk);
}

TEST_F(TcpTransport, ReadPastRegionEndCompletesOutOfRange) {
  std::vector<uint8_t> remote(128, 0x11);
  std::vector<uint8_t> local(128, 0);
  auto remote_region = Register(*b_dev_, remote, kAccessRemoteRead | kAccessRemoteWrite);
  auto local_region = Register(*a_dev_, local, kAccessLocal);
  uint32_t rkey = remote_region->rkey();
  ASSERT_TRUE(link_.a->PostRead(1, {local_region.get(), 0, 64}, {65, rkey}).ok());
  ASSERT_TRUE(link_.a->PostRead(2, {local_region.get(), 0, 1}, {128, rkey}).ok());
  ASSERT_TRUE(
      link_.a->PostRead(3, {local_region.get(), 0, 8}, {std::numeric_limits<uint64_t>::max(), rkey})
          .ok());
  ASSERT_TRUE(link_.a->PostWrite(4, {local_region.get(), 0, 64}, {100, rkey}).ok());
  ASSERT_TRUE(link_.a->PostRead(5, {local_region.get(), 0, 64}, {64, rkey}).ok());
  auto wcs = WaitFor(*link_.a, 5);
  ASSERT_EQ(wcs.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wcs[i].code, Code::kOutOfRange) << "request " << i + 1;
  EXPECT_EQ(wcs[4].code, Code::kOk) << "a read ending exactly at the region end is allowed";
  EXPECT_EQ(remote, std::vector<uint8_t>(128, 0x11));
  EXPECT_EQ(std::vector<uint8_t>(local.begin(), local.begin() + 64),
            std::vector<uint8_t>(64, 0x11));
  EXPECT_EQ(std::vector<uint8_t>(local.begin() + 64, local.end()), std::vector<uint8_t>(64, 0));
}

TEST_F(TcpTransport, UnknownRkeyIsRefused) {
  std::vector<uint8_t> local(32);
  std::vector<uint8_t> remote(32, 0x77);
  auto local_region = Register(*a_dev_, local, kAccessRemoteRead | kAccessRemoteWrite);
  auto remote_region = Register(*b_dev_, remote, kAccessRemoteRead | kAccessRemoteWrite);
  uint32_t bogus = remote_region->rkey() + 1;
  if (bogus == remote_region->lkey()) ++bogus;
  ASSERT_TRUE(link_.a->PostWrite(1, {local_region.get(), 0, 8}, {0, 0}).ok());
  ASSERT_TRUE(link_.a->PostWrite(2, {local_region.get(), 0, 8}, {0, bogus}).ok());
  // An lkey is not an rkey, and A's own rkey means nothing on B.
  ASSERT_TRUE(link_.a->PostRead(3, {local_region.get(), 0, 8}, {0, remote_region->lkey()}).ok());
  ASSERT_TRUE(link_.a->PostRead(4, {local_region.get(), 0, 8}, {0, local_region->rkey()}).ok());
  auto wcs = WaitFor(*link_.a, 4);
  ASSERT_EQ(wcs.size(), 4u);
  for (const auto& wc : wcs) EXPECT_EQ(wc.code, Code::kPermissionDenied) << wc.wr_id;
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0x77));
}

TEST_F(TcpTransport, DeregisteredRkeyIsRefused) {
  std::vector<uint8_t> local = Pattern(32, 4);
  std::vector<uint8_t> remote(32, 0);
  auto local_region = Register(*a_dev_, local, kAccessLocal);
  auto remote_region = Register(*b_dev_, remote, kAccessRemoteWrite | kAccessRemoteRead);
  RemoteSlice stale{remote_region->RemoteAddr(0), remote_region->rkey()};
  remote_region.reset();
  ASSERT_TRUE(link_.a->PostWrite(1, {local_region.get(), 0, 32}, stale).ok());
  ASSERT_TRUE(link_.a->PostRead(2, {local_region.get(), 0, 32}, stale).ok());
  auto wcs = WaitFor(*link_.a, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].code, Code::kPermissionDenied);
  EXPECT_EQ(wcs[1].code, Code::kPermissionDenied);
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0));
  EXPECT_EQ(local, Pattern(32, 4));
}

TEST_F(TcpTransport, RegionDestroyedWhileQueuedIsNotTouched) {
  // Against the contract, but a NIC reports a protection error rather than
  // write freed memory; so does tcp. The SEND waits for a credit, so its
  // source is gone when it is issued.
  std::vector<uint8_t> src = Pattern(32, 2);
  std::vector<uint8_t> inbox(32, 0);
  auto src_region = Register(*a_dev_, src, kAccessLocal);
  auto inbox_region = Register(*b_dev_, inbox, kAccessLocal);
  ASSERT_TRUE(link_.a->PostSend(1, {src_region.get(), 0, 32}).ok());
  ExpectQuiet(*link_.a, milliseconds(20));
  src_region.reset();
  ASSERT_TRUE(link_.b->PostRecv(2, {inbox_region.get(), 0, 32}).ok());
  EXPECT_EQ(WaitOne(*link_.a).code, Code::kPermissionDenied);
  EXPECT_EQ(WaitOne(*link_.b).code, Code::kPermissionDenied);
  EXPECT_EQ(inbox, std::vector<uint8_t>(32, 0));
}

// ------------------------------------------------------------- two-sided --

TEST_F(TcpTransport, SendWaitsForPostedRecv) {
  std::vector<uint8_t> src = Pattern(200, 5);
  std::vector<uint8_t> dst(256, 0);
  auto src_region = Register(*a_dev_, src, kAccessLocal);
  auto dst_region = Register(*b_dev_, dst, kAccessLocal);
  ASSERT_TRUE(link_.a->PostSend(11, {src_region.get(), 0, 200}).ok());
  ExpectQuiet(*link_.a);  // no RECV posted: no credit, the SEND waits
  EXPECT_EQ(link_.a->outstanding(), 1u);

  ASSERT_TRUE(link_.b->PostRecv(22, {dst_region.get(), 0, 256}).ok());
  WorkCompletion recv = WaitOne(*link_.b);
  EXPECT_EQ(recv.wr_id, 22u);
  EXPECT_EQ(recv.op, WorkOp::kRecv);
  EXPECT_EQ(recv.code, Code::kOk) << recv.detail;
  EXPECT_EQ(recv.byte_len, 200u);
  WorkCompletion send = WaitOne(*link_.a);
  EXPECT_EQ(send.wr_id, 11u);
  EXPECT_EQ(send.op, WorkOp::kSend);
  EXPECT_EQ(send.code, Code::kOk);
  EXPECT_EQ(send.byte_len, 200u);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 200), src);
  EXPECT_EQ(dst[200], 0);
}

TEST_F(TcpTransport, SendConsumesOldestRecvFirst) {
  std::vector<uint8_t> src = Pattern(16, 1);
  std::vector<uint8_t> dst(48, 0);
  auto src_region = Register(*a_dev_, src, kAccessLocal);
  auto dst_region = Register(*b_dev_, dst, kAccessLocal);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(link_.b->PostRecv(100 + i, {dst_region.get(), 16 * i, 16}).ok());
  }
  ASSERT_TRUE(link_.a->PostSend(1, {src_region.get(), 0, 4}).ok());
  ASSERT_TRUE(link_.a->PostSend(2, {src_region.get(), 4, 12}).ok());
  auto sends = WaitFor(*link_.a, 2);
  ASSERT_EQ(sends.size(), 2u);
  EXPECT_EQ(sends[0].wr_id, 1u);
  EXPECT_EQ(sends[1].wr_id, 2u);
  auto recvs = WaitFor(*link_.b, 2);
  ASSERT_EQ(recvs.size(), 2u);
  EXPECT_EQ(recvs[0].wr_id, 100u);
  EXPECT_EQ(recvs[0].byte_len, 4u);
  EXPECT_EQ(recvs[1].wr_id, 101u);
  EXPECT_EQ(recvs[1].byte_len, 12u);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 4),
            std::vector<uint8_t>(src.begin(), src.begin() + 4));
  EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 16, dst.begin() + 28),
            std::vector<uint8_t>(src.begin() + 4, src.end()));
  EXPECT_EQ(link_.b->outstanding(), 1u);  // the third RECV is still posted
}

TEST_F(TcpTransport, SendLargerThanRecvFailsBothOutOfRange) {
  std::vector<uint8_t> src = Pattern(64, 1);
  std::vector<uint8_t> dst(64, 0);
  auto src_region = Register(*a_dev_, src, kAccessLocal);
  auto dst_region = Register(*b_dev_, dst, kAccessLocal);
  ASSERT_TRUE(link_.b->PostRecv(2, {dst_region.get(), 0, 32}).ok());
  ASSERT_TRUE(link_.b->PostRecv(3, {dst_region.get(), 32, 32}).ok());
  ASSERT_TRUE(link_.a->PostSend(1, {src_region.get(), 0, 33}).ok());
  ASSERT_TRUE(link_.a->PostSend(4, {src_region.get(), 0, 32}).ok());
  auto sends = WaitFor(*link_.a, 2);
  auto recvs = WaitFor(*link_.b, 2);
  ASSERT_EQ(sends.size(), 2u);
  ASSERT_EQ(recvs.size(), 2u);
  EXPECT_EQ(sends[0].code, Code::kOutOfRange);
  EXPECT_EQ(recvs[0].code, Code::kOutOfRange);
  EXPECT_EQ(recvs[0].byte_len, 0u);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 32), std::vector<uint8_t>(32, 0));
  // The next SEND uses the next RECV: the link is fine.
  EXPECT_EQ(sends[1].code, Code::kOk);
  EXPECT_EQ(recvs[1].code, Code::kOk);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 32, dst.end()),
            std::vector<uint8_t>(src.begin(), src.begin() + 32));
}

TEST_F(TcpTransport, WaitingSendHoldsBackLaterRequests) {
  std::vector<uint8_t> src = Pattern(32, 1);
  std::vector<uint8_t> remote(32, 0);
  std::vector<uint8_t> inbox(32, 0);
  auto src_region = Register(*a_dev_, src, kAccessLocal);
  auto remote_region = Register(*b_dev_, remote, kAccessRemoteWrite);
  auto inbox_region = Register(*b_dev_, inbox, kAccessLocal);
  ASSERT_TRUE(link_.a->PostSend(1, {src_region.get(), 0, 8}).ok());
  ASSERT_TRUE(link_.a->PostWrite(2, {src_region.get(), 0, 32}, {0, remote_region->rkey()}).ok());
  ExpectQuiet(*link_.a);
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0)) << "the WRITE ran ahead of the waiting SEND";

  ASSERT_TRUE(link_.b->PostRecv(3, {inbox_region.get(), 0, 32}).ok());
  auto wcs = WaitFor(*link_.a, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(remote, src);
}

TEST_F(TcpTransport, CompletionsArriveInPostOrder) {
  // A SEND completes when written, a WRITE only on its ACK: the SEND's
  // completion still waits for the WRITE posted before it.
  std::vector<uint8_t> buf = Pattern(4 * kMiB, 3);
  std::vector<uint8_t> remote(4 * kMiB, 0);
  std::vector<uint8_t> inbox(64, 0);
  auto region = Register(*a_dev_, buf, kAccessLocal);
  auto remote_region = Register(*b_dev_, remote, kAccessRemoteWrite);
  auto inbox_region = Register(*b_dev_, inbox, kAccessLocal);
  ASSERT_TRUE(link_.b->PostRecv(100, {inbox_region.get(), 0, 64}).ok());
  std::this_thread::sleep_for(milliseconds(20));  // the credit reaches A
  constexpr uint64_t kPiece = kMiB / 2;
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(
        link_.a
            ->PostWrite(i, {region.get(), i * kPiece, kPiece}, {i * kPiece, remote_region->rkey()})
            .ok());
  }
  ASSERT_TRUE(link_.a->PostSend(8, {region.get(), 0, 64}).ok());
  auto wcs = WaitFor(*link_.a, 9);
  ASSERT_EQ(wcs.size(), 9u);
  for (uint64_t i = 0; i < 9; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].code, Code::kOk) << wcs[i].detail;
  }
  EXPECT_EQ(remote, buf);
  EXPECT_EQ(WaitOne(*link_.b).code, Code::kOk);
}

// ----------------------------------------------------------------- limits --

TEST(TcpLimits, EnforcesMaxOutstanding) {
  Caps caps = DefaultTcpCaps();
  caps.max_outstanding = 4;
  auto a = MakeDevice(&caps);
  auto b = MakeDevice(&caps);
  Link link = Connect(*a, *b);
  ASSERT_NE(link.a, nullptr);
  std::vector<uint8_t> buf(64);
  std::vector<uint8_t> remote(64);
  auto region = Register(*a, buf, kAccessLocal);
  auto remote_region = Register(*b, remote, kAccessRemoteWrite);
  LocalSlice slice{region.get(), 0, 8};
  // SENDs wait for credits that never come: they stay outstanding.
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(link.a->PostSend(i, slice).ok());
  EXPECT_EQ(link.a->PostSend(4, slice).code(), Code::kBusy);
  EXPECT_EQ(link.a->PostWrite(5, slice, {0, remote_region->rkey()}).code(), Code::kBusy);
  // The receive queue is a queue of its own.
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(link.a->PostRecv(10 + i, slice).ok());
  EXPECT_EQ(link.a->PostRecv(14, slice).code(), Code::kBusy);
  EXPECT_EQ(link.a->outstanding(), 8u);

  // Completed but not reaped still counts; reaping frees the slots.
  std::vector<uint8_t> inbox(64);
  auto inbox_region = Register(*b, inbox, kAccessLocal);
  ASSERT_TRUE(link.b->PostRecv(20, {inbox_region.get(), 0, 8}).ok());
  ASSERT_TRUE(link.b->PostRecv(21, {inbox_region.get(), 8, 8}).ok());
  ASSERT_EQ(WaitFor(*link.b, 2).size(), 2u);
  EXPECT_EQ(link.a->PostSend(6, slice).code(), Code::kBusy) << "completed, not reaped";
  ASSERT_EQ(WaitFor(*link.a, 2).size(), 2u);
  ASSERT_TRUE(link.a->PostWrite(7, slice, {0, remote_region->rkey()}).ok());
  ASSERT_TRUE(link.a->PostWrite(8, slice, {8, remote_region->rkey()}).ok());
  EXPECT_EQ(link.a->PostWrite(9, slice, {0, remote_region->rkey()}).code(), Code::kBusy);
}

TEST(TcpLimits, EnforcesMaxOutstandingReadsAndSizes) {
  Caps caps = DefaultTcpCaps();
  caps.max_outstanding_reads = 1;
  caps.max_transfer_bytes = 1024;
  caps.max_read_bytes = 512;
  auto a = MakeDevice(&caps);
  auto b = MakeDevice(&caps);
  Link link = Connect(*a, *b);
  ASSERT_NE(link.a, nullptr);
  std::vector<uint8_t> buf(4096);
  std::vector<uint8_t> remote(4096);
  auto region = Register(*a, buf, kAccessLocal);
  auto remote_region = Register(*b, remote, kAccessRemoteRead | kAccessRemoteWrite);
  RemoteSlice far{2048, remote_region->rkey()};
  EXPECT_EQ(link.a->PostWrite(1, {region.get(), 0, 1025}, far).code(), Code::kInvalid);
  EXPECT_EQ(link.a->PostSend(2, {region.get(), 0, 1025}).code(), Code::kInvalid);
  EXPECT_EQ(link.a->PostRead(3, {region.get(), 0, 513}, far).code(), Code::kInvalid);
  ASSERT_TRUE(link.a->PostRead(4, {region.get(), 0, 512}, far).ok());
  EXPECT_EQ(link.a->PostRead(5, {region.get(), 0, 512}, far).code(), Code::kBusy);
  EXPECT_TRUE(link.a->PostWrite(6, {region.get(), 0, 1024}, far).ok()) << "WRITEs are not READs";
  ASSERT_EQ(WaitFor(*link.a, 2).size(), 2u);
  EXPECT_TRUE(link.a->PostRead(7, {region.get(), 0, 512}, far).ok());
  EXPECT_EQ(WaitOne(*link.a).code, Code::kOk);
}

TEST_F(TcpTransport, RejectsLocalSliceOutsideRegionOrDevice) {
  std::vector<uint8_t> buf(100);
  auto region = Register(*a_dev_, buf, kAccessRemoteWrite | kAccessRemoteRead);
  auto foreign = Register(*b_dev_, buf, kAccessRemoteWrite | kAccessRemoteRead);
  RemoteSlice remote{0, foreign->rkey()};
  EXPECT_EQ(link_.a->PostSend(1, {region.get(), 90, 11}).code(), Code::kOutOfRange);
  EXPECT_EQ(link_.a->PostRecv(2, {region.get(), 101, 0}).code(), Code::kOutOfRange);
  EXPECT_EQ(link_.a->PostWrite(3, {region.get(), 1, 100}, remote).code(), Code::kOutOfRange);
  EXPECT_EQ(link_.a->PostSend(4, {nullptr, 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(link_.a->PostSend(5, {foreign.get(), 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(link_.a->outstanding(), 0u);
  EXPECT_TRUE(link_.a->PostWrite(6, {region.get(), 100, 0}, remote).ok());
  EXPECT_EQ(WaitOne(*link_.a).code, Code::kOk);
}

// -------------------------------------------------------------- teardown --

TEST_F(TcpTransport, PeerCloseFailsOutstandingWithLinkDown) {
  std::vector<uint8_t> buf = Pattern(64, 1);
  auto region = Register(*a_dev_, buf, kAccessRemoteWrite);
  ASSERT_TRUE(link_.a->PostSend(1, {region.get(), 0, 8}).ok());  // waits for a credit
  ASSERT_TRUE(link_.a->PostSend(2, {region.get(), 8, 8}).ok());
  ASSERT_TRUE(link_.a->PostRecv(3, {region.get(), 16, 8}).ok());
  ExpectQuiet(*link_.a, milliseconds(20));
  link_.b.reset();

  auto wcs = WaitFor(*link_.a, 3);
  ASSERT_EQ(wcs.size(), 3u);
  std::map<uint64_t, Code> codes;
  for (const auto& wc : wcs) codes[wc.wr_id] = wc.code;
  EXPECT_EQ(codes, (std::map<uint64_t, Code>{
                       {1, Code::kLinkDown}, {2, Code::kLinkDown}, {3, Code::kLinkDown}}));
  EXPECT_EQ(link_.a->outstanding(), 0u);
  EXPECT_EQ(link_.a->PostSend(4, {region.get(), 0, 8}).code(), Code::kLinkDown);
  EXPECT_EQ(link_.a->PostRecv(5, {region.get(), 0, 8}).code(), Code::kLinkDown);
  EXPECT_EQ(link_.a->PostWrite(6, {region.get(), 0, 8}, {0, 1}).code(), Code::kLinkDown);
  EXPECT_EQ(link_.a->PostRead(7, {region.get(), 0, 8}, {0, 1}).code(), Code::kLinkDown);
}

TEST_F(TcpTransport, DestroyedDeviceTakesItsConnectionsDown) {
  std::vector<uint8_t> buf(64);
  auto region = Register(*a_dev_, buf, kAccessLocal);
  auto b_region = Register(*b_dev_, buf, kAccessLocal);
  ASSERT_TRUE(link_.a->PostRecv(1, {region.get(), 0, 8}).ok());
  ASSERT_TRUE(link_.b->PostRecv(2, {b_region.get(), 0, 8}).ok());
  b_region.reset();
  b_dev_.reset();  // the connection and nothing else outlives it
  EXPECT_EQ(WaitOne(*link_.b).code, Code::kLinkDown);
  EXPECT_EQ(WaitOne(*link_.a).code, Code::kLinkDown);
  EXPECT_EQ(link_.b->PostRecv(3, {region.get(), 0, 8}).code(), Code::kLinkDown);
  link_.b.reset();
}

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
  auto region = Register(*device, buf, kAccessRemoteRead | kAccessRemoteWrite);

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
    WorkCompletion wc = WaitOne(*peer->conn);
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
  Link link = Connect(*device, *other);
  ASSERT_NE(link.a, nullptr);
}

TEST(TcpHostilePeer, WriteOfUnknownRkeyIsDrainedAndRefused) {
  auto device = MakeDevice();
  std::vector<uint8_t> buf(64, 0);
  auto region = Register(*device, buf, kAccessRemoteWrite);
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
  auto region = device->Register(Bytes(buf) + 4096, 4096, kAccessRemoteRead | kAccessRemoteWrite);
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
    auto deadline = steady_clock::now() + kWait;
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

// ------------------------------------------------------------------- bulk --

TEST_F(TcpTransport, ManyPipelinedTransfersAllVerified) {
  // 64 MiB each way per round, in pieces of uneven size, 8 in flight:
  // 2 rounds of WRITE then READ back = 256 MiB moved, every byte checked.
  constexpr uint64_t kBytes = 64 * kMiB;
  constexpr size_t kInFlight = 8;
  std::vector<uint8_t> src = Pattern(kBytes, 17);
  std::vector<uint8_t> back(kBytes, 0);
  std::vector<uint8_t> remote(kBytes, 0);
  auto src_region = Register(*a_dev_, src, kAccessLocal);
  auto back_region = Register(*a_dev_, back, kAccessLocal);
  auto remote_region = Register(*b_dev_, remote, kAccessRemoteRead | kAccessRemoteWrite);
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
                  ? link_.a->PostWrite(wr_id++, {src_region.get(), offset, n}, remote_slice)
                  : link_.a->PostRead(wr_id++, {back_region.get(), offset, n}, remote_slice);
          ASSERT_TRUE(posted.ok()) << posted.ToString();
          offset += n;
          ++in_flight;
        }
        for (const WorkCompletion& wc : WaitFor(*link_.a, 1)) {
          ASSERT_EQ(wc.code, Code::kOk) << wc.detail;
          moved += wc.byte_len;
          --in_flight;
        }
        if (HasFailure()) return;
      }
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

TEST_F(TcpTransport, EveryPostedRequestCompletesExactlyOnce) {
  std::vector<uint8_t> buf = Pattern(4096, 3);
  std::vector<uint8_t> open(4096, 0);
  std::vector<uint8_t> closed(4096, 0);
  auto region = Register(*a_dev_, buf, kAccessLocal);
  auto open_region = Register(*b_dev_, open, kAccessRemoteRead | kAccessRemoteWrite);
  auto closed_region = Register(*b_dev_, closed, kAccessLocal);
  std::map<uint64_t, int> posted;
  uint64_t last_id = 0;
  auto next = [&] {
    posted[++last_id] = 0;
    return last_id;
  };
  uint32_t open_key = open_region->rkey();
  uint32_t closed_key = closed_region->rkey();
  size_t expected = 0;
  std::array<WorkCompletion, 64> out;
  auto reap = [&] {
    for (Connection* c : {link_.a.get(), link_.b.get()}) {
      size_t n = c->Poll(out);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(posted.contains(out[i].wr_id)) << out[i].wr_id;
        ++posted[out[i].wr_id];
        --expected;
      }
    }
  };
  for (uint64_t round = 0; round < 40; ++round) {
    uint64_t off = round * 64;
    LocalSlice slice{region.get(), off, 64};
    ASSERT_TRUE(link_.a->PostWrite(next(), slice, {off, open_key}).ok());
    ASSERT_TRUE(link_.a->PostRead(next(), slice, {off, closed_key}).ok());  // denied
    ASSERT_TRUE(link_.a->PostWrite(next(), slice, {4090, open_key}).ok());  // out of range
    ASSERT_TRUE(link_.a->PostSend(next(), {region.get(), off, 48}).ok());   // waits
    ASSERT_TRUE(
        link_.b->PostRecv(next(), {open_region.get(), off, round % 2 == 0 ? 64u : 32u}).ok());
    expected += 5;
    if (round % 3 == 0) reap();
  }
  auto deadline = steady_clock::now() + kWait;
  while (expected > 0 && steady_clock::now() < deadline) {
    reap();
    std::this_thread::sleep_for(milliseconds(1));
  }
  for (const auto& [wr_id, seen] : posted) EXPECT_EQ(seen, 1) << "wr_id " << wr_id;
  EXPECT_EQ(link_.a->outstanding(), 0u);
  EXPECT_EQ(link_.b->outstanding(), 0u);
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
