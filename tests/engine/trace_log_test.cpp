// TraceLog (engine/trace_log.hpp): bounded, newest kept, read by session.
#include "engine/trace_log.hpp"

#include <gtest/gtest.h>

namespace mcdma::daemon {
namespace {

TraceRecord Record(uint64_t session, uint64_t submit_ns) {
  TraceRecord r;
  r.session = session;
  r.submit_ns = submit_ns;
  return r;
}

TEST(TraceLog, KeepsTheNewestUpToItsCapacity) {
  TraceLog log;
  for (uint64_t i = 1; i <= TraceLog::kCapacity + 10; ++i) log.Add(Record(1, i));
  EXPECT_EQ(log.recorded(), TraceLog::kCapacity + 10);
  auto all = log.Snapshot(0, 0);
  ASSERT_EQ(all.size(), TraceLog::kCapacity);
  EXPECT_EQ(all.front().submit_ns, 11u);  // the oldest ten went
  EXPECT_EQ(all.back().submit_ns, TraceLog::kCapacity + 10);
}

TEST(TraceLog, ASessionsNewestOldestFirst) {
  TraceLog log;
  for (uint64_t i = 1; i <= 10; ++i) log.Add(Record(i % 2 == 0 ? 2 : 3, i));
  auto mine = log.Snapshot(2, 3);
  ASSERT_EQ(mine.size(), 3u);
  EXPECT_EQ(mine[0].submit_ns, 6u);
  EXPECT_EQ(mine[1].submit_ns, 8u);
  EXPECT_EQ(mine[2].submit_ns, 10u);
  EXPECT_EQ(log.Snapshot(2, 0).size(), 5u);
  EXPECT_TRUE(log.Snapshot(7, 0).empty());
  log.Clear();
  EXPECT_TRUE(log.Snapshot(0, 0).empty());
  EXPECT_EQ(log.recorded(), 10u);
}

}  // namespace
}  // namespace mcdma::daemon
