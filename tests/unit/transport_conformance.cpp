// The conformance suite's helpers and fixture, and its registration and
// one-sided tests (see transport_conformance.hpp).
#include "tests/unit/transport_conformance.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <span>
#include <thread>
#include <utility>

namespace mcdma::driver::conformance {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

Link ConnectInTurn(Device& a, Device& b) {
  auto ea = a.CreateEndpoint();
  auto eb = b.CreateEndpoint();
  EXPECT_TRUE(ea.ok() && eb.ok());
  if (!ea.ok() || !eb.ok()) return {};
  std::string info_a = (*ea)->LocalInfo();
  std::string info_b = (*eb)->LocalInfo();
  auto ca = (*ea)->Connect(info_b);
  auto cb = (*eb)->Connect(info_a);
  EXPECT_TRUE(ca.ok()) << ca.status().ToString();
  EXPECT_TRUE(cb.ok()) << cb.status().ToString();
  if (!ca.ok() || !cb.ok()) return {};
  return Link{std::move(ca).value(), std::move(cb).value()};
}

Link ConnectTogether(Device& a, Device& b) {
  return ConnectEndpoints(a.CreateEndpoint(), b.CreateEndpoint());
}

Link ConnectEndpoints(Result<std::unique_ptr<Endpoint>> ea, Result<std::unique_ptr<Endpoint>> eb) {
  EXPECT_TRUE(ea.ok()) << ea.status().ToString();
  EXPECT_TRUE(eb.ok()) << eb.status().ToString();
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

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 12));
  return v;
}

std::byte* Bytes(std::vector<uint8_t>& v) { return reinterpret_cast<std::byte*>(v.data()); }

std::unique_ptr<MemoryRegion> Register(Device& device, std::vector<uint8_t>& buf, uint32_t access) {
  auto region = device.Register(Bytes(buf), buf.size(), access);
  EXPECT_TRUE(region.ok()) << region.status().ToString();
  return region.ok() ? std::move(region).value() : nullptr;
}

std::vector<WorkCompletion> WaitFor(Connection& c, size_t n, steady_clock::duration limit) {
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

void ExpectQuiet(Connection& c, milliseconds how_long) {
  auto deadline = steady_clock::now() + how_long;
  std::array<WorkCompletion, 8> out;
  while (steady_clock::now() < deadline) {
    size_t n = c.Poll(out);
    ASSERT_EQ(n, 0u) << "unexpected completion wr_id " << out[0].wr_id << ": "
                     << CodeName(out[0].code) << " " << out[0].detail;
    std::this_thread::sleep_for(milliseconds(2));
  }
}

std::string FactoryName(const ::testing::TestParamInfo<FactoryPtr>& info) {
  return info.param->Name();
}

Rig MakeRig(TransportFactory& factory, const Caps* caps) {
  Rig rig;
  auto a = factory.MakeDevice(caps);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (!a.ok()) return rig;
  rig.a_dev = std::move(a).value();
  if (!factory.OneDevice()) {
    auto b = factory.MakeDevice(caps);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return rig;
    rig.b_dev = std::move(b).value();
  }
  rig.link = factory.Connect(*rig.a_dev, rig.b());
  return rig;
}

void TransportConformance::SetUp() {
  rig_ = MakeRig(factory(), nullptr);
  ASSERT_NE(rig_.link.a, nullptr);
  ASSERT_NE(rig_.link.b, nullptr);
}

std::unique_ptr<Device> TransportConformance::NewDevice(const Caps* caps) const {
  auto device = factory().MakeDevice(caps);
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return device.ok() ? std::move(device).value() : nullptr;
}

Connection* TransportConformance::PeerToPoll(const Connection& c) const {
  if (!factory().PollsPeerToProgress()) return nullptr;
  if (&c == rig_.link.a.get()) return rig_.link.b.get();
  if (&c == rig_.link.b.get()) return rig_.link.a.get();
  return nullptr;
}

size_t TransportConformance::PollPeer(Connection& peer) {
  std::array<WorkCompletion, 64> out;
  size_t n = peer.Poll(out);
  for (size_t i = 0; i < n; ++i) kept_[&peer].push_back(std::move(out[i]));
  return n;
}

std::vector<WorkCompletion> TransportConformance::WaitFor(Connection& c, size_t n,
                                                          steady_clock::duration limit) {
  Connection* peer = PeerToPoll(c);
  if (peer == nullptr) return conformance::WaitFor(c, n, limit);
  std::vector<WorkCompletion> got;
  std::deque<WorkCompletion>& kept = kept_[&c];
  auto deadline = steady_clock::now() + limit;
  std::array<WorkCompletion, 64> out;
  for (;;) {
    while (got.size() < n && !kept.empty()) {
      got.push_back(std::move(kept.front()));
      kept.pop_front();
    }
    if (got.size() >= n || steady_clock::now() >= deadline) break;
    size_t k = c.Poll(std::span(out).first(std::min(out.size(), n - got.size())));
    for (size_t i = 0; i < k; ++i) got.push_back(std::move(out[i]));
    if (k + PollPeer(*peer) == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(got.size(), n) << "timed out waiting for completions";
  return got;
}

WorkCompletion TransportConformance::WaitOne(Connection& c) {
  auto wcs = WaitFor(c, 1);
  if (wcs.empty()) return WorkCompletion{.code = Code::kInternal, .detail = "none"};
  return wcs.front();
}

void TransportConformance::ExpectQuiet(Connection& c, milliseconds how_long) {
  Connection* peer = PeerToPoll(c);
  if (peer == nullptr) return conformance::ExpectQuiet(c, how_long);
  ASSERT_TRUE(kept_[&c].empty()) << "unexpected completion wr_id " << kept_[&c].front().wr_id;
  auto deadline = steady_clock::now() + how_long;
  std::array<WorkCompletion, 8> out;
  while (steady_clock::now() < deadline) {
    size_t n = c.Poll(out);
    ASSERT_EQ(n, 0u) << "unexpected completion wr_id " << out[0].wr_id << ": "
                     << CodeName(out[0].code) << " " << out[0].detail;
    PollPeer(*peer);
    std::this_thread::sleep_for(milliseconds(2));
  }
}

namespace {

// ----------------------------------------------------------- registration --

TEST_P(TransportConformance, RegisterAssignsDistinctNonzeroKeys) {
  std::vector<uint8_t> buf(4096);
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  std::set<uint32_t> keys;
  std::set<uint32_t> lkeys;
  std::set<uint32_t> rkeys;
  for (int i = 0; i < 64; ++i) {
    regions.push_back(Register(a_dev(), buf, kAccessRemoteRead));
    ASSERT_NE(regions.back(), nullptr);
    EXPECT_NE(regions.back()->lkey(), 0u);
    EXPECT_NE(regions.back()->rkey(), 0u);
    keys.insert(regions.back()->lkey());
    keys.insert(regions.back()->rkey());
    lkeys.insert(regions.back()->lkey());
    rkeys.insert(regions.back()->rkey());
  }
  EXPECT_EQ(lkeys.size(), 64u);
  EXPECT_EQ(rkeys.size(), 64u);
  if (factory().Lacks(Feature::kDistinctKeys).empty()) EXPECT_EQ(keys.size(), 128u);
  EXPECT_EQ(regions[0]->addr(), Bytes(buf));
  EXPECT_EQ(regions[0]->access(), kAccessRemoteRead);
}

TEST_P(TransportConformance, RegisterReportsItsRangeAndRemoteAddresses) {
  std::vector<uint8_t> buf(4096);
  auto region = Register(a_dev(), buf, kAccessRemoteRead | kAccessRemoteWrite);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(region->addr(), Bytes(buf));
  EXPECT_EQ(region->length(), 4096u);
  EXPECT_EQ(region->access(), kAccessRemoteRead | kAccessRemoteWrite);
  EXPECT_EQ(region->RemoteAddr(123) - region->RemoteAddr(0), 123u);
  if (factory().Lacks(Feature::kOffsetAddresses).empty()) {
    EXPECT_EQ(region->RemoteAddr(0), 0u);
    EXPECT_EQ(region->RemoteAddr(123), 123u);
  }
}

TEST_P(TransportConformance, RegisterRejectsEmptyRangesAndUnknownAccessBits) {
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(a_dev().Register(nullptr, 64, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_EQ(a_dev().Register(Bytes(buf), 0, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_EQ(a_dev().Register(Bytes(buf), 64, 1u << 7).status().code(), Code::kInvalid);
}

TEST_P(TransportConformance, SelfConnectIsInvalid) {
  MCDMA_REQUIRE_FEATURE(Feature::kSelfConnectRefused);
  auto ep = a_dev().CreateEndpoint();
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ((*ep)->Connect((*ep)->LocalInfo()).status().code(), Code::kInvalid);
}

// -------------------------------------------------------------- one-sided --

TEST_P(TransportConformance, WriteCopiesBytesIntoRemoteRegion) {
  std::vector<uint8_t> src = Pattern(256, 1);
  std::vector<uint8_t> dst(256, 0xee);
  auto src_region = Register(a_dev(), src, kAccessLocal);
  auto dst_region = Register(b_dev(), dst, kAccessRemoteWrite);
  ASSERT_TRUE(a().PostWrite(7, {src_region.get(), 10, 100},
                            {dst_region->RemoteAddr(30), dst_region->rkey()})
                  .ok());
  EXPECT_EQ(a().outstanding(), 1u);
  WorkCompletion wc = WaitOne(a());
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.op, WorkOp::kWrite);
  EXPECT_EQ(wc.code, Code::kOk) << wc.detail;
  EXPECT_EQ(wc.byte_len, 100u);
  EXPECT_EQ(a().outstanding(), 0u);
  for (size_t i = 0; i < dst.size(); ++i) {
    uint8_t want = (i >= 30 && i < 130) ? src[i - 30 + 10] : 0xee;
    ASSERT_EQ(dst[i], want) << "byte " << i;
  }
  ExpectQuiet(b());  // one-sided: the target side sees nothing
}

TEST_P(TransportConformance, ReadCopiesBytesFromRemoteRegion) {
  // A small READ into the start of a region.
  std::vector<uint8_t> remote = Pattern(512, 9);
  std::vector<uint8_t> local(512, 0);
  // B reads from A: the other direction from the tests around it.
  auto remote_region = Register(a_dev(), remote, kAccessRemoteRead);
  auto local_region = Register(b_dev(), local, kAccessLocal);
  ASSERT_TRUE(b().PostRead(8, {local_region.get(), 0, 300},
                           {remote_region->RemoteAddr(212), remote_region->rkey()})
                  .ok());
  WorkCompletion wc = WaitOne(b());
  EXPECT_EQ(wc.op, WorkOp::kRead);
  EXPECT_EQ(wc.code, Code::kOk) << wc.detail;
  EXPECT_EQ(wc.byte_len, 300u);
  EXPECT_EQ(std::vector<uint8_t>(local.begin(), local.begin() + 300),
            std::vector<uint8_t>(remote.begin() + 212, remote.end()));
  EXPECT_EQ(local[300], 0);
}

TEST_P(TransportConformance, ReadCopiesManyMiBFromRemoteRegion) {
  // A large READ at uneven offsets, as large as the device allows up to 5 MiB.
  const Caps& caps = a().caps();
  const uint64_t length = std::min<uint64_t>(5 * kMiB + 77, caps.max_read_bytes);
  const uint64_t size = std::min<uint64_t>(8 * kMiB, caps.max_registration_bytes);
  ASSERT_LE(length + 1001, size) << "a registration too small for the READ";
  std::vector<uint8_t> remote = Pattern(std::min<uint64_t>(6 * kMiB + 123, size), 9);
  std::vector<uint8_t> local(size, 0);
  auto remote_region = Register(b_dev(), remote, kAccessRemoteRead);
  auto local_region = Register(a_dev(), local, kAccessLocal);
  ASSERT_TRUE(a().PostRead(8, {local_region.get(), 1000, length},
                           {remote_region->RemoteAddr(46), remote_region->rkey()})
                  .ok());
  WorkCompletion wc = WaitOne(a());
  EXPECT_EQ(wc.op, WorkOp::kRead);
  EXPECT_EQ(wc.code, Code::kOk) << wc.detail;
  EXPECT_EQ(wc.byte_len, length);
  EXPECT_TRUE(std::equal(remote.begin() + 46, remote.begin() + 46 + static_cast<ptrdiff_t>(length),
                         local.begin() + 1000));
  EXPECT_EQ(local[999], 0);
  EXPECT_EQ(local[1000 + length], 0);
}

TEST_P(TransportConformance, RejectsRemoteAccessWithoutPermission) {
  MCDMA_REQUIRE_FEATURE(Feature::kRemoteErrorKeepsUp);
  std::vector<uint8_t> local = Pattern(64, 1);
  std::vector<uint8_t> private_buf(64, 0x55);
  std::vector<uint8_t> read_only(64, 0x66);
  auto local_region = Register(a_dev(), local, kAccessLocal);
  auto private_region = Register(b_dev(), private_buf, kAccessLocal);
  auto read_only_region = Register(b_dev(), read_only, kAccessRemoteRead);
  LocalSlice slice{local_region.get(), 0, 64};

  RemoteSlice closed{private_region->RemoteAddr(0), private_region->rkey()};
  RemoteSlice read_only_slice{read_only_region->RemoteAddr(0), read_only_region->rkey()};
  ASSERT_TRUE(a().PostWrite(1, slice, closed).ok());
  ASSERT_TRUE(a().PostRead(2, slice, closed).ok());
  ASSERT_TRUE(a().PostWrite(3, slice, read_only_slice).ok());
  ASSERT_TRUE(a().PostRead(4, slice, read_only_slice).ok());
  auto wcs = WaitFor(a(), 4);
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
  ASSERT_TRUE(a().PostRead(5, slice, read_only_slice).ok());
  EXPECT_EQ(WaitOne(a()).code, Code::kOk);
}

TEST_P(TransportConformance, ReadPastRegionEndCompletesOutOfRange) {
  MCDMA_REQUIRE_FEATURE(Feature::kRemoteErrorKeepsUp);
  std::vector<uint8_t> remote(128, 0x11);
  std::vector<uint8_t> local(128, 0);
  auto remote_region = Register(b_dev(), remote, kAccessRemoteRead | kAccessRemoteWrite);
  auto local_region = Register(a_dev(), local, kAccessLocal);
  uint32_t rkey = remote_region->rkey();
  uint64_t base = remote_region->RemoteAddr(0);
  ASSERT_TRUE(a().PostRead(1, {local_region.get(), 0, 64}, {base + 65, rkey}).ok());
  ASSERT_TRUE(a().PostRead(2, {local_region.get(), 0, 1}, {base + 128, rkey}).ok());
  ASSERT_TRUE(
      a().PostRead(3, {local_region.get(), 0, 8}, {std::numeric_limits<uint64_t>::max(), rkey})
          .ok());
  ASSERT_TRUE(a().PostWrite(4, {local_region.get(), 0, 64}, {base + 100, rkey}).ok());
  ASSERT_TRUE(a().PostRead(5, {local_region.get(), 0, 64}, {base + 64, rkey}).ok());
  auto wcs = WaitFor(a(), 5);
  ASSERT_EQ(wcs.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wcs[i].code, Code::kOutOfRange) << "request " << i + 1;
  EXPECT_EQ(wcs[4].code, Code::kOk) << "a read ending exactly at the region end is allowed";
  EXPECT_EQ(remote, std::vector<uint8_t>(128, 0x11));
  EXPECT_EQ(std::vector<uint8_t>(local.begin(), local.begin() + 64),
            std::vector<uint8_t>(64, 0x11));
  EXPECT_EQ(std::vector<uint8_t>(local.begin() + 64, local.end()), std::vector<uint8_t>(64, 0));
}

TEST_P(TransportConformance, UnknownRkeyIsRefused) {
  MCDMA_REQUIRE_FEATURE(Feature::kRemoteErrorKeepsUp);
  std::vector<uint8_t> local(32);
  std::vector<uint8_t> remote(32, 0x77);
  auto local_region = Register(a_dev(), local, kAccessRemoteRead | kAccessRemoteWrite);
  auto remote_region = Register(b_dev(), remote, kAccessRemoteRead | kAccessRemoteWrite);
  uint32_t bogus = remote_region->rkey() + 1;
  while (bogus == remote_region->lkey() || bogus == local_region->lkey() ||
         bogus == local_region->rkey()) {
    ++bogus;
  }
  const uint64_t base = remote_region->RemoteAddr(0);
  ASSERT_TRUE(a().PostWrite(1, {local_region.get(), 0, 8}, {base, 0}).ok());
  ASSERT_TRUE(a().PostWrite(2, {local_region.get(), 0, 8}, {base, bogus}).ok());
  size_t posted = 2;
  if (factory().Lacks(Feature::kDistinctKeys).empty()) {
    // An lkey is not an rkey.
    ASSERT_TRUE(a().PostRead(3, {local_region.get(), 0, 8}, {base, remote_region->lkey()}).ok());
    ++posted;
  }
  if (!factory().OneDevice()) {
    // A's own rkey means nothing on B.
    ASSERT_TRUE(a().PostRead(4, {local_region.get(), 0, 8}, {base, local_region->rkey()}).ok());
    ++posted;
  }
  auto wcs = WaitFor(a(), posted);
  ASSERT_EQ(wcs.size(), posted);
  for (const auto& wc : wcs) EXPECT_EQ(wc.code, Code::kPermissionDenied) << wc.wr_id;
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0x77));
}

TEST_P(TransportConformance, DeregisteredRkeyIsRefused) {
  MCDMA_REQUIRE_FEATURE(Feature::kRemoteErrorKeepsUp);
  std::vector<uint8_t> local = Pattern(32, 4);
  std::vector<uint8_t> remote(32, 0);
  auto local_region = Register(a_dev(), local, kAccessLocal);
  auto remote_region = Register(b_dev(), remote, kAccessRemoteWrite | kAccessRemoteRead);
  RemoteSlice stale{remote_region->RemoteAddr(0), remote_region->rkey()};
  remote_region.reset();
  ASSERT_TRUE(a().PostWrite(1, {local_region.get(), 0, 32}, stale).ok());
  ASSERT_TRUE(a().PostRead(2, {local_region.get(), 0, 32}, stale).ok());
  auto wcs = WaitFor(a(), 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].code, Code::kPermissionDenied);
  EXPECT_EQ(wcs[1].code, Code::kPermissionDenied);
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0));
  EXPECT_EQ(local, Pattern(32, 4));
}

TEST_P(TransportConformance, RejectsLocalSliceOutsideRegionOrDevice) {
  std::vector<uint8_t> buf(100);
  std::vector<uint8_t> target(100);
  std::vector<uint8_t> elsewhere(64);
  auto region = Register(a_dev(), buf, kAccessRemoteWrite | kAccessRemoteRead);
  auto target_region = Register(b_dev(), target, kAccessRemoteWrite | kAccessRemoteRead);
  auto other = NewDevice();
  ASSERT_NE(other, nullptr);
  auto foreign = Register(*other, elsewhere, kAccessLocal);
  RemoteSlice remote{target_region->RemoteAddr(0), target_region->rkey()};
  EXPECT_EQ(a().PostSend(1, {region.get(), 90, 11}).code(), Code::kOutOfRange);
  EXPECT_EQ(a().PostRecv(2, {region.get(), 101, 0}).code(), Code::kOutOfRange);
  EXPECT_EQ(a().PostWrite(3, {region.get(), 1, 100}, remote).code(), Code::kOutOfRange);
  EXPECT_EQ(
      a().PostRead(4, {region.get(), 8, std::numeric_limits<uint64_t>::max() - 4}, remote).code(),
      Code::kOutOfRange);
  EXPECT_EQ(a().PostSend(5, {nullptr, 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(a().PostSend(6, {foreign.get(), 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(a().PostRecv(7, {foreign.get(), 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(a().outstanding(), 0u);
  ExpectQuiet(a(), std::chrono::milliseconds(20));
  EXPECT_TRUE(a().PostWrite(8, {region.get(), 100, 0}, remote).ok());
  EXPECT_EQ(WaitOne(a()).code, Code::kOk);
}

}  // namespace
}  // namespace mcdma::driver::conformance
