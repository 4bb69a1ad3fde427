#include "engine/transfer_table.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "driver/loop/loop_transport.hpp"
#include "fake_clock.hpp"

namespace mcdma::daemon {
namespace {
using std::chrono::milliseconds;
using testing::FakeClock;

// A loop device whose registrations are at most two pages: a buffer of
// more is registered in pieces.
class TransferChunking : public ::testing::Test {
 protected:
  void SetUp() override {
    caps_ = driver::loop::DefaultLoopCaps();
    caps_.max_registration_bytes = 2 * PageSize();
    auto device = driver::loop::CreateLoopDevice(&caps_);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    device_ = std::move(device).value();
    auto seg = ShmSegment::Create(ShmSegment::NewName('t'), 5 * PageSize(), getuid());
    ASSERT_TRUE(seg.ok()) << seg.status().ToString();
    buffer_ = std::make_shared<BufferRecord>();
    buffer_->id = 1;
    buffer_->segment = std::move(seg).value();
    EXPECT_TRUE(buffer_->segment.Unlink().ok());
    auto reg =
        RegisterPieces(*device_, buffer_->segment.data(), buffer_->size(), driver::kAccessLocal);
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    buffer_->reg(Transport::kLoop) = std::move(reg).value();
  }

  // A WRITE of `length` bytes from local offset `off` to a peer export cut
  // into pieces of `remote_piece` bytes.
  TransferOp PeerWrite(uint64_t off, uint64_t length, uint64_t remote_piece) {
    auto pe = std::make_shared<PeerExport>();
    pe->length = 64 * PageSize();
    for (uint64_t at = 0; at < pe->length; at += remote_piece)
      pe->keys["tcp"].push_back({at, remote_piece, 0x10000 + at, 7});
    TransferOp op;
    op.id = 1;
    op.local = buffer_;
    op.local_offset = off;
    op.peer = pe;
    op.length = length;
    return op;
  }

  // Posts (on paper) every piece of `op`; returns their sizes.
  std::vector<uint64_t> Cut(TransferOp& op, uint64_t chunk) {
    std::vector<uint64_t> sizes;
    while (op.posted < op.length) {
      Piece p = NextPiece(op, buffer_->reg(Transport::kLoop), device_->caps(), chunk,
                          op.peer ? op.peer->KeysFor("tcp") : nullptr);
      EXPECT_GT(p.bytes, 0U);
      EXPECT_EQ(p.local.length, p.bytes);
      sizes.push_back(p.bytes);
      op.posted += p.bytes;
    }
    return sizes;
  }

  driver::Caps caps_;
  std::unique_ptr<driver::Device> device_;
  std::shared_ptr<BufferRecord> buffer_;
};

TEST_F(TransferChunking, PiecesStopAtTheChunkAndTheLocalRegistrationPieces) {
  const uint64_t page = PageSize();
  EXPECT_EQ(buffer_->reg(Transport::kLoop).pieces.size(), 3U);  // 2 + 2 + 1 pages
  TransferOp op = PeerWrite(page / 2, 4 * page, 64 * page);
  // From half a page in: the rest of the first registration piece, then
  // whole pieces, then what is left.
  EXPECT_EQ(Cut(op, 64 * page), (std::vector<uint64_t>{page + page / 2, 2 * page, page / 2}));
  op = PeerWrite(0, 3 * page, 64 * page);
  EXPECT_EQ(Cut(op, page), (std::vector<uint64_t>{page, page, page}));
}

TEST_F(TransferChunking, PiecesStopAtTheRemotePiecesWithTheirAddressAndKey) {
  const uint64_t page = PageSize();
  TransferOp op = PeerWrite(0, page, page / 4);
  Piece first = NextPiece(op, buffer_->reg(Transport::kLoop), device_->caps(), 64 * page,
                          op.peer->KeysFor("tcp"));
  EXPECT_EQ(first.bytes, page / 4);
  EXPECT_EQ(first.remote.addr, 0x10000U);
  EXPECT_EQ(first.remote.rkey, 7U);
  op.posted = page / 4 + 10;  // mid-piece
  Piece mid = NextPiece(op, buffer_->reg(Transport::kLoop), device_->caps(), 64 * page,
                        op.peer->KeysFor("tcp"));
  EXPECT_EQ(mid.bytes, page / 4 - 10);
  EXPECT_EQ(mid.remote.addr, 0x10000U + page / 4 + 10);
}

TEST_F(TransferChunking, ReadsAreBoundByTheReadLimit) {
  const uint64_t page = PageSize();
  TransferOp op = PeerWrite(0, 2 * page, 64 * page);
  op.is_read = true;
  caps_.max_read_bytes = page / 2;
  auto device = driver::loop::CreateLoopDevice(&caps_);
  ASSERT_TRUE(device.ok());
  Piece p = NextPiece(op, buffer_->reg(Transport::kLoop), (*device)->caps(), 64 * page,
                      op.peer->KeysFor("tcp"));
  EXPECT_EQ(p.bytes, page / 2);
}

TransferOp Op(uint64_t id, uint64_t session, uint64_t link, Clock::time_point deadline) {
  TransferOp op;
  op.id = id;
  op.session = session;
  op.link = link;
  op.length = 100;
  op.deadline = deadline;
  return op;
}

TEST(TransferTable, DeadlinesFailOpsTimeoutByTheClock) {
  FakeClock clock;
  TransferTable t;
  t.Add(Op(1, 1, 0, clock.now() + milliseconds(10)));
  t.Add(Op(2, 1, 0, clock.now() + milliseconds(30)));
  t.ExpireDeadlines(clock.now());
  EXPECT_EQ(t.Find(1)->error, Code::kOk);
  clock.Advance(milliseconds(10));
  t.ExpireDeadlines(clock.now());
  EXPECT_EQ(t.Find(1)->error, Code::kTimeout);
  EXPECT_EQ(t.Find(1)->error_detail, "transfer did not finish before the deadline");
  EXPECT_EQ(t.Find(2)->error, Code::kOk);
  // A timed-out op is reported at once even with pieces still posted, and
  // stays until they drain.
  t.Find(1)->outstanding = 2;
  std::vector<uint64_t> finished;
  EXPECT_TRUE(t.FinishAndReap([&](TransferOp& op) { finished.push_back(op.id); }));
  EXPECT_EQ(finished, (std::vector<uint64_t>{1}));
  ASSERT_NE(t.Find(1), nullptr);
  t.Find(1)->outstanding = 0;
  EXPECT_FALSE(t.FinishAndReap([&](TransferOp& op) { finished.push_back(op.id); }));
  EXPECT_EQ(t.Find(1), nullptr);
  EXPECT_EQ(t.size(), 1U);
}

TEST(TransferTable, FinishedOpsAreReportedOnceWhenNothingIsPosted) {
  FakeClock clock;
  TransferTable t;
  t.Add(Op(1, 1, 0, clock.now() + milliseconds(10)));
  t.Find(1)->done = 100;
  t.Find(1)->outstanding = 1;
  int calls = 0;
  EXPECT_FALSE(t.FinishAndReap([&](TransferOp&) { ++calls; }));
  t.Find(1)->outstanding = 0;
  EXPECT_TRUE(t.FinishAndReap([&](TransferOp& op) {
    ++calls;
    EXPECT_TRUE(op.completed);
  }));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(t.empty());
}

TEST(TransferTable, ALinkOrASessionGoingEndsItsOps) {
  FakeClock clock;
  TransferTable t;
  auto deadline = clock.now() + milliseconds(10);
  t.Add(Op(1, 1, 4, deadline));
  t.Add(Op(2, 2, 4, deadline));
  t.Add(Op(3, 2, 0, deadline));
  t.Find(1)->outstanding = 3;
  EXPECT_TRUE(t.AnyLocal());
  EXPECT_EQ(t.CountOnLink(4), 2U);
  t.LinkGone(4, Code::kLinkDown, "link to 'b' went down");
  EXPECT_EQ(t.Find(1)->error, Code::kLinkDown);
  EXPECT_EQ(t.Find(1)->error_detail, "link to 'b' went down");
  EXPECT_EQ(t.Find(1)->outstanding, 0U);
  EXPECT_EQ(t.Find(3)->error, Code::kOk);
  t.SessionGone(2);
  EXPECT_TRUE(t.Find(2)->completed);
  EXPECT_EQ(t.Find(2)->error, Code::kLinkDown);  // the first error stays
  EXPECT_TRUE(t.Find(3)->completed);
  EXPECT_EQ(t.Find(3)->error, Code::kCancelled);
  std::vector<uint64_t> told;
  t.FinishAndReap([&](TransferOp& op) { told.push_back(op.id); });
  EXPECT_EQ(told, (std::vector<uint64_t>{1}));  // session 2 is not told
  EXPECT_TRUE(t.empty());
}

TEST(TransferTable, RevokeAcksWaitForPostedPiecesToThatExport) {
  FakeClock clock;
  TransferTable t;
  auto pe = std::make_shared<PeerExport>();
  pe->export_id = 50;
  TransferOp op = Op(1, 1, 4, clock.now() + milliseconds(10));
  op.peer = pe;
  op.outstanding = 1;
  t.Add(std::move(op));
  t.OweRevokeAck(4, 50);
  t.OweRevokeAck(4, 51);
  t.OweRevokeAck(5, 50);
  auto ready = t.TakeReadyRevokeAcks();
  EXPECT_EQ(ready, (std::vector<std::pair<uint64_t, uint64_t>>{{4, 51}, {5, 50}}));
  EXPECT_TRUE(t.owes_revoke_acks());
  t.Find(1)->outstanding = 0;
  ready = t.TakeReadyRevokeAcks();
  EXPECT_EQ(ready, (std::vector<std::pair<uint64_t, uint64_t>>{{4, 50}}));
  EXPECT_FALSE(t.owes_revoke_acks());
  t.OweRevokeAck(4, 52);
  t.LinkGone(4, Code::kLinkDown, "down");
  EXPECT_FALSE(t.owes_revoke_acks());
}

}  // namespace
}  // namespace mcdma::daemon
