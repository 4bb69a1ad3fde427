#include "engine/registry.hpp"

#include <gtest/gtest.h>

#include "driver/loop/loop_transport.hpp"
#include "fake_clock.hpp"

namespace mcdma::daemon {
namespace {
using std::chrono::milliseconds;
using testing::FakeClock;

std::shared_ptr<ExportRecord> MakeExport(uint64_t id, const std::string& name,
                                         std::optional<Clock::time_point> expires) {
  auto e = std::make_shared<ExportRecord>();
  e->id = id;
  e->name = name;
  e->expires = expires;
  return e;
}

TEST(Registry, ServiceNamesMapToIdsAndGoWithTheirService) {
  Registry r;
  r.AddService(ServiceRecord{5, "echo", 1});
  r.AddService(ServiceRecord{6, "kv", 2});
  EXPECT_TRUE(r.ServiceNameTaken("echo"));
  EXPECT_EQ(r.ServiceNamed("kv"), 6U);
  ASSERT_NE(r.FindService(5), nullptr);
  EXPECT_EQ(r.FindService(5)->session, 1U);
  EXPECT_EQ(r.services(), 2U);
  r.RemoveService(5);
  EXPECT_FALSE(r.ServiceNameTaken("echo"));
  EXPECT_FALSE(r.ServiceNamed("echo").has_value());
  EXPECT_EQ(r.FindService(5), nullptr);
  r.RemoveService(5);  // already gone: nothing happens
  EXPECT_EQ(r.services(), 1U);
}

TEST(Registry, ExportsExpireByTheClockNotBefore) {
  FakeClock clock;
  Registry r;
  r.AddExport(MakeExport(1, "a", clock.now() + milliseconds(100)));
  r.AddExport(MakeExport(2, "b", std::nullopt));
  r.AddExport(MakeExport(3, "c", clock.now() + milliseconds(50)));
  EXPECT_TRUE(r.ExpiredExports(clock.now()).empty());
  clock.Advance(milliseconds(50));
  EXPECT_EQ(r.ExpiredExports(clock.now()), (std::vector<std::string>{"c"}));
  clock.Advance(milliseconds(50));
  EXPECT_EQ(r.ExpiredExports(clock.now()), (std::vector<std::string>{"a", "c"}));
  auto taken = r.TakeExport("c");
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->id, 3U);
  EXPECT_EQ(r.FindExport("c"), nullptr);
  EXPECT_EQ(r.TakeExport("c"), nullptr);
  EXPECT_EQ(r.ExpiredExports(clock.now()), (std::vector<std::string>{"a"}));
  EXPECT_EQ(r.exports().size(), 2U);
}

TEST(Registry, BuffersAreFoundOnlyByTheirOwner) {
  auto device = driver::loop::CreateLoopDevice();
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto seg = ShmSegment::Create(ShmSegment::NewName('t'), 3 * PageSize(), getuid());
  ASSERT_TRUE(seg.ok()) << seg.status().ToString();
  auto b = std::make_shared<BufferRecord>();
  b->id = 9;
  b->owner = 4;
  b->segment = std::move(seg).value();
  EXPECT_TRUE(b->segment.Unlink().ok());
  auto reg = RegisterPieces(**device, b->segment.data(), b->size(), driver::kAccessLocal);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  b->reg(Transport::kLoop) = std::move(reg).value();
  EXPECT_FALSE(b->reg(Transport::kLoop).empty());
  EXPECT_TRUE(b->reg(Transport::kTcp).empty());
  Registry r;
  r.AddBuffer(b);
  EXPECT_EQ(r.OwnedBuffer(9, 4), b);
  EXPECT_EQ(r.OwnedBuffer(9, 5), nullptr);
  EXPECT_EQ(r.OwnedBuffer(8, 4), nullptr);
  EXPECT_EQ(r.RemoveBuffer(9), b);
  EXPECT_EQ(r.RemoveBuffer(9), nullptr);
  EXPECT_TRUE(r.buffers().empty());
}

TEST(Registry, UnmappedSegmentsGoStaleAfterTheAttachTimeout) {
  FakeClock clock;
  Registry r;
  r.TrackUnmapped("m1", {1, 0, clock.now()});
  clock.Advance(milliseconds(30));
  r.TrackUnmapped("b1", {1, 7, clock.now()});
  EXPECT_TRUE(r.StaleSegments(clock.now(), milliseconds(40)).empty());
  clock.Advance(milliseconds(10));
  EXPECT_EQ(r.StaleSegments(clock.now(), milliseconds(40)), (std::vector<std::string>{"m1"}));
  ASSERT_NE(r.FindUnmapped("b1"), nullptr);
  EXPECT_EQ(r.FindUnmapped("b1")->buffer_id, 7U);
  r.ForgetUnmapped("m1");
  EXPECT_EQ(r.FindUnmapped("m1"), nullptr);
  clock.Advance(milliseconds(30));
  EXPECT_EQ(r.StaleSegments(clock.now(), milliseconds(40)), (std::vector<std::string>{"b1"}));
}

TEST(Registry, ADrainEndsWithItsLastAckOrLinkOrAtItsDeadline) {
  FakeClock clock;
  Registry r;
  r.AddDrain(1, {{}, nullptr, {10, 11}, clock.now() + milliseconds(60)});
  r.AddDrain(2, {{}, nullptr, {10}, clock.now() + milliseconds(60)});
  r.AddDrain(3, {{}, nullptr, {12}, clock.now() + milliseconds(20)});
  r.AckDrain(1, 10);
  EXPECT_EQ(r.draining(), 3U);
  r.AckDrain(1, 99);  // a link it does not wait on
  EXPECT_EQ(r.draining(), 3U);
  r.LinkGone(11);  // export 1's last peer
  EXPECT_EQ(r.draining(), 2U);
  clock.Advance(milliseconds(20));
  auto expired = r.ExpireDrains(clock.now());
  ASSERT_EQ(expired.size(), 1U);
  EXPECT_EQ(expired[0], (std::pair<uint64_t, size_t>{3, 1}));
  r.AckDrain(2, 10);
  EXPECT_EQ(r.draining(), 0U);
  EXPECT_TRUE(r.ExpireDrains(clock.now() + milliseconds(100)).empty());
}

}  // namespace
}  // namespace mcdma::daemon
