// The loop transport's own behaviour: its default caps, how its endpoints
// pair by name, a synchronous Poll that runs the work, device profiles
// forced onto it, and what a destroyed peer leaves behind. What every
// transport must do is the conformance suite (transport_conformance.hpp),
// instantiated here for loop.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "driver/loop/loop_transport.hpp"
#include "driver/profiles.hpp"
#include "driver/transport.hpp"
#include "tests/unit/transport_conformance.hpp"

namespace mcdma::driver::loop {
namespace {

using conformance::Bytes;
using conformance::kMiB;
using conformance::Link;
using conformance::Pattern;
using conformance::Register;
using conformance::TransportConformance;

class LoopFactory final : public conformance::TransportFactory {
 public:
  std::string Name() const override { return "loop"; }
  Caps DefaultCaps() const override { return DefaultLoopCaps(); }
  Result<std::unique_ptr<Device>> MakeDevice(const Caps* caps) override {
    return CreateLoopDevice(caps);
  }
  bool OneDevice() const override { return true; }
  Link Connect(Device& a, Device& b) override { return conformance::ConnectInTurn(a, b); }
  std::string Lacks(conformance::Feature feature) const override {
    if (feature == conformance::Feature::kNotifies)
      return "loop does all its work inside Poll and never notifies";
    return {};
  }
};

INSTANTIATE_TEST_SUITE_P(Loop, TransportConformance,
                         ::testing::Values(std::make_shared<LoopFactory>()),
                         conformance::FactoryName);

std::unique_ptr<Device> MakeDevice(const Caps* caps = nullptr) {
  auto device = CreateLoopDevice(caps);
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return device.ok() ? std::move(device).value() : nullptr;
}

Link Connect(Device& device) { return conformance::ConnectInTurn(device, device); }

// Polls once and returns what was reaped: over loop, Poll runs the work.
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

using LoopTransport = conformance::LinkedRig<LoopFactory>;

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

TEST_F(LoopTransport, RegionDestroyedWhileQueuedIsNotTouched) {
  // Against the contract, but a NIC would report a protection error rather
  // than write freed memory; so does loop.
  std::vector<uint8_t> local(32, 0);
  std::vector<uint8_t> remote = Pattern(32, 2);
  auto local_region = Register(*rig_.a_dev, local, kAccessLocal);
  auto remote_region = Register(*rig_.a_dev, remote, kAccessRemoteRead);
  ASSERT_TRUE(
      rig_.link.a->PostRead(1, {local_region.get(), 0, 32}, {0, remote_region->rkey()}).ok());
  local_region.reset();
  WorkCompletion wc = PollOne(*rig_.link.a);
  EXPECT_EQ(wc.code, Code::kPermissionDenied);
  EXPECT_EQ(local, std::vector<uint8_t>(32, 0));
}

TEST(LoopLimits, ForcedStricterCapsAreEnforced) {
  // apple-tb5 as its profile describes it: SEND/RECV only, 0xfa0000-byte
  // registrations, at most 100 of them.
  Caps tb5 = ToCaps(*FindVerbsProfile("apple-tb5"), "verbs");
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
  auto region = Register(*rig_.a_dev, buf, kAccessRemoteWrite);
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(rig_.link.a->PostWrite(i, {region.get(), 0, 8}, {32, region->rkey()}).ok());
  }
  std::array<WorkCompletion, 2> out;
  std::vector<uint64_t> ids;
  for (size_t expect : {2u, 2u, 1u, 0u}) {
    size_t n = rig_.link.a->Poll(out);
    ASSERT_EQ(n, expect);
    for (size_t i = 0; i < n; ++i) ids.push_back(out[i].wr_id);
  }
  EXPECT_EQ(ids, (std::vector<uint64_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace mcdma::driver::loop
