// `mcdmactl bench`'s figures and outputs (bench_report.hpp).
#include <gtest/gtest.h>

#include <sstream>

#include "bench_report.hpp"

namespace mcdma::tools {
namespace {

BenchRow Row(std::string test, uint64_t bytes, uint32_t depth, uint64_t first, uint64_t count) {
  BenchRow r;
  r.test = std::move(test);
  r.bytes = bytes;
  r.depth = depth;
  for (uint64_t i = 0; i < count; ++i) r.samples_ns.push_back((first + i) * 1000);
  r.transport = "tcp";
  return r;
}

TEST(BenchReport, NearestRankPercentilesOverUnsortedSamples) {
  BenchRow r = Row("call", 8, 1, 1, 100);  // 1..100 us
  std::swap(r.samples_ns[0], r.samples_ns[99]);
  BenchFigures f = Summarize(r);
  EXPECT_EQ(f.count, 100u);
  EXPECT_DOUBLE_EQ(f.min_us, 1);
  EXPECT_DOUBLE_EQ(f.median_us, 50);
  EXPECT_DOUBLE_EQ(f.p95_us, 95);
  EXPECT_DOUBLE_EQ(f.p99_us, 99);
  EXPECT_DOUBLE_EQ(f.max_us, 100);
  EXPECT_DOUBLE_EQ(f.avg_us, 50.5);
  EXPECT_EQ(Summarize(BenchRow{}).count, 0u);
}

TEST(BenchReport, BandwidthIsBytesTimesOperationsOverTheRowsTime) {
  BenchRow r = Row("read_bw", 1 << 20, 4, 1, 1000);
  r.elapsed_s = 0.5;
  BenchFigures f = Summarize(r);
  EXPECT_NEAR(f.gbit_per_s, 1000.0 * (1 << 20) * 8 / 0.5 / 1e9, 1e-9);
  EXPECT_NEAR(f.mops_per_s, 0.002, 1e-12);
}

TEST(BenchReport, TextJsonAndRawCarryEveryRow) {
  BenchReport rep{"host-b", "host-a", {Row("call", 8, 1, 10, 3), Row("write_bw", 4096, 2, 5, 2)}};
  rep.rows[1].elapsed_s = 1;
  rep.rows[1].error = "LINK_DOWN: gone";
  std::ostringstream text;
  RenderBenchText(rep, text);
  EXPECT_NE(text.str().find("mcdma bench: host-b -> host-a"), std::string::npos);
  EXPECT_NE(text.str().find("median[us]"), std::string::npos);
  EXPECT_NE(text.str().find("STOPPED: LINK_DOWN: gone"), std::string::npos) << text.str();
  std::ostringstream json;
  RenderBenchJson(rep, json);
  EXPECT_NE(json.str().find("\"test\":\"call\",\"bytes\":8,\"depth\":1,\"samples\":3"),
            std::string::npos)
      << json.str();
  EXPECT_NE(json.str().find("\"error\":\"LINK_DOWN: gone\""), std::string::npos);
  std::ostringstream raw;
  WriteBenchRaw(rep, raw);
  EXPECT_EQ(raw.str(),
            "test,bytes,depth,index,ns\ncall,8,1,0,10000\ncall,8,1,1,11000\ncall,8,1,2,12000\n"
            "write_bw,4096,2,0,5000\nwrite_bw,4096,2,1,6000\n");
}

TEST(BenchReport, SizesTakeBinarySuffixesAndRefuseTheRest) {
  uint64_t b = 0;
  EXPECT_TRUE(ParseByteSize("4096", b) && b == 4096);
  EXPECT_TRUE(ParseByteSize("4K", b) && b == 4096);
  EXPECT_TRUE(ParseByteSize("1M", b) && b == (1u << 20));
  EXPECT_TRUE(ParseByteSize("2g", b) && b == (2ull << 30));
  for (const char* bad :
       {"", "0", "K", "4KB", "-1", "1.5M", "99999999999999999999", "17179869184G"})
    EXPECT_FALSE(ParseByteSize(bad, b)) << bad;
}

}  // namespace
}  // namespace mcdma::tools
