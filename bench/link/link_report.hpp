// mcdma_bench_link's report: the call table (harness/report.hpp's Row, one
// per mechanism and payload), the bulk table, the three targets and --json.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/report.hpp"
#include "link_orchestrator.hpp"
#include "mcdma/status.hpp"

namespace mcdma::bench {

// A call row that did not run because its tool is missing is "skipped",
// not failed: Row::ok is false and `skipped` names its mechanism.
struct CallRows {
  std::vector<harness::Row> rows;
  std::vector<std::string> skipped;  // mechanism keys
};

// One bulk row: a mechanism in one direction. Figures in GB/s (10^9 B/s),
// one per timed transfer of `bytes`.
struct BulkRow {
  std::string mechanism;  // "daemon", "tcp", "iperf3"
  std::string label;
  std::string direction;  // "A->B" or "B->A"
  uint64_t bytes = 0;
  bool ok = false;
  bool skipped = false;  // with ok false: not run, `error` says why
  std::string error;
  std::vector<double> gbps;
};

// call p50 <= 1.5 x raw TCP p50 and >= 2x faster than gRPC p50 at every
// payload; daemon write and read >= 85% of raw TCP in the same direction.
// Keys: "call_vs_tcp", "call_vs_grpc", "bulk_vs_tcp".
std::vector<harness::Verdict> EvaluateLinkTargets(const CallRows& calls,
                                                  const std::vector<size_t>& payloads,
                                                  const std::vector<BulkRow>& bulk);
// "floor: ..." — what one relay process per host costs on this machine
// (tcprelay p50 / tcpspin p50) and how far the daemon is above that floor
// (daemon p50 / tcprelay p50), per payload; empty without those rows.
std::string RelayFloorLine(const CallRows& calls, const std::vector<size_t>& payloads);

void PrintCallTable(FILE* out, const CallRows& calls);
void PrintBulkTable(FILE* out, const std::vector<BulkRow>& bulk);

// Where the run happened; the rest of its settings are the plan's.
struct LinkRunInfo {
  std::string hosts;  // where the hosts are and how they are joined
  std::string link;   // DaemonPair::note() ("" when the daemons did not run)
  bool loopback = false;
};
Status WriteLinkJson(const std::string& path, const LinkRunInfo& info, const LinkPlan& plan,
                     const CallRows& calls, const std::vector<BulkRow>& bulk,
                     const std::vector<harness::Verdict>& targets);

}  // namespace mcdma::bench
