// What `mcdmactl bench` measured, and how it is printed: perftest-style
// rows (text), one JSON object (--json), every sample (--raw FILE).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace mcdma::tools {

struct BenchRow {
  std::string test;  // "call", "read", "write" (latency), "read_bw", "write_bw"
  uint64_t bytes = 0;
  uint32_t depth = 1;                // operations kept in flight
  std::vector<uint64_t> samples_ns;  // one per operation, in the order they ended
  double elapsed_s = 0;              // the row's wall time (bandwidth rows)
  std::string transport;             // the link's transport when the row ended
  bool link_restarted = false;       // the link's generation changed during the row
  std::string error;                 // non-empty: the row stopped at this error
};

struct BenchFigures {
  uint64_t count = 0;
  double min_us = 0, median_us = 0, p90_us = 0, p95_us = 0, p99_us = 0, max_us = 0, avg_us = 0;
  double gbit_per_s = 0;  // bandwidth rows: bytes x ops / elapsed
  double mops_per_s = 0;
};

// Nearest-rank percentiles over the samples (p in [0, 1]).
BenchFigures Summarize(const BenchRow& row);

struct BenchReport {
  std::string host;  // this host's id
  std::string peer;
  std::vector<BenchRow> rows;
};

void RenderBenchText(const BenchReport& report, std::ostream& out);
void RenderBenchJson(const BenchReport& report, std::ostream& out);
// CSV: test,bytes,depth,index,ns (a header line first).
void WriteBenchRaw(const BenchReport& report, std::ostream& out);

// "4096", "4K", "1M", "2G" (binary units) -> bytes; false for anything else
// (zero included).
bool ParseByteSize(const std::string& text, uint64_t& bytes);

}  // namespace mcdma::tools
