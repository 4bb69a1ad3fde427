// mcdma_bench_link's report: the call table (report.hpp's Row, one per
// mechanism and payload), the bulk table, the three targets and --json.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "report.hpp"

namespace bench {

// A call row that did not run because its tool is missing is "skipped",
// not failed: Row::ok is false and `skipped_calls` names its mechanism.
struct CallRows {
  std::vector<Row> rows;
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

// One acceptance target and whether this run met it.
struct LinkTarget {
  std::string key;  // "call_vs_tcp", "call_vs_grpc", "bulk_vs_tcp"
  std::string description;
  bool measured = false;  // every figure it needs was there
  bool met = false;
  std::string line;  // "target: <description>: MET (<detail>)"
};
// call p50 <= 1.5 x raw TCP p50 and >= 2x faster than gRPC p50 at every
// payload; daemon write and read >= 85% of raw TCP in the same direction.
std::vector<LinkTarget> EvaluateLinkTargets(const CallRows& calls,
                                            const std::vector<size_t>& payloads,
                                            const std::vector<BulkRow>& bulk);
// "floor: ..." — what one relay process per host costs on this machine
// (tcprelay p50 / tcpspin p50) and how far the daemon is above that floor
// (daemon p50 / tcprelay p50), per payload; empty without those rows.
std::string RelayFloorLine(const CallRows& calls, const std::vector<size_t>& payloads);

void PrintCallTable(FILE* out, const CallRows& calls);
void PrintBulkTable(FILE* out, const std::vector<BulkRow>& bulk);

struct LinkRunInfo {
  std::string hosts;  // HostPair::note()
  std::string link;   // DaemonPair::note() ("" when the daemons did not run)
  bool loopback = false;
  int iterations = 0;
  int warmup = 0;
  std::vector<size_t> payloads;
  uint64_t bulk_bytes = 0;
  uint64_t op_bytes = 0;
  int repeats = 0;
  std::string daemon_path;
  unsigned cpus = 0;
  std::string kernel;
};
mcdma::Status WriteLinkJson(const std::string& path, const LinkRunInfo& info, const CallRows& calls,
                            const std::vector<BulkRow>& bulk,
                            const std::vector<LinkTarget>& targets);

}  // namespace bench
