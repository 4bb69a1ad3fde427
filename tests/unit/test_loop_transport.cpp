// The loop transport: byte movement, the NIC-like checks (local at post time,
// remote at execution), queue limits, pairing and teardown.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "driver/loop/loop_transport.hpp"
#include "driver/transport.hpp"

namespace mcdma::driver::loop {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

std::byte* Bytes(std::vector<uint8_t>& v) { return reinterpret_cast<std::byte*>(v.data()); }

std::unique_ptr<Device> MakeDevice(const Caps* caps = nullptr) {
  auto device = CreateLoopDevice(caps);
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return device.ok() ? std::move(device).value() : nullptr;
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

Link Connect(Device& device) {
  auto ea = device.CreateEndpoint();
  auto eb = device.CreateEndpoint();
  EXPECT_TRUE(ea.ok() && eb.ok());
  std::string info_a = (*ea)->LocalInfo();
  std::string info_b = (*eb)->LocalInfo();
  auto ca = (*ea)->Connect(info_b);
  auto cb = (*eb)->Connect(info_a);
  EXPECT_TRUE(ca.ok()) << ca.status().ToString();
  EXPECT_TRUE(cb.ok()) << cb.status().ToString();
  return Link{std::move(ca).value(), std::move(cb).value()};
}

// Polls once and returns what was reaped.
std::vector<WorkCompletion> PollOnce(Connection& c) {
  std::array<WorkCompletion, 64> out;
  size_t n = c.Poll(out);
  return {out.begin(), out.begin() + static_cast<ptrdiff_t>(n)};
}

// One completion expected; returns it (or a kInternal placeholder).
WorkCompletion PollOne(Connection& c) {
  auto wcs = PollOnce(c);
  EXPECT_EQ(wcs.size(), 1u);
  if (wcs.empty()) return WorkCompletion{.code = Code::kInternal, .detail = "none"};
  return wcs.front();
}

class LoopTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = MakeDevice();
    ASSERT_NE(device_, nullptr);
    link_ = Connect(*device_);
    ASSERT_NE(link_.a, nullptr);
    ASSERT_NE(link_.b, nullptr);
  }

  std::unique_ptr<Device> device_;
  Link link_;
};

TEST(LoopCaps, DefaultsDescribeAPermissiveOneSidedLoop) {
  auto device = MakeDevice();
  ASSERT_NE(device, nullptr);
  const Caps& caps = device->caps();
  EXPECT_EQ(caps.name, "loop");
  EXPECT_EQ(caps.profile, "loop");
  EXPECT_TRUE(caps.one_sided);
  EXPECT_EQ(caps.max_outstanding, 256u);
  EXPECT_EQ(caps.max_outstanding_reads, 16u);
  EXPECT_EQ(caps.max_read_bytes, 1ULL << 30);
  EXPECT_EQ(caps.max_transfer_bytes, 1ULL << 30);
  EXPECT_EQ(caps.max_registration_bytes, 1ULL << 40);
  EXPECT_EQ(caps.max_registrations, 0u);
  EXPECT_EQ(caps.max_inline_bytes, 0u);
}

TEST(LoopCaps, CreateRejectsCapsNoWorkCouldPass) {
  Caps caps = DefaultLoopCaps();
  caps.max_outstanding = 0;
  EXPECT_EQ(CreateLoopDevice(&caps).status().code(), Code::kInvalid);
  caps = DefaultLoopCaps();
  caps.max_registration_bytes = 0;
  EXPECT_EQ(CreateLoopDevice(&caps).status().code(), Code::kInvalid);
  caps = DefaultLoopCaps();
  caps.profile.clear();
  EXPECT_EQ(CreateLoopDevice(&caps).status().code(), Code::kInvalid);
}

TEST(LoopRegister, AssignsDistinctNonzeroKeys) {
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
}

TEST(LoopRegister, RemoteAddrIsTheOffsetWithinTheRegion) {
  auto device = MakeDevice();
  std::vector<uint8_t> buf(4096);
  auto region = Register(*device, buf, kAccessRemoteRead | kAccessRemoteWrite);
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(region->addr(), Bytes(buf));
  EXPECT_EQ(region->length(), 4096u);
  EXPECT_EQ(region->access(), kAccessRemoteRead | kAccessRemoteWrite);
  EXPECT_EQ(region->RemoteAddr(0), 0u);
  EXPECT_EQ(region->RemoteAddr(123), 123u);
}

TEST(LoopRegister, RejectsRangeOverMaxRegistrationBytes) {
  Caps caps = DefaultLoopCaps();
  caps.max_registration_bytes = 4096;
  auto device = MakeDevice(&caps);
  std::vector<uint8_t> buf(4097);
  EXPECT_EQ(device->Register(Bytes(buf), 4097, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_TRUE(device->Register(Bytes(buf), 4096, kAccessLocal).ok());
}

TEST(LoopRegister, EnforcesMaxRegistrationsUntilOneIsReleased) {
  Caps caps = DefaultLoopCaps();
  caps.max_registrations = 2;
  auto device = MakeDevice(&caps);
  std::vector<uint8_t> buf(64);
  auto r1 = Register(*device, buf, kAccessLocal);
  auto r2 = Register(*device, buf, kAccessLocal);
  auto r3 = device->Register(Bytes(buf), buf.size(), kAccessLocal);
  EXPECT_EQ(r3.status().code(), Code::kNoMemory);
  r1.reset();
  EXPECT_TRUE(device->Register(Bytes(buf), buf.size(), kAccessLocal).ok());
}

TEST(LoopRegister, RejectsEmptyRangesAndUnknownAccessBits) {
  auto device = MakeDevice();
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(device->Register(nullptr, 64, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_EQ(device->Register(Bytes(buf), 0, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_EQ(device->Register(Bytes(buf), 64, 1u << 7).status().code(), Code::kInvalid);
}

TEST(LoopConnect, UnknownInfoIsNotFound) {
  auto device = MakeDevice();
  auto other = MakeDevice();
  auto ep = device->CreateEndpoint();
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ((*ep)->Connect("loop/none/1").status().code(), Code::kNotFound);

  // Info from another loop device names nothing here.
  auto local = device->CreateEndpoint();
  auto foreign = other->CreateEndpoint();
  ASSERT_TRUE(local.ok() && foreign.ok());
  EXPECT_EQ((*local)->Connect((*foreign)->LocalInfo()).status().code(), Code::kNotFound);
}

TEST(LoopConnect, ConnectConsumesTheEndpointEvenOnFailure) {
  auto device = MakeDevice();
  auto ea = device->CreateEndpoint();
  auto eb = device->CreateEndpoint();
  ASSERT_TRUE(ea.ok() && eb.ok());
  EXPECT_EQ((*ea)->Connect("bogus").status().code(), Code::kNotFound);
  EXPECT_EQ((*ea)->Connect((*eb)->LocalInfo()).status().code(), Code::kInvalid);
  // The consumed endpoint's name no longer resolves.
  EXPECT_EQ((*eb)->Connect((*ea)->LocalInfo()).status().code(), Code::kNotFound);
}

TEST(LoopConnect, DestroyedEndpointIsNotFound) {
  auto device = MakeDevice();
  auto ea = device->CreateEndpoint();
  auto eb = device->CreateEndpoint();
  ASSERT_TRUE(ea.ok() && eb.ok());
  std::string info_b = (*eb)->LocalInfo();
  eb.value().reset();
  EXPECT_EQ((*ea)->Connect(info_b).status().code(), Code::kNotFound);
}

TEST(LoopConnect, SelfConnectIsInvalid) {
  auto device = MakeDevice();
  auto ep = device->CreateEndpoint();
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ((*ep)->Connect((*ep)->LocalInfo()).status().code(), Code::kInvalid);
}

TEST(LoopConnect, EndpointPairedWithAnotherIsRefused) {
  auto device = MakeDevice();
  Link link = Connect(*device);
  auto ea = device->CreateEndpoint();
  auto eb = device->CreateEndpoint();
  auto ec = device->CreateEndpoint();
  ASSERT_TRUE(ea.ok() && eb.ok() && ec.ok());
  std::string info_a = (*ea)->LocalInfo();
  auto ca = (*ea)->Connect((*eb)->LocalInfo());
  ASSERT_TRUE(ca.ok());
  // A waits for B; C may not take B's place.
  EXPECT_EQ((*ec)->Connect(info_a).status().code(), Code::kInvalid);
}

TEST(LoopConnect, HalfConnectedSideAcceptsOnlyRecvs) {
  auto device = MakeDevice();
  std::vector<uint8_t> buf(64);
  auto region = Register(*device, buf, kAccessRemoteWrite | kAccessRemoteRead);
  auto ea = device->CreateEndpoint();
  auto eb = device->CreateEndpoint();
  ASSERT_TRUE(ea.ok() && eb.ok());
  std::string info_a = (*ea)->LocalInfo();
  auto ca = (*ea)->Connect((*eb)->LocalInfo());
  ASSERT_TRUE(ca.ok());
  LocalSlice slice{region.get(), 0, 16};
  RemoteSlice remote{region->RemoteAddr(32), region->rkey()};
  EXPECT_EQ((*ca)->PostSend(1, slice).code(), Code::kLinkDown);
  EXPECT_EQ((*ca)->PostWrite(2, slice, remote).code(), Code::kLinkDown);
  EXPECT_EQ((*ca)->PostRead(3, slice, remote).code(), Code::kLinkDown);
  ASSERT_TRUE((*ca)->PostRecv(4, slice).ok());

  // The second Connect completes the pair; the pre-posted RECV is used.
  auto cb = (*eb)->Connect(info_a);
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  std::vector<uint8_t> src = Pattern(16, 3);
  auto src_region = Register(*device, src, kAccessLocal);
  ASSERT_TRUE((*cb)->PostSend(5, {src_region.get(), 0, 16}).ok());
  WorkCompletion send = PollOne(**cb);
  EXPECT_EQ(send.code, Code::kOk) << send.detail;
  WorkCompletion recv = PollOne(**ca);
  EXPECT_EQ(recv.wr_id, 4u);
  EXPECT_EQ(recv.byte_len, 16u);
  EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.begin() + 16), src);
}

TEST_F(LoopTransport, WriteCopiesBytesIntoRemoteRegion) {
  std::vector<uint8_t> src = Pattern(256, 1);
  std::vector<uint8_t> dst(256, 0xee);
  auto src_region = Register(*device_, src, kAccessLocal);
  auto dst_region = Register(*device_, dst, kAccessRemoteWrite);
  ASSERT_TRUE(link_.a
                  ->PostWrite(7, {src_region.get(), 10, 100},
                              {dst_region->RemoteAddr(30), dst_region->rkey()})
                  .ok());
  EXPECT_EQ(link_.a->outstanding(), 1u);
  WorkCompletion wc = PollOne(*link_.a);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.op, WorkOp::kWrite);
  EXPECT_EQ(wc.code, Code::kOk) << wc.detail;
  EXPECT_EQ(wc.byte_len, 100u);
  EXPECT_EQ(link_.a->outstanding(), 0u);
  for (size_t i = 0; i < dst.size(); ++i) {
    uint8_t want = (i >= 30 && i < 130) ? src[i - 30 + 10] : 0xee;
    ASSERT_EQ(dst[i], want) << "byte " << i;
  }
}

TEST_F(LoopTransport, ReadCopiesBytesFromRemoteRegion) {
  std::vector<uint8_t> remote = Pattern(512, 9);
  std::vector<uint8_t> local(512, 0);
  auto remote_region = Register(*device_, remote, kAccessRemoteRead);
  auto local_region = Register(*device_, local, kAccessLocal);
  ASSERT_TRUE(link_.b
                  ->PostRead(8, {local_region.get(), 0, 300},
                             {remote_region->RemoteAddr(212), remote_region->rkey()})
                  .ok());
  WorkCompletion wc = PollOne(*link_.b);
  EXPECT_EQ(wc.op, WorkOp::kRead);
  EXPECT_EQ(wc.code, Code::kOk) << wc.detail;
  EXPECT_EQ(wc.byte_len, 300u);
  EXPECT_EQ(std::vector<uint8_t>(local.begin(), local.begin() + 300),
            std::vector<uint8_t>(remote.begin() + 212, remote.end()));
  EXPECT_EQ(local[300], 0);
}

TEST_F(LoopTransport, RejectsRemoteAccessWithoutPermission) {
  std::vector<uint8_t> local = Pattern(64, 1);
  std::vector<uint8_t> private_buf(64, 0x55);
  std::vector<uint8_t> read_only(64, 0x66);
  auto local_region = Register(*device_, local, kAccessLocal);
  auto private_region = Register(*device_, private_buf, kAccessLocal);
  auto read_only_region = Register(*device_, read_only, kAccessRemoteRead);
  LocalSlice slice{local_region.get(), 0, 64};

  ASSERT_TRUE(link_.a->PostWrite(1, slice, {0, private_region->rkey()}).ok());
  ASSERT_TRUE(link_.a->PostRead(2, slice, {0, private_region->rkey()}).ok());
  ASSERT_TRUE(link_.a->PostWrite(3, slice, {0, read_only_region->rkey()}).ok());
  ASSERT_TRUE(link_.a->PostRead(4, slice, {0, read_only_region->rkey()}).ok());
  auto wcs = PollOnce(*link_.a);
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
}

TEST_F(LoopTransport, ReadPastRegionEndCompletesOutOfRange) {
  std::vector<uint8_t> remote(128, 0x11);
  std::vector<uint8_t> local(128, 0);
  auto remote_region = Register(*device_, remote, kAccessRemoteRead | kAccessRemoteWrite);
  auto local_region = Register(*device_, local, kAccessLocal);
  uint32_t rkey = remote_region->rkey();
  ASSERT_TRUE(link_.a->PostRead(1, {local_region.get(), 0, 64}, {65, rkey}).ok());
  ASSERT_TRUE(link_.a->PostRead(2, {local_region.get(), 0, 1}, {128, rkey}).ok());
  ASSERT_TRUE(
      link_.a->PostRead(3, {local_region.get(), 0, 8}, {std::numeric_limits<uint64_t>::max(), rkey})
          .ok());
  ASSERT_TRUE(link_.a->PostWrite(4, {local_region.get(), 0, 64}, {100, rkey}).ok());
  ASSERT_TRUE(link_.a->PostRead(5, {local_region.get(), 0, 64}, {64, rkey}).ok());
  auto wcs = PollOnce(*link_.a);
  ASSERT_EQ(wcs.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wcs[i].code, Code::kOutOfRange) << "request " << i + 1;
  EXPECT_EQ(wcs[4].code, Code::kOk) << "a read ending exactly at the region end is allowed";
  EXPECT_EQ(remote, std::vector<uint8_t>(128, 0x11));
}

TEST_F(LoopTransport, UnknownRkeyIsRefused) {
  std::vector<uint8_t> local(32);
  auto local_region = Register(*device_, local, kAccessRemoteRead | kAccessRemoteWrite);
  uint32_t bogus = local_region->rkey() + 1;
  if (bogus == local_region->lkey()) ++bogus;
  ASSERT_TRUE(link_.a->PostWrite(1, {local_region.get(), 0, 8}, {0, 0}).ok());
  ASSERT_TRUE(link_.a->PostWrite(2, {local_region.get(), 0, 8}, {0, bogus}).ok());
  // An lkey is not an rkey.
  ASSERT_TRUE(link_.a->PostRead(3, {local_region.get(), 0, 8}, {0, local_region->lkey()}).ok());
  auto wcs = PollOnce(*link_.a);
  ASSERT_EQ(wcs.size(), 3u);
  for (const auto& wc : wcs) EXPECT_EQ(wc.code, Code::kPermissionDenied);
}

TEST_F(LoopTransport, DeregisteredRkeyIsRefused) {
  std::vector<uint8_t> local = Pattern(32, 4);
  std::vector<uint8_t> remote(32, 0);
  auto local_region = Register(*device_, local, kAccessLocal);
  auto remote_region = Register(*device_, remote, kAccessRemoteWrite | kAccessRemoteRead);
  RemoteSlice stale{remote_region->RemoteAddr(0), remote_region->rkey()};
  remote_region.reset();
  ASSERT_TRUE(link_.a->PostWrite(1, {local_region.get(), 0, 32}, stale).ok());
  WorkCompletion wc = PollOne(*link_.a);
  EXPECT_EQ(wc.code, Code::kPermissionDenied);
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0));
}

TEST_F(LoopTransport, RegionDestroyedWhileQueuedIsNotTouched) {
  // Against the contract, but a NIC would report a protection error rather
  // than write freed memory; so does loop.
  std::vector<uint8_t> local(32, 0);
  std::vector<uint8_t> remote = Pattern(32, 2);
  auto local_region = Register(*device_, local, kAccessLocal);
  auto remote_region = Register(*device_, remote, kAccessRemoteRead);
  ASSERT_TRUE(link_.a->PostRead(1, {local_region.get(), 0, 32}, {0, remote_region->rkey()}).ok());
  local_region.reset();
  WorkCompletion wc = PollOne(*link_.a);
  EXPECT_EQ(wc.code, Code::kPermissionDenied);
  EXPECT_EQ(local, std::vector<uint8_t>(32, 0));
}

TEST_F(LoopTransport, RejectsLocalSliceOutsideRegion) {
  std::vector<uint8_t> buf(100);
  auto region = Register(*device_, buf, kAccessRemoteWrite | kAccessRemoteRead);
  RemoteSlice remote{0, region->rkey()};
  EXPECT_EQ(link_.a->PostSend(1, {region.get(), 90, 11}).code(), Code::kOutOfRange);
  EXPECT_EQ(link_.a->PostRecv(2, {region.get(), 101, 0}).code(), Code::kOutOfRange);
  EXPECT_EQ(link_.a->PostWrite(3, {region.get(), 1, 100}, remote).code(), Code::kOutOfRange);
  EXPECT_EQ(
      link_.a->PostRead(4, {region.get(), 8, std::numeric_limits<uint64_t>::max() - 4}, remote)
          .code(),
      Code::kOutOfRange);
  EXPECT_EQ(link_.a->outstanding(), 0u);
  EXPECT_TRUE(PollOnce(*link_.a).empty());
  EXPECT_TRUE(link_.a->PostWrite(5, {region.get(), 100, 0}, remote).ok());
}

TEST_F(LoopTransport, RejectsLocalSliceWithoutRegionOfThisDevice) {
  auto other = MakeDevice();
  std::vector<uint8_t> buf(64);
  auto foreign = Register(*other, buf, kAccessLocal);
  EXPECT_EQ(link_.a->PostSend(1, {nullptr, 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(link_.a->PostSend(2, {foreign.get(), 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(link_.a->PostRecv(3, {foreign.get(), 0, 8}).code(), Code::kInvalid);
  EXPECT_EQ(link_.a->outstanding(), 0u);
}

TEST_F(LoopTransport, SendWaitsForPostedRecv) {
  std::vector<uint8_t> src = Pattern(200, 5);
  std::vector<uint8_t> dst(256, 0);
  auto src_region = Register(*device_, src, kAccessLocal);
  auto dst_region = Register(*device_, dst, kAccessLocal);
  ASSERT_TRUE(link_.a->PostSend(11, {src_region.get(), 0, 200}).ok());
  EXPECT_TRUE(PollOnce(*link_.a).empty()) << "no RECV posted: the SEND must wait";
  EXPECT_TRUE(PollOnce(*link_.a).empty());
  EXPECT_EQ(link_.a->outstanding(), 1u);

  ASSERT_TRUE(link_.b->PostRecv(22, {dst_region.get(), 0, 256}).ok());
  // The receiver's Poll progresses the waiting SEND.
  WorkCompletion recv = PollOne(*link_.b);
  EXPECT_EQ(recv.wr_id, 22u);
  EXPECT_EQ(recv.op, WorkOp::kRecv);
  EXPECT_EQ(recv.code, Code::kOk) << recv.detail;
  EXPECT_EQ(recv.byte_len, 200u);
  WorkCompletion send = PollOne(*link_.a);
  EXPECT_EQ(send.wr_id, 11u);
  EXPECT_EQ(send.op, WorkOp::kSend);
  EXPECT_EQ(send.code, Code::kOk);
  EXPECT_EQ(send.byte_len, 200u);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 200), src);
  EXPECT_EQ(dst[200], 0);
}

TEST_F(LoopTransport, SendConsumesOldestRecvFirst) {
  std::vector<uint8_t> src = Pattern(16, 1);
  std::vector<uint8_t> dst(48, 0);
  auto src_region = Register(*device_, src, kAccessLocal);
  auto dst_region = Register(*device_, dst, kAccessLocal);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(link_.b->PostRecv(100 + i, {dst_region.get(), 16 * i, 16}).ok());
  }
  ASSERT_TRUE(link_.a->PostSend(1, {src_region.get(), 0, 4}).ok());
  ASSERT_TRUE(link_.a->PostSend(2, {src_region.get(), 4, 12}).ok());
  EXPECT_EQ(PollOnce(*link_.a).size(), 2u);
  auto recvs = PollOnce(*link_.b);
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

TEST_F(LoopTransport, SendLargerThanRecvFailsBothOutOfRange) {
  std::vector<uint8_t> src = Pattern(64, 1);
  std::vector<uint8_t> dst(64, 0);
  auto src_region = Register(*device_, src, kAccessLocal);
  auto dst_region = Register(*device_, dst, kAccessLocal);
  ASSERT_TRUE(link_.b->PostRecv(2, {dst_region.get(), 0, 32}).ok());
  ASSERT_TRUE(link_.a->PostSend(1, {src_region.get(), 0, 33}).ok());
  WorkCompletion send = PollOne(*link_.a);
  WorkCompletion recv = PollOne(*link_.b);
  EXPECT_EQ(send.code, Code::kOutOfRange);
  EXPECT_EQ(recv.code, Code::kOutOfRange);
  EXPECT_EQ(recv.byte_len, 0u);
  EXPECT_EQ(dst, std::vector<uint8_t>(64, 0));
}

TEST_F(LoopTransport, WaitingSendHoldsBackLaterRequests) {
  std::vector<uint8_t> src = Pattern(32, 1);
  std::vector<uint8_t> remote(32, 0);
  std::vector<uint8_t> inbox(32, 0);
  auto src_region = Register(*device_, src, kAccessLocal);
  auto remote_region = Register(*device_, remote, kAccessRemoteWrite);
  auto inbox_region = Register(*device_, inbox, kAccessLocal);
  ASSERT_TRUE(link_.a->PostSend(1, {src_region.get(), 0, 8}).ok());
  ASSERT_TRUE(link_.a->PostWrite(2, {src_region.get(), 0, 32}, {0, remote_region->rkey()}).ok());
  EXPECT_TRUE(PollOnce(*link_.a).empty());
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0)) << "the WRITE ran ahead of the waiting SEND";

  ASSERT_TRUE(link_.b->PostRecv(3, {inbox_region.get(), 0, 32}).ok());
  auto wcs = PollOnce(*link_.a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(remote, src);
}

TEST(LoopLimits, EnforcesMaxOutstanding) {
  Caps caps = DefaultLoopCaps();
  caps.max_outstanding = 4;
  auto device = MakeDevice(&caps);
  Link link = Connect(*device);
  std::vector<uint8_t> buf(64);
  auto region = Register(*device, buf, kAccessRemoteWrite);
  LocalSlice slice{region.get(), 0, 8};
  RemoteSlice remote{32, region->rkey()};
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(link.a->PostWrite(i, slice, remote).ok());
  EXPECT_EQ(link.a->PostWrite(4, slice, remote).code(), Code::kBusy);
  EXPECT_EQ(link.a->PostSend(5, slice).code(), Code::kBusy);
  // The receive queue is a queue of its own.
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(link.a->PostRecv(10 + i, slice).ok());
  EXPECT_EQ(link.a->PostRecv(14, slice).code(), Code::kBusy);
  EXPECT_EQ(link.a->outstanding(), 8u);

  // Executed but not reaped still counts; reaping frees the slots.
  std::array<WorkCompletion, 2> two;
  ASSERT_EQ(link.a->Poll(two), 2u);
  ASSERT_TRUE(link.a->PostWrite(6, slice, remote).ok());
  ASSERT_TRUE(link.a->PostWrite(7, slice, remote).ok());
  EXPECT_EQ(link.a->PostWrite(8, slice, remote).code(), Code::kBusy);
}

TEST(LoopLimits, EnforcesMaxOutstandingReads) {
  Caps caps = DefaultLoopCaps();
  caps.max_outstanding_reads = 1;
  auto device = MakeDevice(&caps);
  Link link = Connect(*device);
  std::vector<uint8_t> buf(64);
  auto region = Register(*device, buf, kAccessRemoteRead);
  LocalSlice slice{region.get(), 0, 8};
  RemoteSlice remote{32, region->rkey()};
  ASSERT_TRUE(link.a->PostRead(1, slice, remote).ok());
  EXPECT_EQ(link.a->PostRead(2, slice, remote).code(), Code::kBusy);
  EXPECT_TRUE(link.a->PostWrite(3, slice, {32, region->rkey()}).ok()) << "WRITEs are not READs";
  auto wcs = PollOnce(*link.a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_TRUE(link.a->PostRead(4, slice, remote).ok());
}

TEST(LoopLimits, EnforcesMaxTransferAndReadBytes) {
  Caps caps = DefaultLoopCaps();
  caps.max_transfer_bytes = 1024;
  caps.max_read_bytes = 512;
  auto device = MakeDevice(&caps);
  Link link = Connect(*device);
  std::vector<uint8_t> buf(4096);
  auto region = Register(*device, buf, kAccessRemoteRead | kAccessRemoteWrite);
  RemoteSlice remote{2048, region->rkey()};
  EXPECT_EQ(link.a->PostWrite(1, {region.get(), 0, 1025}, remote).code(), Code::kInvalid);
  EXPECT_EQ(link.a->PostSend(2, {region.get(), 0, 1025}).code(), Code::kInvalid);
  EXPECT_EQ(link.a->PostRead(3, {region.get(), 0, 513}, remote).code(), Code::kInvalid);
  EXPECT_TRUE(link.a->PostWrite(4, {region.get(), 0, 1024}, remote).ok());
  EXPECT_TRUE(link.a->PostRead(5, {region.get(), 0, 512}, remote).ok());
  EXPECT_EQ(PollOnce(*link.a).size(), 2u);
}

TEST(LoopLimits, ForcedStricterCapsAreEnforced) {
  // apple-tb5 as its profile describes it: SEND/RECV only, 0xfa0000-byte
  // registrations, at most 100 of them.
  Caps tb5{.name = "verbs",
           .profile = "apple-tb5",
           .one_sided = false,
           .max_outstanding = 4095,
           .max_outstanding_reads = 0,
           .max_read_bytes = 0,
           .max_transfer_bytes = 0xfa0000,
           .max_registration_bytes = 0xfa0000,
           .max_registrations = 100,
           .max_inline_bytes = 0};
  auto device = MakeDevice(&tb5);
  ASSERT_NE(device, nullptr);
  EXPECT_EQ(device->caps().name, "loop") << "the transport is reported, not the forced name";
  EXPECT_EQ(device->caps().profile, "apple-tb5");
  EXPECT_EQ(device->caps().max_registrations, 100u);

  std::vector<uint8_t> big(0xfa0000 + 1);
  EXPECT_EQ(device->Register(Bytes(big), big.size(), kAccessLocal).status().code(), Code::kInvalid);
  big.pop_back();
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.reserve(100);
  for (int i = 0; i < 100; ++i) regions.push_back(Register(*device, big, kAccessRemoteWrite));
  EXPECT_EQ(device->Register(Bytes(big), 64, kAccessLocal).status().code(), Code::kNoMemory);
  regions.resize(2);

  Link link = Connect(*device);
  LocalSlice slice{regions[0].get(), 0, 64};
  RemoteSlice remote{0, regions[1]->rkey()};
  EXPECT_EQ(link.a->PostWrite(1, slice, remote).code(), Code::kInvalid);
  EXPECT_EQ(link.a->PostRead(2, slice, remote).code(), Code::kInvalid);
  ASSERT_TRUE(link.b->PostRecv(3, {regions[1].get(), 0, 64}).ok());
  ASSERT_TRUE(link.a->PostSend(4, slice).ok());
  EXPECT_EQ(PollOne(*link.a).code, Code::kOk);

  // mcdma-cx5: 31 requests per queue, one READ of at most 2 MiB in flight.
  Caps cx5 = DefaultLoopCaps();
  cx5.profile = "mcdma-cx5";
  cx5.max_outstanding = 31;
  cx5.max_outstanding_reads = 1;
  cx5.max_read_bytes = 2 * kMiB;
  cx5.max_registration_bytes = 4 * kMiB;
  cx5.max_inline_bytes = 28;
  auto mac = MakeDevice(&cx5);
  Link mac_link = Connect(*mac);
  std::vector<uint8_t> buf(4 * kMiB);
  auto mac_region = Register(*mac, buf, kAccessRemoteRead | kAccessRemoteWrite);
  LocalSlice piece{mac_region.get(), 0, 2 * kMiB};
  RemoteSlice far{2 * kMiB, mac_region->rkey()};
  EXPECT_EQ(mac_link.a->PostRead(1, {mac_region.get(), 0, 2 * kMiB + 1}, far).code(),
            Code::kInvalid);
  ASSERT_TRUE(mac_link.a->PostRead(2, piece, far).ok());
  EXPECT_EQ(mac_link.a->PostRead(3, piece, far).code(), Code::kBusy);
  for (uint64_t i = 0; i < 30; ++i) {
    ASSERT_TRUE(mac_link.a->PostWrite(10 + i, {mac_region.get(), 0, 8}, far).ok());
  }
  EXPECT_EQ(mac_link.a->PostWrite(40, {mac_region.get(), 0, 8}, far).code(), Code::kBusy);
}

TEST(LoopTeardown, DestroyedPeerFailsWaitingAndLaterSendsWithLinkDown) {
  auto device = MakeDevice();
  Link link = Connect(*device);
  std::vector<uint8_t> buf = Pattern(64, 1);
  std::vector<uint8_t> target(64, 0);
  auto region = Register(*device, buf, kAccessLocal);
  auto target_region = Register(*device, target, kAccessRemoteWrite);
  ASSERT_TRUE(link.a->PostSend(1, {region.get(), 0, 8}).ok());
  ASSERT_TRUE(link.a->PostWrite(2, {region.get(), 0, 64}, {0, target_region->rkey()}).ok());
  ASSERT_TRUE(link.a->PostSend(3, {region.get(), 0, 8}).ok());
  EXPECT_TRUE(PollOnce(*link.a).empty());
  link.b.reset();

  auto wcs = PollOnce(*link.a);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].code, Code::kLinkDown);
  EXPECT_EQ(wcs[1].code, Code::kOk) << "queued one-sided work is not flushed";
  EXPECT_EQ(wcs[2].code, Code::kLinkDown);
  EXPECT_EQ(target, buf);
  EXPECT_EQ(link.a->outstanding(), 0u);
  EXPECT_EQ(link.a->PostSend(4, {region.get(), 0, 8}).code(), Code::kLinkDown);
  EXPECT_EQ(link.a->PostRecv(5, {region.get(), 0, 8}).code(), Code::kLinkDown);
  EXPECT_EQ(link.a->PostWrite(6, {region.get(), 0, 8}, {0, target_region->rkey()}).code(),
            Code::kLinkDown);
}

TEST_F(LoopTransport, PollReapsAtMostTheSpanSize) {
  std::vector<uint8_t> buf(64);
  auto region = Register(*device_, buf, kAccessRemoteWrite);
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(link_.a->PostWrite(i, {region.get(), 0, 8}, {32, region->rkey()}).ok());
  }
  std::array<WorkCompletion, 2> out;
  std::vector<uint64_t> ids;
  for (size_t expect : {2u, 2u, 1u, 0u}) {
    size_t n = link_.a->Poll(out);
    ASSERT_EQ(n, expect);
    for (size_t i = 0; i < n; ++i) ids.push_back(out[i].wr_id);
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
}

TEST_F(LoopTransport, EveryPostedRequestCompletesExactlyOnce) {
  std::vector<uint8_t> buf = Pattern(4096, 3);
  std::vector<uint8_t> open(4096, 0);
  std::vector<uint8_t> closed(4096, 0);
  auto region = Register(*device_, buf, kAccessLocal);
  auto open_region = Register(*device_, open, kAccessRemoteRead | kAccessRemoteWrite);
  auto closed_region = Register(*device_, closed, kAccessLocal);
  std::map<uint64_t, int> posted;  // wr_id -> completions seen
  uint64_t last_id = 0;
  auto next = [&] {
    posted[++last_id] = 0;
    return last_id;
  };
  uint32_t open_key = open_region->rkey();
  uint32_t closed_key = closed_region->rkey();
  auto reap = [&] {
    for (Connection* c : {link_.a.get(), link_.b.get()}) {
      for (const WorkCompletion& wc : PollOnce(*c)) {
        ASSERT_TRUE(posted.contains(wc.wr_id)) << wc.wr_id;
        ++posted[wc.wr_id];
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
    // Every other RECV is smaller than the SEND it meets.
    ASSERT_TRUE(
        link_.b->PostRecv(next(), {open_region.get(), off, round % 2 == 0 ? 64u : 32u}).ok());
    if (round % 3 == 0) reap();
  }
  for (int i = 0; i < 4; ++i) reap();
  for (const auto& [wr_id, seen] : posted) EXPECT_EQ(seen, 1) << "wr_id " << wr_id;
  EXPECT_EQ(link_.a->outstanding(), 0u);
  EXPECT_EQ(link_.b->outstanding(), 0u);
}

}  // namespace
}  // namespace mcdma::driver::loop
