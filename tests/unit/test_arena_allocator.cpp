// ArenaAllocator: first-fit allocation in units, exhaustion, coalescing, and
// Free refusing anything that is not exactly a live allocation (the daemon
// relies on that to reject forged RELEASE descriptors).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "mcdma_internal/arena_allocator.hpp"

namespace mcdma {
namespace {

constexpr uint64_t kBase = 4096;
constexpr uint64_t kUnit = 256;

TEST(ArenaAllocator, AllocatesUnitRoundedRangesInsideTheArena) {
  ArenaAllocator arena(kBase, 16 * kUnit, kUnit);
  EXPECT_EQ(arena.capacity(), 16u * kUnit);
  EXPECT_EQ(arena.free_bytes(), 16u * kUnit);

  std::optional<uint64_t> a = arena.Allocate(1);
  std::optional<uint64_t> b = arena.Allocate(kUnit + 1);
  std::optional<uint64_t> c = arena.Allocate(kUnit);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, kBase);
  EXPECT_EQ(*b, kBase + kUnit);
  EXPECT_EQ(*c, kBase + 3 * kUnit) << "the second allocation took two units";
  EXPECT_EQ(arena.free_bytes(), 12u * kUnit);
  EXPECT_EQ(arena.live_allocations(), 3u);
}

TEST(ArenaAllocator, ZeroByteRequestTakesOneUnit) {
  ArenaAllocator arena(0, 4 * kUnit, kUnit);
  EXPECT_EQ(arena.Rounded(0), kUnit);
  ASSERT_TRUE(arena.Allocate(0).has_value());
  EXPECT_EQ(arena.free_bytes(), 3u * kUnit);
}

TEST(ArenaAllocator, CapacityRoundsDownToWholeUnits) {
  ArenaAllocator arena(0, 3 * kUnit + 100, kUnit);
  EXPECT_EQ(arena.capacity(), 3u * kUnit);
  EXPECT_FALSE(arena.Allocate(3 * kUnit + 1).has_value());
  EXPECT_TRUE(arena.Allocate(3 * kUnit).has_value());
}

TEST(ArenaAllocator, ExhaustionReturnsNulloptAndChangesNothing) {
  ArenaAllocator arena(kBase, 4 * kUnit, kUnit);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(arena.Allocate(kUnit).has_value());
  EXPECT_FALSE(arena.Allocate(1).has_value());
  EXPECT_EQ(arena.free_bytes(), 0u);
  EXPECT_EQ(arena.live_allocations(), 4u);

  ArenaAllocator empty(kBase, kUnit - 1, kUnit);
  EXPECT_EQ(empty.capacity(), 0u);
  EXPECT_FALSE(empty.Allocate(1).has_value());
}

TEST(ArenaAllocator, FragmentedSpaceDoesNotSatisfyALargerRequest) {
  ArenaAllocator arena(0, 4 * kUnit, kUnit);
  std::vector<uint64_t> offs(4);
  for (uint64_t& off : offs) off = *arena.Allocate(kUnit);
  ASSERT_TRUE(arena.Free(offs[0], kUnit));
  ASSERT_TRUE(arena.Free(offs[2], kUnit));
  EXPECT_EQ(arena.free_bytes(), 2u * kUnit);
  EXPECT_FALSE(arena.Allocate(2 * kUnit).has_value());
  // First fit: a single unit lands in the lowest hole.
  EXPECT_EQ(arena.Allocate(kUnit), offs[0]);
}

TEST(ArenaAllocator, FreeCoalescesWithBothNeighbours) {
  ArenaAllocator arena(kBase, 4 * kUnit, kUnit);
  std::vector<uint64_t> offs(4);
  for (uint64_t& off : offs) off = *arena.Allocate(kUnit);
  ASSERT_TRUE(arena.Free(offs[0], kUnit));
  ASSERT_TRUE(arena.Free(offs[2], kUnit));
  ASSERT_TRUE(arena.Free(offs[1], kUnit));  // joins the holes on both sides
  EXPECT_EQ(arena.Allocate(3 * kUnit), kBase);
  ASSERT_TRUE(arena.Free(kBase, 3 * kUnit));
  ASSERT_TRUE(arena.Free(offs[3], kUnit));  // joins the hole before it
  EXPECT_EQ(arena.free_bytes(), 4u * kUnit);
  EXPECT_EQ(arena.live_allocations(), 0u);
  EXPECT_EQ(arena.Allocate(4 * kUnit), kBase) << "the whole arena is one range again";
}

TEST(ArenaAllocator, FreeRejectsForgedOffsetsAndSizes) {
  ArenaAllocator arena(kBase, 8 * kUnit, kUnit);
  uint64_t a = *arena.Allocate(2 * kUnit);
  uint64_t b = *arena.Allocate(kUnit);
  const uint64_t free_before = arena.free_bytes();

  EXPECT_FALSE(arena.Free(a + kUnit, kUnit)) << "inside an allocation, not its start";
  EXPECT_FALSE(arena.Free(a + 1, 2 * kUnit)) << "unaligned";
  EXPECT_FALSE(arena.Free(kBase + 6 * kUnit, kUnit)) << "never allocated";
  EXPECT_FALSE(arena.Free(0, kUnit)) << "below the arena";
  EXPECT_FALSE(arena.Free(kBase + 64 * kUnit, kUnit)) << "beyond the arena";
  EXPECT_FALSE(arena.Free(a, kUnit)) << "smaller size class than allocated";
  EXPECT_FALSE(arena.Free(b, 2 * kUnit)) << "larger size class than allocated";
  EXPECT_EQ(arena.free_bytes(), free_before);
  EXPECT_EQ(arena.live_allocations(), 2u);

  // Same size class is accepted; a second free of it is not.
  EXPECT_TRUE(arena.Free(a, 2 * kUnit - 3));
  EXPECT_FALSE(arena.Free(a, 2 * kUnit - 3)) << "double free";
  EXPECT_EQ(arena.free_bytes(), free_before + 2 * kUnit);
}

TEST(ArenaAllocator, TakesTheSmallestRangeThatFitsNotTheFirst) {
  ArenaAllocator arena(kBase, 16 * kUnit, kUnit);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 16; ++i) offs.push_back(*arena.Allocate(kUnit));
  // Holes: 3 units at 0..2, 1 unit at 8.
  for (int i : {0, 1, 2, 8}) ASSERT_TRUE(arena.Free(offs[i], kUnit));
  EXPECT_EQ(arena.free_ranges(), 2u);
  // First fit would split the 3-unit hole; best fit fills the exact one.
  EXPECT_EQ(arena.Allocate(kUnit), offs[8]);
  EXPECT_EQ(arena.Allocate(3 * kUnit), offs[0]);
  EXPECT_FALSE(arena.Allocate(1).has_value());
}

TEST(ArenaAllocator, AQuarterMillionHolesCostALookupNotAWalk) {
  // The daemon half of a hostile session left in 131,072 one-unit holes.
  constexpr uint64_t kUnits = 262'144;
  ArenaAllocator arena(0, kUnits * kUnit, kUnit);
  std::vector<uint64_t> offs;
  offs.reserve(kUnits);
  for (uint64_t i = 0; i < kUnits; ++i) offs.push_back(*arena.Allocate(kUnit));
  for (uint64_t i = 0; i < kUnits; i += 2) ASSERT_TRUE(arena.Free(offs[i], kUnit));
  EXPECT_EQ(arena.free_ranges(), kUnits / 2);
  // A payload larger than any hole fails without taking anything, and one
  // that fits takes a hole: the index answers both (the walk is gone; its
  // cost is measured by bench/, not here).
  EXPECT_FALSE(arena.Allocate(2 * kUnit).has_value());
  EXPECT_EQ(arena.free_bytes(), kUnits / 2 * kUnit);
  EXPECT_TRUE(arena.Allocate(kUnit).has_value());
  EXPECT_FALSE(arena.Allocate(uint64_t{1} << 62).has_value()) << "no overflow in rounding";
}

}  // namespace
}  // namespace mcdma
