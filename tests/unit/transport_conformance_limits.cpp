// The conformance suite's limit tests: Caps forced stricter than the
// transport needs are enforced at Register and post time, and queue room
// comes back only when completions are reaped (see
// transport_conformance.hpp).
#include <vector>

#include "tests/unit/transport_conformance.hpp"

namespace mcdma::driver::conformance {
namespace {

TEST_P(TransportConformance, RegisterRejectsRangeOverMaxRegistrationBytes) {
  MCDMA_REQUIRE_FEATURE(Feature::kForcedCaps);
  ASSERT_NO_FATAL_FAILURE(Relink([](Caps& caps) { caps.max_registration_bytes = 4096; }));
  std::vector<uint8_t> buf(4097);
  EXPECT_EQ(a_dev().Register(Bytes(buf), 4097, kAccessLocal).status().code(), Code::kInvalid);
  EXPECT_TRUE(a_dev().Register(Bytes(buf), 4096, kAccessLocal).ok());
}

TEST_P(TransportConformance, RegisterEnforcesMaxRegistrationsUntilOneIsReleased) {
  MCDMA_REQUIRE_FEATURE(Feature::kForcedCaps);
  ASSERT_NO_FATAL_FAILURE(Relink([](Caps& caps) { caps.max_registrations = 2; }));
  std::vector<uint8_t> buf(64);
  auto r1 = Register(a_dev(), buf, kAccessLocal);
  auto r2 = Register(a_dev(), buf, kAccessLocal);
  ASSERT_TRUE(r1 != nullptr && r2 != nullptr);
  EXPECT_EQ(a_dev().Register(Bytes(buf), buf.size(), kAccessLocal).status().code(),
            Code::kNoMemory);
  r1.reset();
  EXPECT_TRUE(a_dev().Register(Bytes(buf), buf.size(), kAccessLocal).ok());
}

TEST_P(TransportConformance, EnforcesMaxOutstandingWhileSendsWait) {
  MCDMA_REQUIRE_FEATURE(Feature::kForcedCaps);
  ASSERT_NO_FATAL_FAILURE(Relink([](Caps& caps) { caps.max_outstanding = 4; }));
  std::vector<uint8_t> buf(64);
  std::vector<uint8_t> remote(64);
  auto region = Register(a_dev(), buf, kAccessLocal);
  auto remote_region = Register(b_dev(), remote, kAccessRemoteWrite);
  LocalSlice slice{region.get(), 0, 8};
  // SENDs wait for RECVs that are not posted: they stay outstanding.
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(a().PostSend(i, slice).ok());
  EXPECT_EQ(a().PostSend(4, slice).code(), Code::kBusy);
  EXPECT_EQ(a().PostWrite(5, slice, {0, remote_region->rkey()}).code(), Code::kBusy);
  // The receive queue is a queue of its own.
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(a().PostRecv(10 + i, slice).ok());
  EXPECT_EQ(a().PostRecv(14, slice).code(), Code::kBusy);
  EXPECT_EQ(a().outstanding(), 8u);

  // Completed but not reaped still counts; reaping frees the slots.
  std::vector<uint8_t> inbox(64);
  auto inbox_region = Register(b_dev(), inbox, kAccessLocal);
  ASSERT_TRUE(b().PostRecv(20, {inbox_region.get(), 0, 8}).ok());
  ASSERT_TRUE(b().PostRecv(21, {inbox_region.get(), 8, 8}).ok());
  ASSERT_EQ(WaitFor(b(), 2).size(), 2u);
  EXPECT_EQ(a().PostSend(6, slice).code(), Code::kBusy) << "completed, not reaped";
  ASSERT_EQ(WaitFor(a(), 2).size(), 2u);
  ASSERT_TRUE(a().PostWrite(7, slice, {0, remote_region->rkey()}).ok());
  ASSERT_TRUE(a().PostWrite(8, slice, {8, remote_region->rkey()}).ok());
  EXPECT_EQ(a().PostWrite(9, slice, {0, remote_region->rkey()}).code(), Code::kBusy);
}

TEST_P(TransportConformance, EnforcesMaxOutstandingUntilReaped) {
  MCDMA_REQUIRE_FEATURE(Feature::kForcedCaps);
  ASSERT_NO_FATAL_FAILURE(Relink([](Caps& caps) { caps.max_outstanding = 4; }));
  std::vector<uint8_t> buf(64);
  std::vector<uint8_t> target(64);
  auto region = Register(a_dev(), buf, kAccessRemoteWrite);
  auto target_region = Register(b_dev(), target, kAccessRemoteWrite);
  LocalSlice slice{region.get(), 0, 8};
  RemoteSlice remote{32, target_region->rkey()};
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(a().PostWrite(i, slice, remote).ok());
  EXPECT_EQ(a().PostWrite(4, slice, remote).code(), Code::kBusy);
  EXPECT_EQ(a().PostSend(5, slice).code(), Code::kBusy);
  // The receive queue is a queue of its own.
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(a().PostRecv(10 + i, slice).ok());
  EXPECT_EQ(a().PostRecv(14, slice).code(), Code::kBusy);
  EXPECT_EQ(a().outstanding(), 8u);

  // Executed but not reaped still counts; reaping frees the slots.
  ASSERT_EQ(WaitFor(a(), 2).size(), 2u);
  ASSERT_TRUE(a().PostWrite(6, slice, remote).ok());
  ASSERT_TRUE(a().PostWrite(7, slice, remote).ok());
  EXPECT_EQ(a().PostWrite(8, slice, remote).code(), Code::kBusy);
}

TEST_P(TransportConformance, EnforcesMaxOutstandingReads) {
  MCDMA_REQUIRE_FEATURE(Feature::kForcedCaps);
  ASSERT_NO_FATAL_FAILURE(Relink([](Caps& caps) { caps.max_outstanding_reads = 1; }));
  std::vector<uint8_t> buf(64);
  std::vector<uint8_t> target(64);
  auto region = Register(a_dev(), buf, kAccessRemoteRead);
  auto target_region = Register(b_dev(), target, kAccessRemoteRead | kAccessRemoteWrite);
  LocalSlice slice{region.get(), 0, 8};
  RemoteSlice remote{32, target_region->rkey()};
  ASSERT_TRUE(a().PostRead(1, slice, remote).ok());
  EXPECT_EQ(a().PostRead(2, slice, remote).code(), Code::kBusy);
  EXPECT_TRUE(a().PostWrite(3, slice, remote).ok()) << "WRITEs are not READs";
  ASSERT_EQ(WaitFor(a(), 2).size(), 2u);
  EXPECT_TRUE(a().PostRead(4, slice, remote).ok());
  EXPECT_EQ(WaitOne(a()).code, Code::kOk);
}

TEST_P(TransportConformance, EnforcesMaxTransferAndReadBytes) {
  MCDMA_REQUIRE_FEATURE(Feature::kForcedCaps);
  ASSERT_NO_FATAL_FAILURE(Relink([](Caps& caps) {
    caps.max_transfer_bytes = 1024;
    caps.max_read_bytes = 512;
  }));
  std::vector<uint8_t> buf(4096);
  std::vector<uint8_t> target(4096);
  auto region = Register(a_dev(), buf, kAccessRemoteRead | kAccessRemoteWrite);
  auto target_region = Register(b_dev(), target, kAccessRemoteRead | kAccessRemoteWrite);
  RemoteSlice remote{2048, target_region->rkey()};
  EXPECT_EQ(a().PostWrite(1, {region.get(), 0, 1025}, remote).code(), Code::kInvalid);
  EXPECT_EQ(a().PostSend(2, {region.get(), 0, 1025}).code(), Code::kInvalid);
  EXPECT_EQ(a().PostRead(3, {region.get(), 0, 513}, remote).code(), Code::kInvalid);
  EXPECT_TRUE(a().PostWrite(4, {region.get(), 0, 1024}, remote).ok());
  EXPECT_TRUE(a().PostRead(5, {region.get(), 0, 512}, remote).ok());
  EXPECT_EQ(WaitFor(a(), 2).size(), 2u);
}

TEST_P(TransportConformance, EnforcesMaxOutstandingReadsAndSizesTogether) {
  MCDMA_REQUIRE_FEATURE(Feature::kForcedCaps);
  ASSERT_NO_FATAL_FAILURE(Relink([](Caps& caps) {
    caps.max_outstanding_reads = 1;
    caps.max_transfer_bytes = 1024;
    caps.max_read_bytes = 512;
  }));
  std::vector<uint8_t> buf(4096);
  std::vector<uint8_t> remote(4096);
  auto region = Register(a_dev(), buf, kAccessLocal);
  auto remote_region = Register(b_dev(), remote, kAccessRemoteRead | kAccessRemoteWrite);
  RemoteSlice far{2048, remote_region->rkey()};
  EXPECT_EQ(a().PostWrite(1, {region.get(), 0, 1025}, far).code(), Code::kInvalid);
  EXPECT_EQ(a().PostSend(2, {region.get(), 0, 1025}).code(), Code::kInvalid);
  EXPECT_EQ(a().PostRead(3, {region.get(), 0, 513}, far).code(), Code::kInvalid);
  ASSERT_TRUE(a().PostRead(4, {region.get(), 0, 512}, far).ok());
  EXPECT_EQ(a().PostRead(5, {region.get(), 0, 512}, far).code(), Code::kBusy);
  EXPECT_TRUE(a().PostWrite(6, {region.get(), 0, 1024}, far).ok()) << "WRITEs are not READs";
  ASSERT_EQ(WaitFor(a(), 2).size(), 2u);
  EXPECT_TRUE(a().PostRead(7, {region.get(), 0, 512}, far).ok());
  EXPECT_EQ(WaitOne(a()).code, Code::kOk);
}

}  // namespace
}  // namespace mcdma::driver::conformance
