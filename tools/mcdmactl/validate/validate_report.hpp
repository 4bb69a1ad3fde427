// What `mcdmactl validate` found and measured, and how it is written: a
// text report (stdout and report.txt), one JSON object (report.json) and
// every latency sample (samples.csv: test,rail,bytes,index,ns).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace mcdma::tools::validate {

// One pass/fail check: doctor, the link, a byte-verified transfer.
struct Check {
  std::string name;
  bool ok = false;
  std::string detail;
};

// One latency row: QD1 round trips, after the warm-ups.
struct LatencyRow {
  std::string test;  // "call", "write", "read" (through both daemons); "ib_write_lat", ...
  std::string rail;  // "link" for the daemons' rows, else the device pair perftest used
  uint64_t bytes = 0;
  std::vector<uint64_t> samples_ns;
  std::string error;  // non-empty: the row did not run to the end
};

struct BandwidthRow {
  std::string test;  // "write", "read" (daemons, WriteAsync/ReadAsync); "ib_write_bw", ...
  std::string rail;
  uint64_t op_bytes = 0;
  uint64_t total_bytes = 0;
  double mbps = 0;  // 10^6 B/s
  std::string error;
};

struct Report {
  std::string host;
  std::string peer;
  std::vector<std::string> conditions;  // what it ran on: kernel, CPUs, link, profile, rails...
  std::vector<Check> checks;
  std::vector<LatencyRow> latency;
  std::vector<BandwidthRow> bandwidth;
  std::vector<std::string> notes;  // perftest's command lines, skips and why
  bool ok() const;                 // every check passed and no row failed
};

void RenderText(const Report& r, std::ostream& out);
void RenderJson(const Report& r, std::ostream& out);
void WriteSamples(const Report& r, std::ostream& out);

}  // namespace mcdma::tools::validate
