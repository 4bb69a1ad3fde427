// The conformance suite's two-sided tests, and that every posted request
// completes exactly once (see transport_conformance.hpp).
#include <array>
#include <map>
#include <thread>

#include "tests/unit/transport_conformance.hpp"

namespace mcdma::driver::conformance {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST_P(TransportConformance, SendWaitsForPostedRecv) {
  MCDMA_REQUIRE_FEATURE(Feature::kSendMeetsRecv);
  std::vector<uint8_t> src = Pattern(200, 5);
  std::vector<uint8_t> dst(256, 0);
  auto src_region = Register(a_dev(), src, kAccessLocal);
  auto dst_region = Register(b_dev(), dst, kAccessLocal);
  ASSERT_TRUE(a().PostSend(11, {src_region.get(), 0, 200}).ok());
  ExpectQuiet(a());  // no RECV posted: the SEND waits
  EXPECT_EQ(a().outstanding(), 1u);

  ASSERT_TRUE(b().PostRecv(22, {dst_region.get(), 0, 256}).ok());
  // The receiver's Poll sees the waiting SEND arrive.
  WorkCompletion recv = WaitOne(b());
  EXPECT_EQ(recv.wr_id, 22u);
  EXPECT_EQ(recv.op, WorkOp::kRecv);
  EXPECT_EQ(recv.code, Code::kOk) << recv.detail;
  EXPECT_EQ(recv.byte_len, 200u);
  WorkCompletion send = WaitOne(a());
  EXPECT_EQ(send.wr_id, 11u);
  EXPECT_EQ(send.op, WorkOp::kSend);
  EXPECT_EQ(send.code, Code::kOk);
  EXPECT_EQ(send.byte_len, 200u);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 200), src);
  EXPECT_EQ(dst[200], 0);
}

TEST_P(TransportConformance, SendConsumesOldestRecvFirst) {
  std::vector<uint8_t> src = Pattern(16, 1);
  std::vector<uint8_t> dst(48, 0);
  auto src_region = Register(a_dev(), src, kAccessLocal);
  auto dst_region = Register(b_dev(), dst, kAccessLocal);
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(b().PostRecv(100 + i, {dst_region.get(), 16 * i, 16}).ok());
  }
  ASSERT_TRUE(a().PostSend(1, {src_region.get(), 0, 4}).ok());
  ASSERT_TRUE(a().PostSend(2, {src_region.get(), 4, 12}).ok());
  auto sends = WaitFor(a(), 2);
  ASSERT_EQ(sends.size(), 2u);
  EXPECT_EQ(sends[0].wr_id, 1u);
  EXPECT_EQ(sends[1].wr_id, 2u);
  auto recvs = WaitFor(b(), 2);
  ASSERT_EQ(recvs.size(), 2u);
  EXPECT_EQ(recvs[0].wr_id, 100u);
  EXPECT_EQ(recvs[0].byte_len, 4u);
  EXPECT_EQ(recvs[1].wr_id, 101u);
  EXPECT_EQ(recvs[1].byte_len, 12u);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 4),
            std::vector<uint8_t>(src.begin(), src.begin() + 4));
  EXPECT_EQ(std::vector<uint8_t>(dst.begin() + 16, dst.begin() + 28),
            std::vector<uint8_t>(src.begin() + 4, src.end()));
  EXPECT_EQ(b().outstanding(), 1u);  // the third RECV is still posted
}

TEST_P(TransportConformance, SendLargerThanRecvFailsBothOutOfRange) {
  MCDMA_REQUIRE_FEATURE(Feature::kSendMeetsRecv);
  std::vector<uint8_t> src = Pattern(64, 1);
  std::vector<uint8_t> dst(64, 0);
  auto src_region = Register(a_dev(), src, kAccessLocal);
  auto dst_region = Register(b_dev(), dst, kAccessLocal);
  ASSERT_TRUE(b().PostRecv(2, {dst_region.get(), 0, 32}).ok());
  ASSERT_TRUE(b().PostRecv(3, {dst_region.get(), 32, 32}).ok());
  ASSERT_TRUE(a().PostSend(1, {src_region.get(), 0, 33}).ok());
  ASSERT_TRUE(a().PostSend(4, {src_region.get(), 0, 32}).ok());
  auto sends = WaitFor(a(), 2);
  auto recvs = WaitFor(b(), 2);
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

TEST_P(TransportConformance, WaitingSendHoldsBackLaterRequests) {
  MCDMA_REQUIRE_FEATURE(Feature::kSendMeetsRecv);
  std::vector<uint8_t> src = Pattern(32, 1);
  std::vector<uint8_t> remote(32, 0);
  std::vector<uint8_t> inbox(32, 0);
  auto src_region = Register(a_dev(), src, kAccessLocal);
  auto remote_region = Register(b_dev(), remote, kAccessRemoteWrite);
  auto inbox_region = Register(b_dev(), inbox, kAccessLocal);
  ASSERT_TRUE(a().PostSend(1, {src_region.get(), 0, 8}).ok());
  ASSERT_TRUE(a().PostWrite(2, {src_region.get(), 0, 32},
                            {remote_region->RemoteAddr(0), remote_region->rkey()})
                  .ok());
  ExpectQuiet(a());
  EXPECT_EQ(remote, std::vector<uint8_t>(32, 0)) << "the WRITE ran ahead of the waiting SEND";

  ASSERT_TRUE(b().PostRecv(3, {inbox_region.get(), 0, 32}).ok());
  auto wcs = WaitFor(a(), 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(remote, src);
}

TEST_P(TransportConformance, EveryPostedRequestCompletesExactlyOnce) {
  MCDMA_REQUIRE_FEATURE(Feature::kRemoteErrorKeepsUp);
  std::vector<uint8_t> buf = Pattern(4096, 3);
  std::vector<uint8_t> open(4096, 0);
  std::vector<uint8_t> closed(4096, 0);
  auto region = Register(a_dev(), buf, kAccessLocal);
  auto open_region = Register(b_dev(), open, kAccessRemoteRead | kAccessRemoteWrite);
  auto closed_region = Register(b_dev(), closed, kAccessLocal);
  std::map<uint64_t, int> posted;  // wr_id -> completions seen
  uint64_t last_id = 0;
  auto next = [&] {
    posted[++last_id] = 0;
    return last_id;
  };
  uint32_t open_key = open_region->rkey();
  uint32_t closed_key = closed_region->rkey();
  uint64_t open_base = open_region->RemoteAddr(0);
  uint64_t closed_base = closed_region->RemoteAddr(0);
  size_t expected = 0;
  std::array<WorkCompletion, 64> out;
  auto reap = [&] {
    for (Connection* c : {&a(), &b()}) {
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
    ASSERT_TRUE(a().PostWrite(next(), slice, {open_base + off, open_key}).ok());
    ASSERT_TRUE(a().PostRead(next(), slice, {closed_base + off, closed_key}).ok());  // denied
    ASSERT_TRUE(a().PostWrite(next(), slice, {open_base + 4090, open_key}).ok());    // out of range
    ASSERT_TRUE(a().PostSend(next(), {region.get(), off, 48}).ok());                 // waits
    // Every other RECV is smaller than the SEND it meets.
    ASSERT_TRUE(b().PostRecv(next(), {open_region.get(), off, round % 2 == 0 ? 64u : 32u}).ok());
    expected += 5;
    if (round % 3 == 0) reap();
  }
  auto deadline = steady_clock::now() + kWait;
  while (expected > 0 && steady_clock::now() < deadline) {
    reap();
    std::this_thread::sleep_for(milliseconds(1));
  }
  for (const auto& [wr_id, seen] : posted) EXPECT_EQ(seen, 1) << "wr_id " << wr_id;
  EXPECT_EQ(a().outstanding(), 0u);
  EXPECT_EQ(b().outstanding(), 0u);
}

}  // namespace
}  // namespace mcdma::driver::conformance
