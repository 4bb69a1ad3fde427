// perftest (linux-rdma/perftest: ib_write_lat, ib_write_bw, ib_read_bw) on
// the same two devices the daemons use: the raw-verbs floor each daemon row
// is divided by. The server runs on host B's device, the client on host A's
// and connects to B's address for perftest's out-of-band exchange; the
// RDMA traffic itself uses the RoCE v2 IPv4-mapped GID (-x) of each device.
//
// Every run has a deadline (--perftest-limit for the client, 30 s for the
// server to listen, 10 s for it to finish after the client), and the
// server and client output are kept as <log_dir>/<name>.{server,client}.log.
//
// Threading: the orchestrator's thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mcdma/status.hpp"
#include "perftest_output.hpp"
#include "verbs_options.hpp"

namespace mcdma::bench {

// The output readers (GID choice, sample lists, bandwidth tables) are
// tools/perftest's, shared with `mcdmactl validate`.
using perftest::ParseAverageBandwidth;
using perftest::ParseUnsortedLatency;
using perftest::RoceV2Ipv4GidIndex;

struct PerftestRun {
  std::string tool;               // "ib_write_lat", "ib_write_bw", "ib_read_bw"
  std::vector<std::string> args;  // for both ends, besides -d, -x and -p
  std::string name;               // names the log files
};

// What the client printed, and how long it ran (from exec to exit).
struct PerftestOutput {
  std::string text;    // stdout: the settings and the results
  std::string errors;  // stderr: perftest's warnings (clock, CPU frequency)
  double wall_s = 0;
};

// perftest converts TSC cycles to time with a CPU rate it samples against
// gettimeofday at start-up. Under TCG that sampling can fail outright
// (r^2 of the fit below 0.9: perftest then reports 0 or infinity), or
// differ from /proc/cpuinfo by more than 2%, when perftest uses the sampled
// rate and warns. The line saying either, from stdout or stderr; "" when
// neither.
std::string ClockSamplingFailure(const PerftestOutput& out);
std::string CpuRateConflict(const PerftestOutput& out);

// Runs one server/client pair on TCP port `port` (a fresh one per run, so
// no run waits for the last one's socket). kInternal, with the last lines
// of both ends' output, when either fails.
mcdma::Result<PerftestOutput> RunPerftest(const VerbsPlan& plan, const PerftestRun& run,
                                          uint16_t port);

}  // namespace mcdma::bench
