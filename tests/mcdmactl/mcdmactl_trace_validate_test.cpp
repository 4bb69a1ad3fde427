// `mcdmactl trace`'s breakdown (trace_report.hpp) and what `mcdmactl
// validate`'s responder lets through (validate_wire.hpp), with perftest's
// output readers (tools/perftest).
#include <gtest/gtest.h>

#include <sstream>

#include "perftest_output.hpp"
#include "trace_report.hpp"
#include "validate/validate_wire.hpp"

namespace mcdma::tools {
namespace {

v1::TraceCall Call(uint64_t base) {
  v1::TraceCall c;
  c.set_peer("host-b");
  c.set_transport("verbs");
  c.set_request_bytes(1024);
  c.set_code("OK");
  c.set_submit_ns(base);
  c.set_pickup_ns(base + 1000);  // app -> engine 1 us
  c.set_posted_ns(base + 3000);  // post 2 us
  c.set_remote_timed(true);
  c.set_remote_ns(20000);                   // peer: 20 us, of which
  c.set_remote_app_ns(15000);               // the app 15 us
  c.set_reply_ns(base + 3000 + 50000);      // link both ways: 50 - 20 = 30 us
  c.set_completed_ns(base + 3000 + 54000);  // complete 4 us
  return c;
}

const TraceStage& Stage(const TraceBreakdown& b, const std::string& name) {
  for (const TraceStage& s : b.stages) {
    if (s.name == name) return s;
  }
  static TraceStage none;
  ADD_FAILURE() << "no stage " << name;
  return none;
}

TEST(TraceReport, EachStageIsTheDurationBetweenItsStamps) {
  std::vector<v1::TraceCall> calls = {Call(1'000'000), Call(2'000'000)};
  std::vector<uint64_t> seen = {1'000'000 + 57000 + 6000, 2'000'000 + 57000 + 6000};
  TraceBreakdown b = BreakDown(calls, seen);
  EXPECT_EQ(b.calls, 2u);
  EXPECT_EQ(b.transport, "verbs");
  EXPECT_EQ(Stage(b, "app -> engine").samples_ns, (std::vector<uint64_t>{1000, 1000}));
  EXPECT_EQ(Stage(b, "engine: post").samples_ns, (std::vector<uint64_t>{2000, 2000}));
  EXPECT_EQ(Stage(b, "link, both ways").samples_ns, (std::vector<uint64_t>{30000, 30000}));
  EXPECT_EQ(Stage(b, "peer daemon").samples_ns, (std::vector<uint64_t>{5000, 5000}));
  EXPECT_EQ(Stage(b, "peer app").samples_ns, (std::vector<uint64_t>{15000, 15000}));
  EXPECT_EQ(Stage(b, "engine: complete").samples_ns, (std::vector<uint64_t>{4000, 4000}));
  EXPECT_EQ(Stage(b, "engine -> app").samples_ns, (std::vector<uint64_t>{6000, 6000}));
  EXPECT_EQ(Stage(b, "total").samples_ns, (std::vector<uint64_t>{63000, 63000}));
  std::ostringstream text;
  RenderTraceText(b, text);
  EXPECT_NE(text.str().find("link, both ways"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("30.0"), std::string::npos) << text.str();
  std::ostringstream json;
  RenderTraceJson(b, json);
  EXPECT_NE(json.str().find("\"stage\":\"peer app\""), std::string::npos) << json.str();
}

TEST(TraceReport, AStageNobodyTimedIsLeftOutNotMadeUp) {
  v1::TraceCall c = Call(1'000'000);
  c.set_remote_timed(false);  // a peer that predates tracing
  c.set_posted_ns(0);         // never posted as such
  TraceBreakdown b = BreakDown({c}, {});
  EXPECT_TRUE(Stage(b, "engine: post").samples_ns.empty());
  EXPECT_TRUE(Stage(b, "link, both ways").samples_ns.empty());
  EXPECT_TRUE(Stage(b, "peer app").samples_ns.empty());
  for (const TraceStage& s : b.stages) EXPECT_NE(s.name, "engine -> app");
  EXPECT_EQ(Stage(b, "total").samples_ns, (std::vector<uint64_t>{57000}));
  std::ostringstream text;
  RenderTraceText(b, text);
  EXPECT_NE(text.str().find("(not timed)"), std::string::npos) << text.str();
}

TEST(ValidateWire, OnlyPerftestsOwnNumbersPassToTheResponder) {
  using validate::CheckPerftestArgs;
  EXPECT_EQ(CheckPerftestArgs({"-s", "1024", "-n", "1101", "-U"}), "");
  EXPECT_EQ(
      CheckPerftestArgs({"-s", "1048576", "-n", "16", "--report_gbits", "-t", "16", "-o", "16"}),
      "");
  EXPECT_NE(CheckPerftestArgs({"-s"}), "");
  EXPECT_NE(CheckPerftestArgs({"-s", "0"}), "");
  EXPECT_NE(CheckPerftestArgs({"-s", "12x"}), "");
  EXPECT_NE(CheckPerftestArgs({"-n", "99999999"}), "");
  EXPECT_NE(CheckPerftestArgs({"--output", "/etc/passwd"}), "");
  EXPECT_NE(CheckPerftestArgs({"-d", "mlx5_0"}), "");  // the responder picks its device
  EXPECT_TRUE(validate::AllowedTool("ib_send_lat"));
  EXPECT_TRUE(validate::AllowedTool("ib_read_bw"));
  EXPECT_FALSE(validate::AllowedTool("sh"));
  EXPECT_FALSE(validate::AllowedTool("/usr/bin/ib_send_lat"));
}

TEST(PerftestOutput, SamplesAndBandwidthAreRead) {
  auto nanos =
      perftest::ParseUnsortedLatency(" #bytes #iterations\n#, usec\n1, 2.50\n2, 3.00\n\n---\n", 2);
  ASSERT_TRUE(nanos.ok()) << nanos.status().ToString();
  EXPECT_EQ(*nanos, (std::vector<uint64_t>{5000, 6000}));
  EXPECT_FALSE(perftest::ParseUnsortedLatency("#, usec\n1, inf\n", 2).ok());
  auto gbps = perftest::ParseAverageBandwidth(
      " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
      " 1048576    16               0.43               0.40              0.000048\n",
      1048576);
  ASSERT_TRUE(gbps.ok()) << gbps.status().ToString();
  EXPECT_DOUBLE_EQ(*gbps, 0.05);
  EXPECT_EQ(perftest::ClockSamplingFailure("", "Correlation coefficient r^2: 0.85 < 0.9\n"),
            "Correlation coefficient r^2: 0.85 < 0.9");
  EXPECT_EQ(perftest::ClockSamplingFailure("fine", ""), "");
}

}  // namespace
}  // namespace mcdma::tools
